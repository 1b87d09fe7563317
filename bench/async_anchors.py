"""Asynchronous anchors on the main job (issue 47, item 4): training wall time against the staleness bound.

Each run is the main job (``bash scripts/main.sh``, set-up cached, the default executor) with
``--max-staleness K``. For each seed the bounds run back to back, so a drift in the machine's
load falls on every bound alike. Per run it records:

* the training's elapsed wall (the sum of the steps' ``time/step_s``) and the job's;
* the training's CPU-seconds (the ledger) and the wall they bound on this machine, CPU / cores;
* the held-out scores of the untrained and the trained policy;
* the anchors' staleness (``anchors.csv``: the step a group landed at minus the step it was
  submitted at), the pairs the calibrator holds at the end and the anchor groups that landed too
  stale to train.

Each run records how its anchors landed (:data:`LANDING`; runs from before the rule have none and
landed as soon as they were ready), and the report keeps the rules apart.

Each run's summary goes to ``bench/results/async_anchors.jsonl.xz`` (:mod:`bench.archive`) as it
finishes, and a rerun skips what is there; the report is ``async_anchors.{json,md}``: per bound,
mean ± SE over seeds, and each seed's training wall over its bound-0 run's.

A registered screen keeps its runs and report apart (``--name``: ``bench/results/<name>.jsonl.xz``
and ``<name>.{json,md}``), so that its rows pool only its own seeds.

    python -m bench.async_anchors                           # seeds 0 1 2, bounds 0 1 2 4
    python -m bench.async_anchors --seeds 0 --bounds 0 2    # a look
    python -m bench.async_anchors --name async_anchors_k8 --seeds 3 4 5 --bounds 0 8   # the K = 8 screen
    python -m bench.async_anchors --name async_anchors_skip --seeds 50 51 52 --bounds 0 8 --final-anchors skip

``--final-anchors skip`` runs the bounds above 0 with the trainer's ``final_anchors='skip'`` (the
last K steps choose no anchors), kept apart in the report as a landing rule of its own and read
against the same seeds' bound-0 runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.archive import add_run, read_runs
from bench.common import RESULTS, mean_se, rerun_command
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring.schedule import FINAL_ANCHORS

REPO = Path(__file__).resolve().parents[1]
NAME = "async_anchors"
#: How anchors land, recorded per run since the rule changed (runs without it landed as they came in).
LANDING = "exactly K steps late"
FORMER_LANDING = "as ready (before 2026-12-06)"
#: Appended to the landing of runs made with ``--final-anchors skip``.
SKIPPED = ", the last K steps unanchored"


def run_once(seed: int, bound: int, final_anchors: str = "land") -> dict:
    """One main job with staleness bound ``bound`` (and, past bound 0, ``final_anchors``); what the
    results file keeps of it."""
    # Both flags always: they replace whatever the main job's own defaults are.
    final = ["--final-anchors", final_anchors if bound else "land"]
    with tempfile.TemporaryDirectory(prefix="wmrl-async-") as folder:
        out = Path(folder) / "run"
        start = time.perf_counter()
        proc = subprocess.run(["bash", "scripts/main.sh", "--seed", str(seed), "--max-staleness", str(bound), *final,
                               "--output-dir", str(out)], cwd=REPO, capture_output=True, text=True)
        job_wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"main job (seed {seed}, max_staleness {bound}) failed:\n{proc.stderr[-4000:]}")
        results = json.loads((out / "results.json").read_text())
        with (out / "metrics.csv").open(newline="") as fh:
            steps = list(csv.DictReader(fh))
        with (out / "anchors.csv").open(newline="") as fh:
            anchors = list(csv.DictReader(fh))
    reports = {r["policy"]: r["summary"] for r in results["reports"]}
    untrained, trained = (next(s for p, s in reports.items() if p.startswith(prefix))
                          for prefix in ("untrained", "trained"))
    cpu = sum(e["cpu_s"] for e in results["meta"]["ledger"]["totals"].values())
    cores = results["meta"]["cores"]
    staleness = Counter(int(a["landed_step"]) - int(a["step"]) for a in anchors)
    return {"seed": seed, "max_staleness": bound, "job_wall_s": job_wall,
            "train_wall_s": sum(float(r["time/step_s"]) for r in steps),
            "step_wall_s": [float(r["time/step_s"]) for r in steps],
            "train_cpu_s": cpu, "cores": cores, "cpu_bound_wall_s": cpu / cores,
            "heldout_untrained": untrained["score_mean"], "heldout_trained": trained["score_mean"],
            "staleness_samples": {str(k): v for k, v in sorted(staleness.items())},
            "calibrator_pairs": float(steps[-1]["calibration/n_pairs"]),
            "dropped_stale_groups": sum(float(r.get("anchors/dropped_stale") or 0.0) for r in steps),
            "landing": LANDING + (SKIPPED if bound and final_anchors == "skip" else ""), "machine": provenance(),
            "loadavg_1m_at_end": os.getloadavg()[0]}


def landing(run: dict) -> str:
    return run.get("landing", FORMER_LANDING)


def synchronous_rule(rule: str) -> str:
    """The rule of the bound-0 runs a rule's speedups are read against (bound 0 skips nothing)."""
    return rule.removesuffix(SKIPPED)


def summarise(runs: list[dict]) -> list[dict]:
    """Per landing rule and bound: mean ± SE over seeds, and the per-seed ratio of bound 0's training
    wall (same rule, run beside it) to its own."""
    rows = []
    for rule, bound in sorted({(landing(r), r["max_staleness"]) for r in runs}):
        base = {r["seed"]: r["train_wall_s"] for r in runs
                if r["max_staleness"] == 0 and landing(r) == synchronous_rule(rule)}
        mine = sorted((r for r in runs if r["max_staleness"] == bound and landing(r) == rule), key=lambda r: r["seed"])
        speedups = [base[r["seed"]] / r["train_wall_s"] for r in mine if r["seed"] in base]
        staleness = Counter()
        for r in mine:
            staleness.update({int(k): v for k, v in r["staleness_samples"].items()})
        rows.append({"landing": rule, "max_staleness": bound, "seeds": [r["seed"] for r in mine],
                     **{key: mean_se([r[key] for r in mine]) for key in
                        ("train_wall_s", "job_wall_s", "train_cpu_s", "cpu_bound_wall_s", "heldout_trained",
                         "calibrator_pairs", "dropped_stale_groups")},
                     "speedup_vs_synchronous": mean_se(speedups) if speedups else None,
                     "wall_over_bound": mean_se([r["train_wall_s"] / r["cpu_bound_wall_s"] for r in mine]),
                     "first_step_s": mean_se([r["step_wall_s"][0] for r in mine if r.get("step_wall_s")]),
                     "staleness_samples": {str(k): staleness[k] for k in sorted(staleness)}})
    return rows


def tail_readings(runs: list[dict]) -> list[dict]:
    """What bounds each asynchronous run's training wall, per seed (exact landing, beside its bound-0
    run): the last step's share of the wall (it lands every batch in flight), and an estimate of the
    critical path. A bound-0 step's wall in excess of that run's median step is taken as its slowest
    anchor's time; that anchor cannot start before its step starts in the asynchronous run, so the
    run cannot end before ``start + excess`` for any step, whatever the staleness or the order of
    runs. The start times are the asynchronous run's own, its waits included, so the path is an
    estimate, not a bound; it is close to one only where the earlier steps did not wait (the slowest
    earlier step is recorded beside it). The wall over max(CPU bound, critical path) is what
    scheduling could still win."""
    base = {r["seed"]: r for r in runs if r["max_staleness"] == 0 and landing(r) == LANDING and r.get("step_wall_s")}
    out = []
    for r in sorted(runs, key=lambda r: (r["max_staleness"], r["seed"])):
        # A run that skips its final anchors executes none of the late long ones this path reads.
        if r["max_staleness"] == 0 or landing(r) != LANDING or r["seed"] not in base or not r.get("step_wall_s"):
            continue
        synchronous = base[r["seed"]]["step_wall_s"]
        typical = sorted(synchronous)[len(synchronous) // 2]
        starts = [sum(r["step_wall_s"][:i]) for i in range(len(r["step_wall_s"]))]
        path = max(start + max(wall - typical, 0.0) for start, wall in zip(starts, synchronous))
        longest = max(range(len(synchronous)), key=synchronous.__getitem__)
        out.append({"seed": r["seed"], "max_staleness": r["max_staleness"], "train_wall_s": r["train_wall_s"],
                    "last_step_s": r["step_wall_s"][-1], "slowest_earlier_step_s": max(r["step_wall_s"][:-1]),
                    "cpu_bound_wall_s": r["cpu_bound_wall_s"],
                    "critical_path_s": path, "longest_synchronous_step": longest,
                    "longest_synchronous_step_s": synchronous[longest],
                    "wall_over_attainable": r["train_wall_s"] / max(path, r["cpu_bound_wall_s"]),
                    "best_speedup": base[r["seed"]]["train_wall_s"] / max(path, r["cpu_bound_wall_s"])})
    return out


def markdown(rows: list[dict], runs: list[dict], name: str = NAME) -> str:
    skipping = any(landing(r).endswith(SKIPPED) for r in runs)
    fmt = lambda ms, d=1: (f"{ms[0]:.{d}f} ± {ms[1]:.{d}f}" if not math.isnan(ms[1]) else f"{ms[0]:.{d}f}")  # noqa: E731
    lines = ["### Asynchronous anchors on the main job (issue 47)", "",
             "`scripts/main.sh --max-staleness K` (24 steps x 8 groups x 4, the default executor), seeds run back "
             f"to back over the bounds on one machine ({runs[0]['cores']} cores); mean ± SE over seeds. Training "
             "wall: the steps' elapsed time; its bound on this machine is the training's CPU-seconds over the "
             "cores, and wall / bound is each run's ratio of the two (1 when the cores never wait). First step: the "
             "first step's wall (the sandbox's start-up falls there). Speedup: each seed's bound-0 training wall "
             "over its own. Staleness: anchor samples by the "
             "steps between submission and landing. Landing: since 2026-12-06 a batch lands exactly K steps after "
             "its step (the last step lands all); before, as soon as it was ready. " + (
                 "\"The last K steps unanchored\": the trainer's `final_anchors='skip'`, whose last K steps choose "
                 "no anchor groups (their real scores could reach only the last update). "
                 if skipping else "") +
             "Bound 0 is synchronous under every rule; each rule's speedups are against its own bound-0 runs, made "
             "beside them.", "",
             "| landing | max staleness | seeds | training wall (s) | speedup | CPU-s / cores | wall / bound "
             "| first step (s) | job wall (s) | held-out trained | calibrator pairs | groups dropped as stale "
             "| staleness (samples) |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        speedup = "—" if r["speedup_vs_synchronous"] is None else f"{fmt(r['speedup_vs_synchronous'], 2)}x"
        staleness = ", ".join(f"{k}: {v}" for k, v in r["staleness_samples"].items())
        lines.append(f"| {r['landing']} | {r['max_staleness']} | {', '.join(map(str, r['seeds']))} | "
                     f"{fmt(r['train_wall_s'])} | "
                     f"{speedup} | {fmt(r['cpu_bound_wall_s'])} | {fmt(r['wall_over_bound'], 2)} | "
                     f"{fmt(r['first_step_s'])} | {fmt(r['job_wall_s'])} | "
                     f"{fmt(r['heldout_trained'], 3)} | {fmt(r['calibrator_pairs'], 0)} | "
                     f"{fmt(r['dropped_stale_groups'], 0)} | {staleness} |")
    if name == NAME:
        lines += ["", "Seed 0's first bound-0 run under exact landing (archived in 02d6010) ran on an earlier boot of "
                  "the machine, whose runs took far fewer CPU-seconds (182 against 313 for its bound-1 partner, the "
                  "same seed's scripts); it was replaced by a run beside its partners, since the speedup compares "
                  "runs made back to back on one machine."]
    tails = tail_readings(runs)
    if tails:
        lines += ["", "**The tail** (a reading of the runs above, not a verdict). The last step lands every batch in "
                  "flight; a bound-0 step's wall above that run's median step is taken as its slowest anchor's time, "
                  "and the critical path is the latest asynchronous step start plus that time "
                  "(`tail_readings`). Attainable: the larger of the CPU bound and the critical path. The starts "
                  "include the run's own waits, so the path is an estimate, close to a bound only where the "
                  "earlier steps did not wait (the slowest earlier step says how far).", "",
                  "| seed | max staleness | training wall (s) | last step (s) | slowest earlier step (s) | CPU bound (s) "
                  "| critical path (s) | longest bound-0 step (s) | wall / attainable | bound-0 wall / attainable |",
                  "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
        lines += [f"| {t['seed']} | {t['max_staleness']} | {t['train_wall_s']:.0f} | {t['last_step_s']:.0f} | "
                  f"{t['slowest_earlier_step_s']:.0f} | {t['cpu_bound_wall_s']:.0f} | {t['critical_path_s']:.0f} | step {t['longest_synchronous_step']}: "
                  f"{t['longest_synchronous_step_s']:.0f} | {t['wall_over_attainable']:.2f} | "
                  f"{t['best_speedup']:.2f}x |" for t in tails]
    seeds = sorted({r["seed"] for r in runs})
    bounds = sorted({r["max_staleness"] for r in runs if synchronous_rule(landing(r)) == LANDING})
    argv = [] if name == NAME else ["--name", name, "--seeds", *map(str, seeds), "--bounds", *map(str, bounds)]
    if skipping:
        argv += ["--final-anchors", "skip"]
    lines += ["", f"Rerun: `{rerun_command(__spec__.name, argv)}` (skips the runs already in "
                  f"`bench/results/{name}.jsonl.xz`)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--bounds", type=int, nargs="+", default=[0, 1, 2, 4], help="max_staleness values")
    parser.add_argument("--final-anchors", choices=FINAL_ANCHORS, default="land",
                        help="the trainer's final_anchors for bounds above 0")
    parser.add_argument("--name", default=NAME,
                        help="the runs' archive and report under bench/results (a registered screen's own)")
    args = parser.parse_args(argv)
    runs_folder = RESULTS / args.name
    for seed in args.seeds:
        for bound in args.bounds:
            skip = "-skip" if bound and args.final_anchors == "skip" else ""
            name = f"s{seed}-k{bound}-exact{skip}.json"  # runs without "-exact" landed as ready (FORMER_LANDING)
            if name in read_runs(runs_folder):
                print(f"{name}: already there, skipped")
                continue
            print(f"main job, seed {seed}, max_staleness {bound}{skip} ...", flush=True)
            run = run_once(seed, bound, args.final_anchors)
            add_run(runs_folder, name, run)
            print(f"  training {run['train_wall_s']:.0f} s, held-out trained {run['heldout_trained']:.3f}", flush=True)
    runs = list(read_runs(runs_folder).values())
    rows = summarise(runs)
    report = markdown(rows, runs, args.name)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"rows": rows, "tail": tail_readings(runs), "runs": runs},
                                                          indent=1) + "\n")
    (RESULTS / f"{args.name}.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
