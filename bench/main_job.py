"""The main job (``scripts/main.sh``) over several seeds: the cold and the default executor, and
against real GRPO.

Each run is the whole job with set-up cached, synchronous as every run of its archive was (the job's
asynchronous default is :mod:`bench.async_anchors`'s): ``bash scripts/main.sh --seed S --executor E
--max-staleness 0``
(24 WMRL steps of the grammar policy on the MLE train tasks, then avg@4 held-out evaluation of
the untrained and the trained policy by real execution); ``--modes real`` adds the job as real
GRPO and ``--anchor-choices informed`` a run with informed anchors. Runs alternate between the
executors seed by seed, so that a drift in the machine's load falls on both. Per run it records
the job's wall time, the ledger's CPU-seconds, the held-out position scores and the scripts it
executed; a run whose summary is already in ``bench/results/main_job.jsonl.xz``
(:mod:`bench.archive`) is skipped, so an interrupted sweep resumes. A run records what it trained
under, the defaults of its commit but for its mode and anchors: the anchor-weight rule, the
calibrator's global map, the anchor choice and the schedule (warmup steps, fewest anchor groups
a step). Runs are grouped by executor and that (:func:`corrections_of`): runs from before the
default rule became ``none`` ran ``eta2``, runs from before the default map became ``chosen``
fitted the isotonic one, and runs from before the schedule was recorded had 2 warmup steps and
at least one anchor group a step.

    python -m bench.main_job                          # seeds 0 1 2, executors bwrap and auto
    python -m bench.main_job --seeds 0 --executors auto
    python -m bench.main_job --env wmrl/DSBench-v0 --seeds 0 --executors auto   # the DSBench row
    # issue 46's registered comparison (its 10% schedule given explicitly):
    python -m bench.main_job --seeds 10 11 12 13 14 --executors auto --modes real wmrl --anchor-choices random informed --warmup-steps 0 --min-anchor-groups 0
    python -m bench.main_job --report                 # run nothing: report the archive

Adds ``<executor>-<what it trained under>-s<seed>.json`` per run to
``bench/results/main_job.jsonl.xz`` (:func:`run_slug`) and writes ``main_job.{json,md}``
(DSBench: ``dsbench-...`` and ``main_job_dsbench.{json,md}``, with the held-out RPG beside the
position score): per executor and corrections, mean ± SE over seeds of the wall time, the
CPU-seconds and the held-out scores, the executed share, the wall-time ratio of each seed's
pair of executors, and against ``real`` on shared seeds the saving as :mod:`bench.speedup`
reads it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from bench.archive import add_run, read_runs
from bench.common import RESULTS, mean_se, rerun_command
from bench.speedup import Interval, compute_ratio, executed_share, score_difference
from trainers.wmrl_config import ANCHOR_CHOICES, WMRLConfig
from wmrl_envs.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
RUNS = RESULTS / "main_job"
DEFAULT_ENV = "wmrl/MLEDojo-v0"


def run_once(executor: str, seed: int, env: str, mode: str = "wmrl", anchor_choice: str = "random",
             schedule: dict[str, int] | None = None) -> dict:
    """One whole main job; its summary (what the results file keeps of it). ``schedule`` sets
    ``warmup_steps`` and ``min_anchor_groups`` where given (the defaults elsewhere)."""
    extra = [token for name, value in (schedule or {}).items() for token in (f"--{name.replace('_', '-')}", str(value))]
    with tempfile.TemporaryDirectory(prefix="wmrl-main-job-") as folder:
        out = Path(folder) / "run"
        start = time.perf_counter()
        proc = subprocess.run(["bash", "scripts/main.sh", "--seed", str(seed), "--executor", executor,
                               "--output-dir", str(out), "--env", env, "--mode", mode, "--max-staleness", "0",
                               *(["--anchor-choice", anchor_choice, *extra] if mode != "real" else [])],
                              cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"main job ({executor}, {mode}, seed {seed}) failed:\n{proc.stderr[-4000:]}")
        results = json.loads((out / "results.json").read_text())
        anchors = anchor_rows(out / "anchors.csv")
    ledger = results["meta"]["ledger"]
    reports = {r["policy"]: r["summary"] for r in results["reports"]}
    untrained, trained = (next(s for p, s in reports.items() if p.startswith(prefix))
                          for prefix in ("untrained", "trained"))
    config = results["meta"]["config"]
    schedule, resolved = config["schedule"], WMRLConfig.from_dict(config)
    scripts = config["steps"] * schedule["tasks_per_step"] * schedule["group_size"]
    return {"executor": executor, "seed": seed, "env": env, "fusion_rule": config["fusion"]["rule"],
            "calibration_global_form": config["calibration"]["global_form"],
            "mode": mode, "anchor_choice": schedule["anchor_choice"], "warmup_steps": resolved.warmup_steps,
            "min_anchor_groups": schedule["min_anchor_groups"],
            "executed_scripts": scripts if mode == "real" else len(anchors), "training_scripts": scripts,
            **anchor_costs(anchors),
            "job_wall_s": wall,
            "heldout_rpg_untrained": untrained.get("rpg_mean"), "heldout_rpg_trained": trained.get("rpg_mean"),
            "ledger_cpu_s": sum(e["cpu_s"] for e in ledger["totals"].values()),
            "ledger_wall_s": sum(e["wall_s"] for e in ledger["totals"].values()),
            "heldout_untrained": untrained["score_mean"], "heldout_trained": trained["score_mean"],
            "heldout_trained_se_over_tasks": trained["score_se"], "valid_rate": trained["valid_rate"],
            "infra_failures": trained["infra_failures"] + untrained["infra_failures"],
            "machine": provenance(), "loadavg_1m_at_end": os.getloadavg()[0]}


def anchor_rows(path: Path) -> list[dict[str, str]]:
    """The run's ``anchors.csv`` rows (none when it has no anchors)."""
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def anchor_costs(anchors: list[dict[str, str]]) -> dict[str, float | int | None]:
    """What the anchors' runs cost: the mean measured CPU-seconds of an executed anchor script, and where the
    anchors were priced before the choice (informed schedules) the Spearman correlation of price and measure."""
    ran = [a for a in anchors if a.get("execution_cpu_s") not in (None, "")]
    measured = [float(a["execution_cpu_s"]) for a in ran]
    priced = [(float(a["predicted_cpu_s"]), float(a["execution_cpu_s"])) for a in ran
              if a.get("predicted_cpu_s") not in (None, "")]
    spearman = (float(spearmanr(*zip(*priced))[0]) if len(priced) > 2 and len({p for p, _ in priced}) > 1
                else None)
    return {"anchor_cpu_s_mean": float(np.mean(measured)) if measured else None, "anchor_runs_measured": len(ran),
            "anchor_price_spearman": spearman, "anchor_runs_priced": len(priced)}


def corrections_of(run: dict) -> str:
    """What a run trained under: ``real`` for a run of real GRPO, else the anchor-weight rule, the
    global map unless isotonic, the anchors unless random, and the schedule unless the default one
    (2 warmup steps at half anchors, then at least one anchor group a step): ``none, chosen map,
    no warmup``. Runs from before the rule was recorded ran ``eta2``, runs from before the map was
    recorded fitted the isotonic one, and runs from before the schedule was recorded ran the former."""
    if run.get("mode", "wmrl") == "real":
        return "real"
    rule, form = run.get("fusion_rule", "eta2"), run.get("calibration_global_form", "isotonic")
    parts = [rule] + ([] if form == "isotonic" else [f"{form} map"])
    parts += [] if run.get("anchor_choice", "random") == "random" else [f"{run['anchor_choice']} anchors"]
    if (run.get("warmup_steps", DEFAULT_WARMUP), run.get("min_anchor_groups", 1)) != (DEFAULT_WARMUP, 1):
        parts.append(f"{run['warmup_steps'] or 'no'} warmup, at least {run['min_anchor_groups']} anchor groups a step"
                     if run["min_anchor_groups"] else f"{run['warmup_steps'] or 'no'} warmup")
    return ", ".join(parts)


#: The default schedule's warm-up steps: every main job's before the schedule was recorded, and
#: the default's again after issue 46's registered screen.
DEFAULT_WARMUP = 2


def run_slug(mode: str, config: WMRLConfig) -> str:
    """What a run trained under, in its file's name (see :func:`corrections_of`)."""
    if mode == "real":
        return "real"
    form, schedule = config.calibration.global_form, config.schedule
    parts = [config.fusion.rule] + ([] if form == "isotonic" else [form])
    parts += [] if schedule.anchor_choice == "random" else [schedule.anchor_choice]
    if (config.warmup_steps, schedule.min_anchor_groups) != (DEFAULT_WARMUP, 1):
        parts.append(f"w{config.warmup_steps}m{schedule.min_anchor_groups}")
    return "-".join(parts)


def summarise(runs: list[dict], executors: list[str]) -> dict:
    """Per (executor, corrections): mean ± SE over seeds; per corrections, the two executors' paired wall ratio."""
    table, pairs = {}, {}
    for corrections in sorted({corrections_of(r) for r in runs}):
        for executor in executors:
            mine = [r for r in runs if r["executor"] == executor and corrections_of(r) == corrections]
            if mine:
                table[f"{executor}, {corrections}"] = {
                    **{key: mean_se([r[key] for r in mine]) for key in
                       ("job_wall_s", "ledger_cpu_s", "heldout_untrained", "heldout_trained")},
                    "seeds": sorted(r["seed"] for r in mine),
                    **({"executed_share": executed_share([r["executed_scripts"] for r in mine],
                                                         [r["training_scripts"] for r in mine])}
                       if all("executed_scripts" in r for r in mine) else {})}
        if len(executors) == 2:
            cold, warm = executors
            by = {(r["executor"], r["seed"]): r for r in runs if corrections_of(r) == corrections}
            common = sorted(s for e, s in by if e == cold and (warm, s) in by)
            if common:
                ratios = [by[(cold, s)]["job_wall_s"] / by[(warm, s)]["job_wall_s"] for s in common]
                deltas = [by[(warm, s)]["heldout_trained"] - by[(cold, s)]["heldout_trained"] for s in common]
                pairs[corrections] = {"seeds": common, "wall_ratio": mean_se(ratios), "heldout_difference": mean_se(deltas)}
    return {"executors": table, "pairs": pairs, "savings": savings(runs)}


def savings(runs: list[dict]) -> dict[str, dict]:
    """Per executor and corrections with a ``real`` run on a shared seed: the total-compute ratio
    (ledger CPU-s of ``real`` over the run's) and the trained held-out difference (run − ``real``),
    paired by seed, as :mod:`bench.speedup` reads them."""
    out = {}
    real = {(r["executor"], r["seed"]): r for r in runs if corrections_of(r) == "real"}
    for corrections in sorted({corrections_of(r) for r in runs} - {"real"}):
        for executor in sorted({r["executor"] for r in runs}):
            pairs = [(real[(executor, r["seed"])], r) for r in sorted(runs, key=lambda r: r["seed"])
                     if r["executor"] == executor and corrections_of(r) == corrections and (executor, r["seed"]) in real]
            if pairs:
                reals, mine = zip(*pairs)
                out[f"{executor}, {corrections}"] = {
                    "seeds": [r["seed"] for r in mine],
                    "compute_ratio": compute_ratio([r["ledger_cpu_s"] for r in reals],
                                                   [r["ledger_cpu_s"] for r in mine]).to_dict(),
                    "heldout_difference": score_difference([r["heldout_trained"] for r in reals],
                                                           [r["heldout_trained"] for r in mine]).to_dict()}
    return out


def markdown(summary: dict, runs: list[dict], env: str) -> str:
    fmt = lambda ms, d=3: f"{ms[0]:.{d}f} ± {ms[1]:.{d}f}" if not math.isnan(ms[1]) else f"{ms[0]:.{d}f}"  # noqa: E731
    lines = [f"### The main job on `{env}`, cold and default executor, by corrections", "",
             f"`scripts/main.sh --env {env}` with set-up cached, {runs[0]['machine']['cores']} cores; mean ± SE over "
             "seeds (a single seed shows no SE). `auto` is the default executor (warm where the host allows it). "
             "Held-out: avg@4 by real execution of the env's reward quantity (the position score; on DSBench the "
             "RPG, with DSBench's own mean RPG in brackets). Corrections: the anchor weight the run trained under "
             "(`none`, w_A = 1, is the default since issue 28; earlier runs had `eta2`) and its calibrator's "
             "global map, unless isotonic (`chosen`, a line unless isotonic wins out of fold, is the default "
             "since 2026-12-04), then the anchors unless random and the schedule unless the default one (2 warmup "
             "steps at half anchors, then at least one anchor group a step; `no warmup`: issue 46's 10% schedule, "
             "the anchor share rounded step by step so that the run executes its share, the default for a while "
             "until it collapsed under a family bias in the registered stress screen). Executed share: the "
             "scripts of anchor groups over all training scripts (— : not counted before issue 46). Wall and CPU seconds "
             "compare only between runs made side by side (the per-run table gives when each finished): the same "
             "machine type runs at different speeds from one session to the next.", "",
             "| executor, corrections | seeds | job wall (min) | ledger CPU-s | executed share | held-out untrained | "
             "held-out trained |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, row in summary["executors"].items():
        wall = tuple(v / 60 for v in row["job_wall_s"])
        share = f"{row['executed_share']:.3f}" if "executed_share" in row else "—"
        lines.append(f"| {name} | {', '.join(map(str, row['seeds']))} | {fmt(wall, 2)} | {fmt(row['ledger_cpu_s'], 0)} "
                     f"| {share} | {fmt(row['heldout_untrained'])} | {fmt(row['heldout_trained'])} |")
    if summary["savings"]:
        lines += ["", "Against `real` on the seeds both ran (as `bench/speedup.py` reads them; 90% intervals from "
                      "bootstrapping seeds):", "",
                  "| executor, corrections | seeds | executed share | compute ratio (`real` / run) | "
                  "held-out trained − `real` |", "|---|---|---:|---:|---:|"]
        for name, row in summary["savings"].items():
            share = summary["executors"][name].get("executed_share")
            lines.append(f"| {name} | {', '.join(map(str, row['seeds']))} | "
                         f"{'—' if share is None else f'{share:.3f}'} | "
                         f"{Interval.from_dict(row['compute_ratio']).text(1, 'x')} | "
                         f"{Interval.from_dict(row['heldout_difference']).text(3, signed=True)} |")
    for corrections, p in summary["pairs"].items():
        lines += ["", f"Per seed under `{corrections}` (paired, seeds {p['seeds']}): cold wall / default wall = "
                      f"{fmt(p['wall_ratio'], 2)}x; held-out trained, default − cold = {fmt(p['heldout_difference'])}."]
    lines += ["", "| executor | corrections | seed | job wall (s) | ledger CPU-s | held-out untrained | held-out trained | "
                  "finished (UTC) | commit |",
              "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in sorted(runs, key=lambda r: (corrections_of(r), r["executor"], r["seed"])):
        rpg = "" if r.get("heldout_rpg_trained") is None else \
            f" (RPG {r['heldout_rpg_untrained']:.3f} -> {r['heldout_rpg_trained']:.3f})"
        lines.append(f"| {r['executor']} | {corrections_of(r)} | {r['seed']} | {r['job_wall_s']:.0f} | {r['ledger_cpu_s']:.0f} | "
                     f"{r['heldout_untrained']:.3f} | {r['heldout_trained']:.3f}{rpg} | "
                     f"{r['machine']['date'][:16].replace('T', ' ')} | `{r['machine']['commit'][:10]}` |")
    flag = "" if env == DEFAULT_ENV else f" --env {env}"
    lines += ["", f"Rerun: `{rerun_command(__spec__.name)}{flag}` (skips the runs already in "
                  "`bench/results/main_job.jsonl.xz`)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--executors", nargs="+", default=["bwrap", "auto"])
    parser.add_argument("--env", default=DEFAULT_ENV, choices=(DEFAULT_ENV, "wmrl/DSBench-v0"))
    parser.add_argument("--modes", nargs="+", default=["wmrl"], choices=("real", "wmrl"),
                        help="real: the job as real GRPO (every group executed), the baseline of the saving")
    parser.add_argument("--anchor-choices", nargs="+", default=["random"], choices=ANCHOR_CHOICES,
                        help="the wmrl runs' anchor choice (informed: by what each group would teach)")
    parser.add_argument("--warmup-steps", type=int, help="the wmrl runs' warm-up steps (default: the config's)")
    parser.add_argument("--min-anchor-groups", type=int,
                        help="the wmrl runs' fewest anchor groups a step (default: the config's; 0: the share exactly)")
    parser.add_argument("--report", action="store_true", help="run nothing: report the runs on record")
    args = parser.parse_args()
    prefix, name = ("", "main_job") if args.env == DEFAULT_ENV else ("dsbench-", "main_job_dsbench")
    # What the job trains under: the defaults, as a user's run would, but for the mode and the anchors.
    variants = [("real", "random")] * ("real" in args.modes) + \
        [("wmrl", choice) for choice in args.anchor_choices if "wmrl" in args.modes]
    for seed in [] if args.report else args.seeds:
        for executor in args.executors:
            for mode, choice in variants:
                schedule = {} if mode == "real" else {name: getattr(args, name) for name in
                                                      ("warmup_steps", "min_anchor_groups") if getattr(args, name) is not None}
                config = WMRLConfig.from_flat(mode=mode, anchor_choice=choice, **schedule)
                run_name = f"{prefix}{executor}-{run_slug(mode, config)}-s{seed}.json"
                if run_name in read_runs(RUNS):
                    print(f"{run_name}: already there, skipped")
                    continue
                print(f"main job, executor {executor}, {run_name} ...", flush=True)
                summary = run_once(executor, seed, args.env, mode, choice, schedule)
                add_run(RUNS, run_name, summary)
                print(f"  {summary['job_wall_s']:.0f} s, held-out trained {summary['heldout_trained']:.3f}", flush=True)
    runs = [run for run_name, run in read_runs(RUNS).items() if run_name.startswith(prefix)]
    runs = [r for r in runs if r.get("env", DEFAULT_ENV) == args.env]
    # Every run on record is reported, the cold executor first, whichever this call ran.
    executors = list(dict.fromkeys(e for e in ("bwrap", *args.executors, *(r["executor"] for r in runs))
                                   if any(r["executor"] == e for r in runs)))
    summary = summarise(runs, executors)
    (RESULTS / f"{name}.json").write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown(summary, runs, args.env))
    print(markdown(summary, runs, args.env))


if __name__ == "__main__":
    sys.exit(main())
