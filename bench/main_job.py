"""The main job (``scripts/main.sh``) over several seeds, with the cold and the default executor.

Each run is the whole job with set-up cached: ``bash scripts/main.sh --seed S --executor E``
(24 WMRL steps of the grammar policy on the MLE train tasks, then avg@4 held-out evaluation of
the untrained and the trained policy by real execution). Runs alternate between the executors
seed by seed, so that a drift in the machine's load falls on both. Per run it records the job's
wall time, the ledger's CPU-seconds and the held-out position scores; a run whose summary is
already in ``bench/results/main_job.jsonl.xz`` (:mod:`bench.archive`) is skipped, so an
interrupted sweep resumes. A run records the corrections it trained under, the defaults of its
commit: the anchor-weight rule (``FusionConfig.rule``) and the calibrator's global map
(``CalibratorConfig.global_form``). Runs are grouped by executor and corrections: runs from before the default rule became ``none`` ran
``eta2``, and runs from before the default map became ``chosen`` fitted the isotonic one.

    python -m bench.main_job                          # seeds 0 1 2, executors bwrap and auto
    python -m bench.main_job --seeds 0 --executors auto
    python -m bench.main_job --env wmrl/DSBench-v0 --seeds 0 --executors auto   # the DSBench row

Adds ``<executor>-<rule>[-<map>]-s<seed>.json`` per run to ``bench/results/main_job.jsonl.xz`` (the
map named unless isotonic) and writes ``main_job.{json,md}`` (DSBench: ``dsbench-...`` and
``main_job_dsbench.{json,md}``, with the held-out RPG beside the position score): per executor and
corrections, mean ± SE over seeds of
the wall time, the CPU-seconds and the held-out scores, and the wall-time ratio of each seed's pair.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.archive import add_run, read_runs
from bench.common import RESULTS, mean_se, rerun_command
from wmrl_envs.calibration import CalibratorConfig
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring.fusion import FusionConfig

REPO = Path(__file__).resolve().parents[1]
RUNS = RESULTS / "main_job"
DEFAULT_ENV = "wmrl/MLEDojo-v0"


def run_once(executor: str, seed: int, env: str) -> dict:
    """One whole main job; its summary (what the results file keeps of it)."""
    with tempfile.TemporaryDirectory(prefix="wmrl-main-job-") as folder:
        out = Path(folder) / "run"
        start = time.perf_counter()
        proc = subprocess.run(["bash", "scripts/main.sh", "--seed", str(seed), "--executor", executor,
                               "--output-dir", str(out), "--env", env], cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"main job ({executor}, seed {seed}) failed:\n{proc.stderr[-4000:]}")
        results = json.loads((out / "results.json").read_text())
    ledger = results["meta"]["ledger"]
    reports = {r["policy"]: r["summary"] for r in results["reports"]}
    untrained, trained = (next(s for p, s in reports.items() if p.startswith(prefix))
                          for prefix in ("untrained", "trained"))
    config = results["meta"]["config"]
    return {"executor": executor, "seed": seed, "env": env, "fusion_rule": config["fusion"]["rule"],
            "calibration_global_form": config["calibration"]["global_form"],
            "job_wall_s": wall,
            "heldout_rpg_untrained": untrained.get("rpg_mean"), "heldout_rpg_trained": trained.get("rpg_mean"),
            "ledger_cpu_s": sum(e["cpu_s"] for e in ledger["totals"].values()),
            "ledger_wall_s": sum(e["wall_s"] for e in ledger["totals"].values()),
            "heldout_untrained": untrained["score_mean"], "heldout_trained": trained["score_mean"],
            "heldout_trained_se_over_tasks": trained["score_se"], "valid_rate": trained["valid_rate"],
            "infra_failures": trained["infra_failures"] + untrained["infra_failures"],
            "machine": provenance(), "loadavg_1m_at_end": os.getloadavg()[0]}


def corrections_of(run: dict) -> str:
    """The anchor-weight rule and, unless isotonic, the global map a run trained under (``none``,
    ``none, chosen map``). Runs from before the rule was recorded ran ``eta2``, and runs from
    before the map was recorded fitted the isotonic one."""
    rule, form = run.get("fusion_rule", "eta2"), run.get("calibration_global_form", "isotonic")
    return rule if form == "isotonic" else f"{rule}, {form} map"


def run_slug(rule: str, form: str) -> str:
    """The corrections in a run file's name (see :func:`corrections_of`)."""
    return rule if form == "isotonic" else f"{rule}-{form}"


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
                    "seeds": sorted(r["seed"] for r in mine)}
        if len(executors) == 2:
            cold, warm = executors
            by = {(r["executor"], r["seed"]): r for r in runs if corrections_of(r) == corrections}
            common = sorted(s for e, s in by if e == cold and (warm, s) in by)
            if common:
                ratios = [by[(cold, s)]["job_wall_s"] / by[(warm, s)]["job_wall_s"] for s in common]
                deltas = [by[(warm, s)]["heldout_trained"] - by[(cold, s)]["heldout_trained"] for s in common]
                pairs[corrections] = {"seeds": common, "wall_ratio": mean_se(ratios), "heldout_difference": mean_se(deltas)}
    return {"executors": table, "pairs": pairs}


def markdown(summary: dict, runs: list[dict], env: str) -> str:
    fmt = lambda ms, d=3: f"{ms[0]:.{d}f} ± {ms[1]:.{d}f}" if not math.isnan(ms[1]) else f"{ms[0]:.{d}f}"  # noqa: E731
    lines = [f"### The main job on `{env}`, cold and default executor, by corrections", "",
             f"`scripts/main.sh --env {env}` with set-up cached, {runs[0]['machine']['cores']} cores; mean ± SE over "
             "seeds (a single seed shows no SE). `auto` is the default executor (warm where the host allows it). "
             "Held-out: avg@4 by real execution of the env's reward quantity (the position score; on DSBench the "
             "RPG, with DSBench's own mean RPG in brackets). Corrections: the anchor weight the run trained under "
             "(`none`, w_A = 1, is the default since issue 28; earlier runs had `eta2`) and its calibrator's "
             "global map, unless isotonic (`chosen`, a line unless isotonic wins out of fold, is the default "
             "since 2026-12-04). Wall and CPU seconds "
             "compare only between runs made side by side (the per-run table gives when each finished): the same "
             "machine type runs at different speeds from one session to the next.", "",
             "| executor, corrections | seeds | job wall (min) | ledger CPU-s | held-out untrained | held-out trained |",
             "|---|---|---:|---:|---:|---:|"]
    for name, row in summary["executors"].items():
        wall = tuple(v / 60 for v in row["job_wall_s"])
        lines.append(f"| {name} | {', '.join(map(str, row['seeds']))} | {fmt(wall, 2)} | {fmt(row['ledger_cpu_s'], 0)} "
                     f"| {fmt(row['heldout_untrained'])} | {fmt(row['heldout_trained'])} |")
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
    args = parser.parse_args()
    prefix, name = ("", "main_job") if args.env == DEFAULT_ENV else ("dsbench-", "main_job_dsbench")
    # The corrections the job trains under: the defaults, as a user's run would.
    slug = run_slug(FusionConfig().rule, CalibratorConfig().global_form)
    for seed in args.seeds:
        for executor in args.executors:
            run_name = f"{prefix}{executor}-{slug}-s{seed}.json"
            if run_name in read_runs(RUNS):
                print(f"{run_name}: already there, skipped")
                continue
            print(f"main job, executor {executor}, seed {seed} ...", flush=True)
            summary = run_once(executor, seed, args.env)
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
