"""Issue 49: one confirmation, registered before it runs and judged once.

Does WMRL reach real-execution GRPO's held-out score on tasks and code the world model has not
seen, and at what compute? Three arms with the defaults a user gets, the same seeds in each:
``real`` (every training group executed), ``wmrl`` and ``world_model`` (the raw world model, no
anchors). The grammar policy trains on the training tasks of the frozen set ``bench/confirmation_tasks``
(data no world model was fitted on) and is evaluated by real execution (avg@k, mean over tasks)
on its evaluation tasks (built for this confirmation and used in no selection), every
``eval_every`` steps, so each run leaves a learning curve of held-out score against training
compute.

What runs is what was registered: the settings sit in the JSON block of
``bench/results/confirmation_registration.md``, committed before any run, and the bench refuses
to train when its own settings (defaults resolved) differ. Each finished run's record goes to
``bench/results/confirmation.jsonl.xz`` as it finishes (:mod:`bench.archive`), so the runs can
span sessions and machines; a rerun skips what the archive holds. Executions are memoised by
(task, script sha256) under ``runs/confirmation/``, as ``bench/stress.py`` does, and every reuse
is charged the measured cost of its first run, so the ledgers' CPU is what executing would cost.

The endpoints (:func:`endpoints`, fixed by the registration):

* **non-inferiority**: the one-sided 95% lower confidence bound (Student t over seeds) of the
  paired difference ``wmrl`` − ``real`` in final held-out score, against ``-margin``;
* **compute**: the total training compute of ``real`` over ``wmrl`` and ``real``'s compute to
  reach a fixed score over ``wmrl``'s (:mod:`bench.speedup`), each with a 90% bootstrap interval
  over seeds, and the executed share as measured;
* ``wmrl`` − ``world_model`` in final held-out score, with its two-sided 90% t interval.

    python -m bench.confirmation --settings   # the settings as the registration's JSON block
    python -m bench.confirmation --smoke      # timings on a few steps, cold memo; no score is shown or kept
    python -m bench.confirmation              # the registered runs not yet archived, then the report
    python -m bench.confirmation --report     # the report from the archive alone
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.archive import read_runs
from bench.common import RESULTS, setup_threads, stat, stat_text, t_bound, write_result
from bench.oos import SETS
from bench.registration import differing, digest, run_registered, settings_block
from bench.speedup import DRAWS, LEVEL, Interval, compute_ratio, compute_to_score, executed_share, score_difference
from bench.training import MEMO_NOTE, ExecutionMemo, MemoScorer, heldout_score, step_scripts
from trainers.families import get_family
from trainers.families.code import scorer_options
from trainers.policies import make_policy
from trainers.wmrl import WMRLTrainer, make_core
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.provenance import provenance
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.sample_run import default_head_path
from wmrl_envs.world_models.surrogate import default_path as surrogate_path

ROOT = Path(__file__).resolve().parents[1]
NAME = "confirmation"
REGISTRATION = RESULTS / f"{NAME}_registration.md"
#: The run folder whose archive holds every finished run's record.
RUNS = RESULTS / NAME
#: What was learned about the runs after they were made (a provenance flag explained, say): written
#: by hand, never part of the registration, printed under its own heading at the end of the report.
NOTES = RESULTS / f"{NAME}_notes.md"
#: Run logs and the execution memo (not committed).
SCRATCH = ROOT / "runs" / NAME
TASK_SET = SETS["confirmation"]
ENV_ID = "wmrl/MLEDojo-v0"
POLICY = "grammar"
ARMS = ("real", "wmrl", "world_model")  # each arm is a trainer mode, with every other setting the default
#: Seeds no earlier run of this repository used (the archives hold 0-32 and 40-49).
SEEDS = tuple(range(201, 221))
STEPS = 16
TASKS_PER_STEP = 8  # the main job's groups a step: the executed share a user gets
GROUP_SIZE = 4
EVAL_K = 4
EVAL_EVERY = 2  # 9 evaluation points a run, steps 0, 2, ..., 16
MARGIN = 0.05  # non-inferiority margin on the final held-out score
NI_LEVEL = 0.95  # one-sided
DIFFERENCE_LEVEL = 0.90  # two-sided, for wmrl - world_model
#: The fixed score of "compute to reach it": the untrained policy's mean held-out score (every arm's
#: step 0, the same policy in each) plus this.
FIXED_SCORE_ABOVE_UNTRAINED = 0.05
BOOTSTRAP_SEED = 0
SMOKE_STEPS = 3  # the fewest a wmrl run allows: its two warm-up steps and one more


# ------------------------------------------------------------------ settings and the registration
def task_split() -> dict[str, tuple[str, ...]]:
    """The frozen set's training and evaluation task ids."""
    return TASK_SET.split_ids()


def run_config(arm: str, seed: int, steps: int, output_dir: str) -> WMRLConfig:
    """The trainer's config of one arm and seed: the defaults but for the run's shape."""
    return WMRLConfig.from_flat(mode=arm, policy=POLICY, task_ids=task_split()["train"], steps=steps,
                                tasks_per_step=TASKS_PER_STEP, group_size=GROUP_SIZE, seed=seed,
                                output_dir=output_dir, checkpoint_every=0, tensorboard=False)


def settings() -> dict[str, Any]:
    """Everything a run's outcome depends on that the bench does not vary by arm or seed, and the
    analysis: what the registration fixes. The trainer's configuration is the ``wmrl`` arm's, in
    full, defaults resolved (the other arms differ in ``mode`` only), so a changed default changes
    the settings."""
    config = run_config("wmrl", SEEDS[0], STEPS, "").to_dict()
    for per_run in ("seed", "output_dir", "mode"):
        config.pop(per_run)
    found = {
        "tasks": {split: list(ids) for split, ids in task_split().items()},
        "task_files_sha256": {p.name: digest(p) for p in (TASK_SET.tasks_file, TASK_SET.leaderboards_file,
                                                            TASK_SET.manifest_file)},
        "world_model_files_sha256": {"surrogate": digest(surrogate_path()), "sample_run_head": digest(default_head_path())},
        "arms": list(ARMS), "seeds": list(SEEDS), "policy": POLICY, "steps": STEPS, "tasks_per_step": TASKS_PER_STEP,
        "group_size": GROUP_SIZE, "eval_k": EVAL_K, "eval_every": EVAL_EVERY,
        "trainer_config": config,
        "analysis": {"margin": MARGIN, "ni_level_one_sided": NI_LEVEL, "difference_level": DIFFERENCE_LEVEL,
                     "fixed_score_above_untrained": FIXED_SCORE_ABOVE_UNTRAINED, "bootstrap_draws": DRAWS,
                     "bootstrap_level": LEVEL, "bootstrap_seed": BOOTSTRAP_SEED},
    }
    return json.loads(json.dumps(found))  # tuples as lists: as the registration's JSON reads back


# ------------------------------------------------------------------ the runs
def run_name(arm: str, seed: int) -> str:
    return f"{arm}-s{seed}.json"


def planned_runs(seeds: Iterable[int], arms: Iterable[str] = ARMS) -> list[str]:
    """Every run, seed by seed, so an experiment cut short holds whole seeds."""
    arms = list(arms)
    return [run_name(arm, seed) for seed in seeds for arm in arms]


def train_run(arm: str, seed: int, steps: int, eval_every: int, k: int, memo: ExecutionMemo,
              current: dict[str, Any]) -> dict[str, Any]:
    """Train one arm on one seed, evaluating by real execution every ``eval_every`` steps and at
    the end; the run's record. The evaluation has a scorer of its own (sharing the memo), so what
    the evaluation executes never reaches the training scorer's experience."""
    start, load_at_start = time.perf_counter(), os.getloadavg()[0]
    folder = SCRATCH / run_name(arm, seed).removesuffix(".json")
    shutil.rmtree(folder, ignore_errors=True)  # an interrupted attempt's logs; the trainer appends to anchors.csv
    config = run_config(arm, seed, steps, str(folder))
    core = make_core(config)
    options = scorer_options(config)
    core.scorer = MemoScorer(memo, **options)
    evaluator = MemoScorer(memo, executor=options["executor"], workers=options["workers"])
    adapter = get_family(ENV_ID).make_adapter(config)
    trainer = WMRLTrainer(config, make_policy(POLICY, seed=seed), adapter, core=core)
    eval_tasks = [get_task(task_id) for task_id in task_split()["heldout"]]
    curve, executed, scripts, eval_wall = [], 0, 0, 0.0
    try:
        for step in range(steps + 1):
            if step % eval_every == 0 or step == steps:
                began = time.perf_counter()
                point = heldout_score(trainer.policy, eval_tasks, k, seed, evaluator)
                eval_wall += time.perf_counter() - began
                curve.append({"step": step, "compute_cpu_s": trainer.ledger.total_cpu_s(), "heldout_mean": point.mean,
                              "heldout_se": point.se, "per_task": point.per_task,
                              "infra_failures": point.infra_failures})
            if step < steps:
                trainer.train_step()
                step_executed, step_total = step_scripts(trainer.last_outcomes)
                executed, scripts = executed + step_executed, scripts + step_total
    finally:
        adapter.close()
        core.close()
        evaluator.close()
    totals = trainer.ledger.totals
    return {"arm": arm, "seed": seed, "settings": current, "config": config.to_dict(), "curve": curve,
            "final_heldout": curve[-1]["heldout_mean"], "compute_cpu_s": trainer.ledger.total_cpu_s(),
            "cpu_s": {c: e.cpu_s for c, e in totals.items()}, "counts": {c: e.count for c, e in totals.items()},
            "executed_scripts": executed, "training_scripts": scripts,
            "training_infra_failures": int(sum(h.get("execution/infra_failures", 0) for h in trainer.history)),
            "executions_run": core.scorer.ran, "executions_reused": core.scorer.reused, "memo_replays_charged": True,
            "wall_s": time.perf_counter() - start, "eval_wall_s": eval_wall,
            "loadavg_1m_at_start": load_at_start, "loadavg_1m_at_end": os.getloadavg()[0],
            "provenance": provenance()}


def run_one(name: str, memo: ExecutionMemo, current: dict[str, Any], steps: int = STEPS) -> dict[str, Any]:
    arm, _, seed = name.removesuffix(".json").rpartition("-s")
    return train_run(arm, int(seed), steps, EVAL_EVERY, EVAL_K, memo, current)


# ------------------------------------------------------------------ the endpoints
def endpoints(runs: Mapping[str, Mapping[int, dict[str, Any]]], analysis: Mapping[str, Any]) -> dict[str, Any] | None:
    """The registered endpoints over the seeds every arm finished (``runs[arm][seed]`` is a run's
    record); None before any seed has all three arms."""
    seeds = sorted(set.intersection(*(set(runs.get(arm, {})) for arm in ARMS)))
    if not seeds:
        return None
    real, wmrl, base = ([runs[arm][s] for s in seeds] for arm in ARMS)
    final = {arm: np.array([r["final_heldout"] for r in rs]) for arm, rs in zip(ARMS, (real, wmrl, base))}
    untrained = float(np.mean([r["curve"][0]["heldout_mean"] for r in real]))
    target = untrained + analysis["fixed_score_above_untrained"]
    ni = t_bound(final["wmrl"] - final["real"], analysis["ni_level_one_sided"], "lower")
    seed = analysis["bootstrap_seed"]
    return {
        "seeds": seeds,
        "non_inferiority": {**ni, "margin": analysis["margin"], "holds": bool(ni["lo"] > -analysis["margin"])},
        "wmrl_minus_real_bootstrap": score_difference(final["real"], final["wmrl"], seed).to_dict(),
        "compute_ratio": compute_ratio([r["compute_cpu_s"] for r in real], [r["compute_cpu_s"] for r in wmrl],
                                       seed).to_dict(),
        "untrained_heldout": untrained, "fixed_score": target,
        "compute_to_fixed_score": compute_to_score([r["curve"] for r in real], [r["curve"] for r in wmrl], target,
                                                   seed).to_dict(),
        "wmrl_minus_world_model": t_bound(final["wmrl"] - final["world_model"], analysis["difference_level"], "two"),
        "real_minus_world_model": t_bound(final["real"] - final["world_model"], analysis["difference_level"], "two"),
        "world_model_compute_ratio": compute_ratio([r["compute_cpu_s"] for r in real],
                                                   [r["compute_cpu_s"] for r in base], seed).to_dict(),
        "executed_share": {arm: executed_share([r["executed_scripts"] for r in rs], [r["training_scripts"] for r in rs])
                           for arm, rs in zip(ARMS, (real, wmrl, base))},
    }


# ------------------------------------------------------------------ the report
def summarise(records: Mapping[str, dict[str, Any]], registered: dict[str, Any]) -> dict[str, Any]:
    """Per arm, mean ± SE over seeds; the endpoints over complete seeds. Only runs made under the
    registered settings count; the others are named in ``set_aside``."""
    failed = sorted(n for n, r in records.items() if r.get("failed"))
    kept = {n: r for n, r in records.items() if not r.get("failed") and not differing(r.get("settings"), registered)}
    runs = {arm: {r["seed"]: r for r in kept.values() if r["arm"] == arm} for arm in registered["arms"]}
    arms = {}
    for arm, by_seed in runs.items():
        rs = [by_seed[s] for s in sorted(by_seed)]
        if rs:
            arms[arm] = {"seeds": sorted(by_seed), "final_heldout": stat([r["final_heldout"] for r in rs]),
                         "compute_cpu_s": stat([r["compute_cpu_s"] for r in rs]),
                         "execution_cpu_s": stat([r["cpu_s"].get("execution", 0.0) for r in rs]),
                         "world_model_cpu_s": stat([r["cpu_s"].get("world_model", 0.0) for r in rs]),
                         "wall_s": stat([r["wall_s"] for r in rs])}
    return {"arms": arms, "endpoints": endpoints(runs, registered["analysis"]), "runs": len(kept),
            "planned": len(planned_runs(registered["seeds"], registered["arms"])),
            "set_aside": sorted(set(records) - set(kept) - set(failed)),
            "failed_attempts": [{"name": n, "run": records[n]["run"], "error": records[n]["error"]} for n in failed],
            "per_run": [{"name": n, "arm": r["arm"], "seed": r["seed"], "final_heldout": r["final_heldout"],
                         "compute_cpu_s": r["compute_cpu_s"],
                         "executed_share": r["executed_scripts"] / r["training_scripts"],
                         "wall_s": r["wall_s"], "load": [r["loadavg_1m_at_start"], r["loadavg_1m_at_end"]],
                         "infra_failures": r["training_infra_failures"] + sum(p["infra_failures"] for p in r["curve"]),
                         "commit": r["provenance"]["commit"][:10], "dirty": r["provenance"].get("dirty")}
                        for n, r in sorted(kept.items(), key=lambda item: (item[1]["seed"], ARMS.index(item[1]["arm"])))]}


def _bound(b: Mapping[str, float], digits: int = 3) -> str:
    hi = "" if math.isinf(b["hi"]) else f", {b['hi']:+.{digits}f}"
    return f"{b['mean']:+.{digits}f} [{b['lo']:+.{digits}f}{hi}]"


def markdown(summary: dict[str, Any], registered: dict[str, Any], notes: str = "") -> str:
    """The report; ``notes`` (the text of :data:`NOTES`) ends it under a heading of its own."""
    ends, analysis = summary["endpoints"], registered["analysis"]
    lines = [
        "### The registered confirmation (issue 49)", "",
        f"{summary['runs']} of {summary['planned']} registered runs finished. Settings, seeds, tasks, endpoints and "
        f"this analysis were fixed in [the registration]({REGISTRATION.name}) before any run; every registered run is "
        "reported below, whatever it shows. **Out of sample**: the world model was fitted on none of these tasks, and "
        "the evaluation tasks were used in no selection.", "",
        f"The grammar policy trains {registered['steps']} steps x {registered['tasks_per_step']} groups x "
        f"{registered['group_size']} rollouts on {', '.join(registered['tasks']['train'])}, and is evaluated every "
        f"{registered['eval_every']} steps on {', '.join(registered['tasks']['heldout'])} by real execution "
        f"(avg@{registered['eval_k']}, mean over tasks). Compute: each run's training ledger in CPU-seconds "
        "(evaluation excluded); mean ± SE over seeds.", ""]
    if ends is None:
        lines.append("No seed has finished all three arms yet: no endpoint is read.")
    else:
        ni = ends["non_inferiority"]
        verdict = "holds" if ni["holds"] else "does not hold"
        lines += [
            f"**Endpoints over seeds {ends['seeds'][0]}-{ends['seeds'][-1]} ({len(ends['seeds'])} complete).**", "",
            f"- Non-inferiority {verdict}: `wmrl` − `real` in final held-out score is {ni['mean']:+.3f}, its "
            f"one-sided {analysis['ni_level_one_sided']:.0%} lower bound {ni['lo']:+.3f} against −{ni['margin']:g} "
            f"(bootstrap {LEVEL:.0%} interval {Interval.from_dict(ends['wmrl_minus_real_bootstrap']).text(3, signed=True)}).",
            f"- Total training compute, `real` over `wmrl`: "
            f"{Interval.from_dict(ends['compute_ratio']).text(2, 'x')} ({LEVEL:.0%} bootstrap over seeds); "
            f"`real` over `world_model`: {Interval.from_dict(ends['world_model_compute_ratio']).text(1, 'x')}.",
            f"- Compute to reach {ends['fixed_score']:.3f} (the untrained policy's {ends['untrained_heldout']:.3f} + "
            f"{analysis['fixed_score_above_untrained']:g}), `real` over `wmrl`: "
            f"{Interval.from_dict(ends['compute_to_fixed_score']).text(2, 'x')} (— : a mean curve never reaches it).",
            f"- `wmrl` − `world_model`: {_bound(ends['wmrl_minus_world_model'])} "
            f"({analysis['difference_level']:.0%} t interval); `real` − `world_model`: "
            f"{_bound(ends['real_minus_world_model'])}.",
            "- Executed share of training scripts, measured: " + ", ".join(
                f"`{arm}` {share:.3f}" for arm, share in ends["executed_share"].items()) + ".", ""]
    lines += ["| arm | seeds | final held-out | training compute (CPU-s) | execution CPU-s | world-model CPU-s | wall (min) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for arm, row in summary["arms"].items():
        wall = {**row["wall_s"], "mean": row["wall_s"]["mean"] / 60, "se": row["wall_s"]["se"] / 60}
        lines.append(f"| `{arm}` | {len(row['seeds'])} | {stat_text(row['final_heldout'])} | {stat_text(row['compute_cpu_s'], 0)} | "
                     f"{stat_text(row['execution_cpu_s'], 0)} | {stat_text(row['world_model_cpu_s'], 0)} | {stat_text(wall, 1)} |")
    lines += ["", "Every registered run: the load average over 1 minute at its start and end, and its executions "
              "that returned no outcome for an infrastructure reason, in training or evaluation (kept, and counted "
              "here):", "",
              "| run | final held-out | compute (CPU-s) | executed share | wall (s) | load | infrastructure failures | commit |",
              "|---|---:|---:|---:|---:|---|---:|---|"]
    for run in summary["per_run"]:
        dirty = " (dirty)" if run["dirty"] else ""
        lines.append(f"| {run['name'].removesuffix('.json')} | {run['final_heldout']:.3f} | {run['compute_cpu_s']:.0f} | "
                     f"{run['executed_share']:.3f} | {run['wall_s']:.0f} | {run['load'][0]:.1f} / {run['load'][1]:.1f} | "
                     f"{run['infra_failures']} | `{run['commit']}`{dirty} |")
    if summary["failed_attempts"]:
        lines += ["", "Attempts that stopped before their run finished, each made again (the registration's rule):", ""]
        lines += [f"- `{a['run']}` ({a['name']}): {a['error']}" for a in summary["failed_attempts"]]
    lines += ["", MEMO_NOTE]
    if summary["set_aside"]:
        lines.append(f"Set aside, made under other settings than the registration's: {', '.join(summary['set_aside'])}.")
    if any(run["dirty"] for run in summary["per_run"]):
        lines += ["", "(dirty): the checkout had uncommitted changes when the run ended (its provenance's flag)."]
    if notes.strip():
        lines += ["", f"#### Notes added after the runs ([{NOTES.name}]({NOTES.name}); not part of the registration)",
                  "", notes.strip()]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ entry points
def prepare() -> None:
    """One thread a process; the set's tasks generated and checked, and the only user tasks seen."""
    setup_threads()
    folder = TASK_SET.default_out()
    TASK_SET.materialise(folder)
    # Only the set's folders: a user's own WMRL_TASKS_DIR could shadow a task id.
    os.environ["WMRL_TASKS_DIR"] = str(folder)


def smoke(steps: int, seeds: list[int], arms: list[str]) -> None:
    """``arms`` for ``steps`` steps, each from a cold memo: the timings a registration estimates
    from. Held-out scores are neither printed nor kept (the evaluation tasks stay unseen);
    timings go to ``runs/confirmation/smoke.json``."""
    current = settings()
    rows = []
    for seed in seeds:
        for name in planned_runs([seed], arms):
            with tempfile.TemporaryDirectory(prefix="confirmation-memo-") as folder:
                record = run_one(name, ExecutionMemo(Path(folder) / "memo.jsonl"), current, steps)
            counts = record["counts"]
            row = {"run": name, "steps": steps, "wall_s": record["wall_s"], "eval_wall_s": record["eval_wall_s"],
                   "cpu_s": record["cpu_s"], "counts": counts, "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"{name}: {row['wall_s']:.0f} s wall (evaluation {row['eval_wall_s']:.0f} s at "
                  f"{len(record['curve'])} points); ledger CPU-s execution {record['cpu_s'].get('execution', 0):.1f} "
                  f"({counts.get('execution', 0)} runs), world model {record['cpu_s'].get('world_model', 0):.1f}, "
                  f"total {record['compute_cpu_s']:.1f}; load {row['load']:.1f}", flush=True)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (SCRATCH / "smoke.json").write_text(json.dumps(rows, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="write the report from the archive; train nothing")
    parser.add_argument("--smoke", action="store_true", help="time the arms on a few steps (no score shown or kept)")
    parser.add_argument("--steps", type=int, default=SMOKE_STEPS, help="with --smoke: steps a run trains")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="with --smoke: seeds (not the registered ones)")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="with --smoke: arms")
    parser.add_argument("--settings", action="store_true",
                        help="print the settings as the registration's JSON block, and stop")
    args = parser.parse_args(argv)
    if args.settings:
        print(f"```json\n{settings_block(settings())}\n```")
        return
    if args.smoke:
        if set(args.seeds) & set(SEEDS):
            raise SystemExit(f"--smoke takes seeds outside the registered ones ({SEEDS[0]}-{SEEDS[-1]})")
        prepare()
        smoke(args.steps, args.seeds, args.arms)
        return
    registered = run_registered(REGISTRATION, RUNS, SCRATCH, planned_runs(SEEDS), settings, prepare, run_one,
                                report_only=args.report, keep_failures=True)
    summary = summarise(read_runs(RUNS), registered)
    notes = NOTES.read_text() if NOTES.exists() else ""
    md = write_result(NAME, __spec__.name, {"registered": registered, "summary": summary},
                      markdown(summary, registered, notes))
    print(md.read_text())


if __name__ == "__main__":
    sys.exit(main())
