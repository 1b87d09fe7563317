"""Training out of sample (issue 44, item 5): a screen, not a confirmation.

The grammar policy trains (:class:`~trainers.wmrl.WMRLTrainer`, as ``bench/compare_modes.py`` does)
on tasks whose data no world model was fitted on, and is evaluated by real execution on other such
tasks (``bench/oos_screen``: the world models' tasks are the built-in suites, the policy's three and
the evaluation's two are neither). Five arms, the same seeds and so the same initial policy and
task schedule in each: ``real``; ``world_model`` and ``wmrl``, each with the surrogate and with the
multi-fidelity ``sample_run`` world model. Per arm it reports the final held-out score (avg@k by
real execution, mean over the evaluation tasks) as mean ± SE over seeds, and the CPU-seconds of
each run's ledger, execution and world model apart. The issue's acceptance quantity, per world
model, is the share of the ``real`` − ``world_model`` gap in mean final held-out score that
``wmrl`` closes, with a percentile bootstrap interval over seeds (seeds resampled jointly, since
an arm's run of a seed starts where the other arms' run of it does).

What runs is what was registered: the settings sit in a JSON block of
``bench/results/oos_training_screen_registration.md``, and the bench refuses to train when they
differ from its own. Each finished run's record goes to ``bench/results/oos_training_screen.jsonl.xz``
(:mod:`bench.archive`); a rerun skips the runs there, so the screen resumes across sessions. As
``bench/stress.py`` does, executions are memoised by (task, script sha256) under
``runs/oos_training_screen/`` and every reuse is charged the measured cost of its first run.

    python -m bench.oos_training_screen            # the registered runs not yet archived, then the report
    python -m bench.oos_training_screen --report   # the report from the archive alone
    python -m bench.oos_training_screen --smoke    # every arm for 3 steps on seed 0, each from a cold memo;
                                                   # timings only, nothing archived
    python -m bench.oos_training_screen --settings # the settings as the registration's JSON block
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
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.archive import read_runs
from bench.common import RESULTS, setup_threads, stat, stat_text, write_result
from bench.oos_screen import LEADERBOARDS_FILE, MANIFEST_FILE, TASKS_FILE, default_out, materialise_screen, split_ids
from bench.registration import differing, digest, run_registered, settings_block
from bench.training import MEMO_NOTE, ExecutionMemo, MemoScorer
from bench.world_model_metrics import bootstrap
from trainers.evaluate import EvalConfig, evaluate
from trainers.families import get_family
from trainers.families.code import scorer_options
from trainers.policies import make_policy, policy_responder
from trainers.wmrl import WMRLTrainer, make_core
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.provenance import provenance
from wmrl_envs.world_models.sample_run import SampleRunConfig, default_head_path
from wmrl_envs.world_models.surrogate import default_path as surrogate_path

ROOT = Path(__file__).resolve().parents[1]
NAME = "oos_training_screen"
REGISTRATION = RESULTS / f"{NAME}_registration.md"
#: The run folder whose archive, ``oos_training_screen.jsonl.xz``, keeps every finished run.
RUNS = RESULTS / NAME
#: Trainer folders and the execution memo (not committed).
SCRATCH = ROOT / "runs" / NAME
ENV_ID = "wmrl/MLEDojo-v0"
POLICY = "grammar"
WORLD_MODELS = ("surrogate", "sample_run")
#: Each arm's (mode, world model); ``real`` executes every group, so its world model is never asked.
ARMS: dict[str, tuple[str, str]] = {
    "real": ("real", "surrogate"),
    **{f"{mode}-{wm}": (mode, wm) for wm in WORLD_MODELS for mode in ("world_model", "wmrl")},
}
#: The untrained policy of each seed, evaluated once: where every arm of that seed starts.
UNTRAINED = "untrained"
SEEDS = (0, 1, 2, 3, 4)
STEPS = 16
TASKS_PER_STEP = 3  # every training task once a step
GROUP_SIZE = 4
EVAL_K = 8
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
SMOKE_STEPS = 3  # the fewest a wmrl run allows: its 2 warmup steps and one more


# ------------------------------------------------------------------ settings and the registration
def run_config(arm: str, seed: int, steps: int, output_dir: str) -> WMRLConfig:
    """The trainer's config of one arm and seed: the defaults but for the screen's shape."""
    mode, world_model = ARMS[arm]
    return WMRLConfig.from_flat(mode=mode, world_model=world_model, policy=POLICY, task_ids=split_ids()["train"],
                                steps=steps, tasks_per_step=TASKS_PER_STEP, group_size=GROUP_SIZE, seed=seed,
                                output_dir=output_dir, checkpoint_every=0, tensorboard=False)


def settings() -> dict[str, Any]:
    """Everything a run's outcome depends on that the bench does not vary by arm or seed: what the
    registration fixes. Trainer defaults are resolved, so a changed default changes the settings."""
    config = run_config("wmrl-sample_run", SEEDS[0], STEPS, "")
    family, schedule, loss = config.family, config.schedule, config.loss
    splits = split_ids()
    found = {
        "tasks": {"train": list(splits["train"]), "heldout": list(splits["heldout"])},
        "task_files_sha256": {p.name: digest(p) for p in (TASKS_FILE, LEADERBOARDS_FILE, MANIFEST_FILE)},
        "world_model_files_sha256": {"surrogate": digest(surrogate_path()), "sample_run_head": digest(default_head_path())},
        "arms": {arm: list(mode_wm) for arm, mode_wm in ARMS.items()},
        "seeds": list(SEEDS),
        "policy": POLICY, "steps": STEPS, "tasks_per_step": TASKS_PER_STEP, "group_size": GROUP_SIZE, "eval_k": EVAL_K,
        "trainer": {
            "executor": family.executor, "workers": family.workers, "prove": family.prove,
            "anchor_fraction": schedule.anchor_fraction, "warmup_steps": schedule.warmup_steps,
            "warmup_anchor_fraction": schedule.warmup_anchor_fraction, "min_anchor_groups": schedule.min_anchor_groups,
            "adaptive_anchors": schedule.adaptive_anchors, "learning_rate": loss.learning_rate,
            "advantage": loss.advantage, "update_epochs": loss.update_epochs, "kl_coef": loss.kl_coef,
            "fusion_rule": config.fusion.rule, "fusion_w_max": config.fusion.w_max,
            "calibration_global_form": config.calibration.global_form,
            "calibration_min_pairs_global": config.calibration.min_pairs_global},
        "sample_run": asdict(SampleRunConfig()),
        "bootstrap": {"resamples": RESAMPLES, "seed": BOOTSTRAP_SEED, "interval": "percentile 95%"},
    }
    return json.loads(json.dumps(found))  # tuples as lists: as the registration's JSON reads back


# ------------------------------------------------------------------ the runs
def run_name(arm: str, seed: int) -> str:
    return f"{arm}-s{seed}.json"


def planned_runs(seeds: Iterable[int], arms: Iterable[str]) -> list[str]:
    """Every run of the screen, seed by seed (the untrained policy, then each arm), so a screen cut
    short holds whole seeds."""
    arms = list(arms)
    return [run_name(arm, seed) for seed in seeds for arm in (UNTRAINED, *arms)]


def eval_config(seed: int, k: int) -> EvalConfig:
    return EvalConfig(env_id=ENV_ID, split="heldout", k=k, seed=seed, task_ids=split_ids()["heldout"])


def heldout(report) -> dict[str, Any]:
    """A held-out report's aggregates and each task's avg@k."""
    return {**report.summary(), "per_task": {t.task_id: t.mean_score for t in report.tasks}, "wall_s": report.wall_s}


def untrained_run(seed: int, k: int, current: dict[str, Any]) -> dict[str, Any]:
    """The held-out score of the policy every arm of ``seed`` starts from."""
    start = time.perf_counter()
    report = evaluate(policy_responder(make_policy(POLICY, seed=seed), seed), f"untrained seed {seed}",
                      eval_config(seed, k), progress=False)
    return {"arm": UNTRAINED, "seed": seed, "settings": current, "heldout": heldout(report),
            "final_heldout": report.summary()["score_mean"], "wall_s": time.perf_counter() - start,
            "provenance": provenance()}


def train_run(arm: str, seed: int, steps: int, k: int, memo: ExecutionMemo, current: dict[str, Any]) -> dict[str, Any]:
    """Train one arm on one seed, then evaluate it by real execution; the run's record."""
    start = time.perf_counter()
    folder = SCRATCH / run_name(arm, seed).removesuffix(".json")
    shutil.rmtree(folder, ignore_errors=True)  # an interrupted attempt's logs; the trainer appends to anchors.csv
    config = run_config(arm, seed, steps, str(folder))
    core = make_core(config)
    core.scorer = MemoScorer(memo, **scorer_options(config))
    adapter = get_family(ENV_ID).make_adapter(config)
    trainer = WMRLTrainer(config, make_policy(POLICY, seed=seed), adapter, core=core)
    try:
        trainer.train(progress=False)
    finally:
        adapter.close()
        core.close()
    train_wall = time.perf_counter() - start
    report = evaluate(policy_responder(trainer.policy, seed), f"{arm} seed {seed}", eval_config(seed, k),
                      progress=False)
    totals, history = trainer.ledger.totals, trainer.history
    scripts = steps * TASKS_PER_STEP * GROUP_SIZE
    return {"arm": arm, "mode": config.mode, "world_model": config.family.world_model, "seed": seed,
            "settings": current, "config": config.to_dict(),
            "heldout": heldout(report), "final_heldout": report.summary()["score_mean"],
            "cpu_s": {c: e.cpu_s for c, e in totals.items()}, "ledger_wall_s": {c: e.wall_s for c, e in totals.items()},
            "counts": {c: e.count for c, e in totals.items()},
            "executed_share": totals["execution"].count / scripts,
            "reward_per_step": [h["reward/mean"] for h in history],
            "anchor_share_per_step": [h.get("train/anchor_share") for h in history],
            "executions_run": core.scorer.ran, "executions_reused": core.scorer.reused, "memo_replays_charged": True,
            "train_wall_s": train_wall, "eval_wall_s": report.wall_s, "wall_s": time.perf_counter() - start,
            "loadavg_1m_at_end": os.getloadavg()[0], "provenance": provenance()}


def run_one(name: str, steps: int, k: int, memo: ExecutionMemo, current: dict[str, Any]) -> dict[str, Any]:
    arm, _, seed = name.removesuffix(".json").rpartition("-s")
    if arm == UNTRAINED:
        return untrained_run(int(seed), k, current)
    return train_run(arm, int(seed), steps, k, memo, current)


# ------------------------------------------------------------------ the acceptance quantity
def gap_closed(finals: Mapping[str, Mapping[int, float]], world_model: str, resamples: int = RESAMPLES,
               seed: int = BOOTSTRAP_SEED) -> dict[str, Any] | None:
    """The share of the ``real`` − ``world_model`` gap in mean final held-out score that ``wmrl``
    closes with ``world_model``: ``(wmrl − world_model) / (real − world_model)``, over the seeds all
    three arms finished, with percentile bootstrap intervals over those seeds (resampled jointly)
    for it, for the gap and for ``wmrl``'s gain; None before any seed has all three.

    A resample whose gap is exactly 0 leaves the ratio undefined (counted in ``undefined``).
    ``identified`` is whether the gap's interval lies above 0: otherwise there is no gap to close,
    and the ratio says nothing.
    """
    arms = ("real", f"world_model-{world_model}", f"wmrl-{world_model}")
    seeds = sorted(set.intersection(*(set(finals.get(arm, {})) for arm in arms)))
    if not seeds:
        return None
    real, base, fused = (np.array([finals[arm][s] for s in seeds], dtype=float) for arm in arms)

    def ratio(idx: np.ndarray) -> float:
        gap = real[idx].mean() - base[idx].mean()
        return float((fused[idx].mean() - base[idx].mean()) / gap) if gap != 0 else math.nan

    gap = bootstrap(lambda idx: float(real[idx].mean() - base[idx].mean()), len(seeds), resamples, seed)
    return {"seeds": seeds, "ratio": bootstrap(ratio, len(seeds), resamples, seed), "gap": gap,
            "wmrl_gain": bootstrap(lambda idx: float(fused[idx].mean() - base[idx].mean()), len(seeds), resamples, seed),
            "identified": bool(gap["lo"] > 0)}


# ------------------------------------------------------------------ the report
def summarise(records: Mapping[str, dict[str, Any]], registered: dict[str, Any]) -> dict[str, Any]:
    """Per arm, mean ± SE over seeds; per world model, the acceptance quantity. Only runs made under
    the registered settings count; the others are named in ``set_aside``."""
    kept = {n: r for n, r in records.items() if not differing(r.get("settings"), registered)}
    arms = {}
    for arm in (UNTRAINED, *registered["arms"]):
        runs = sorted((r for r in kept.values() if r["arm"] == arm), key=lambda r: r["seed"])
        if not runs:
            continue
        row = {"seeds": [r["seed"] for r in runs], "final_heldout": stat([r["final_heldout"] for r in runs]),
               "per_task": {t: stat([r["heldout"]["per_task"][t] for r in runs]) for t in runs[0]["heldout"]["per_task"]},
               "valid_rate": stat([r["heldout"]["valid_rate"] for r in runs])}
        if arm != UNTRAINED:
            row.update({
                "execution_cpu_s": stat([r["cpu_s"]["execution"] for r in runs]),
                "world_model_cpu_s": stat([r["cpu_s"]["world_model"] for r in runs]),
                "total_cpu_s": stat([sum(r["cpu_s"].values()) for r in runs]),
                "executed_share": stat([r["executed_share"] for r in runs]),
                "wall_s": stat([r["wall_s"] for r in runs]),
                "commits": sorted({r["provenance"]["commit"][:10] for r in runs})})
        arms[arm] = row
    finals = {arm: {r["seed"]: r["final_heldout"] for r in kept.values() if r["arm"] == arm} for arm in registered["arms"]}
    boot = registered["bootstrap"]
    return {"arms": arms, "acceptance": {wm: gap_closed(finals, wm, boot["resamples"], boot["seed"]) for wm in WORLD_MODELS},
            "runs": len(kept), "planned": len(planned_runs(registered["seeds"], registered["arms"])),
            "set_aside": sorted(set(records) - set(kept))}


def _interval(b: Mapping[str, Any], digits: int = 2) -> str:
    return f"{b['value']:.{digits}f} [{b['lo']:.{digits}f}, {b['hi']:.{digits}f}]"


def markdown(summary: dict[str, Any], registered: dict[str, Any]) -> str:
    seeds_done = sorted({s for row in summary["arms"].values() for s in row["seeds"]})
    lines = [
        "### Training out of sample: a screen (issue 44, item 5)", "",
        f"**A screen, not a confirmation.** {summary['runs']} of {summary['planned']} registered runs finished "
        f"(seeds {seeds_done or 'none'} of {registered['seeds']}). Settings, split and the rule below were fixed in "
        f"[the registration]({REGISTRATION.name}) before any run; a finding here is a candidate for a confirmation on "
        "new seeds, not a result.", "",
        f"The grammar policy trains {registered['steps']} steps x {registered['tasks_per_step']} groups x "
        f"{registered['group_size']} rollouts on {', '.join(registered['tasks']['train'])}, and is evaluated on "
        f"{', '.join(registered['tasks']['heldout'])} by real execution (avg@{registered['eval_k']}, mean over the two "
        "tasks). No world model was fitted on any of these tasks. CPU-seconds from each run's ledger (memoised "
        "executions charged their first run's cost); mean ± SE over seeds.", "",
        "| arm | seeds | final held-out | execution CPU-s | world-model CPU-s | total CPU-s | executed share | wall (min) |",
        "|---|---|---:|---:|---:|---:|---:|---:|"]
    for arm, row in summary["arms"].items():
        seeds = ", ".join(map(str, row["seeds"]))
        if arm == UNTRAINED:
            lines.append(f"| untrained (every arm's start) | {seeds} | {stat_text(row['final_heldout'])} | | | | | |")
            continue
        wall = {**row["wall_s"], "mean": row["wall_s"]["mean"] / 60, "se": row["wall_s"]["se"] / 60}
        lines.append(f"| `{arm}` | {seeds} | {stat_text(row['final_heldout'])} | {stat_text(row['execution_cpu_s'], 0)} | "
                     f"{stat_text(row['world_model_cpu_s'], 0)} | {stat_text(row['total_cpu_s'], 0)} | "
                     f"{stat_text(row['executed_share'], 2)} | {stat_text(wall, 1)} |")
    lines += ["", "**Acceptance quantity** (wmrl − world_model) / (real − world_model) in mean final held-out score, "
                  f"percentile 95% bootstrap over seeds ({registered['bootstrap']['resamples']:,} resamples):", ""]
    for wm, acc in summary["acceptance"].items():
        if acc is None:
            lines.append(f"- `{wm}`: no seed has finished `real`, `world_model-{wm}` and `wmrl-{wm}` yet.")
            continue
        undefined = f"; {acc['ratio']['undefined']} resamples undefined" if acc["ratio"]["undefined"] else ""
        reading = ("" if acc["identified"] else
                   " The gap's interval reaches 0 or below: on these seeds there is no gap to close, and the ratio "
                   "says nothing.")
        lines.append(f"- `{wm}` (seeds {acc['seeds']}): **{_interval(acc['ratio'])}**{undefined}. Gap real − "
                     f"world_model {_interval(acc['gap'], 3)}; wmrl − world_model {_interval(acc['wmrl_gain'], 3)}."
                     + reading)
    tasks = registered["tasks"]["heldout"]
    lines += ["", "Final held-out avg@k per evaluation task, mean ± SE over seeds:", "",
              "| arm | " + " | ".join(tasks) + " | valid |", "|---|" + "---:|" * (len(tasks) + 1)]
    for arm, row in summary["arms"].items():
        lines.append(f"| {arm} | " + " | ".join(stat_text(row["per_task"][t]) for t in tasks)
                     + f" | {stat_text(row['valid_rate'], 2)} |")
    commits = sorted({c for row in summary["arms"].values() for c in row.get("commits", [])})
    lines += ["", f"Runs made at commit(s) {', '.join(f'`{c}`' for c in commits) or '–'}. {MEMO_NOTE}"]
    if summary["set_aside"]:
        lines.append(f"Set aside, made under other settings than the registration's: {', '.join(summary['set_aside'])}.")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ entry points
def prepare() -> None:
    """One thread a process; the screen's tasks generated and checked, and the only user tasks seen."""
    setup_threads()
    folder = default_out()
    materialise_screen(folder)
    # Only the screen's folders: a user's own WMRL_TASKS_DIR could shadow a task id.
    os.environ["WMRL_TASKS_DIR"] = str(folder)


def smoke(steps: int, seeds: list[int], arms: list[str], k: int) -> None:
    """The ``arms`` (and the untrained policy) for ``steps`` steps, each from a cold execution memo: the
    timings a registration estimates from. Nothing is archived; the records go to
    ``runs/oos_training_screen/smoke.json``."""
    current = settings()
    rows = []
    for seed in seeds:
        for name in planned_runs([seed], arms):
            with tempfile.TemporaryDirectory(prefix="oos-screen-memo-") as folder:
                record = run_one(name, steps, k, ExecutionMemo(Path(folder) / "memo.jsonl"), current)
            rows.append(record)
            cpu, counts = record.get("cpu_s", {}), record.get("counts", {})
            print(f"{name}: {record['wall_s']:.0f} s wall (train {record.get('train_wall_s', 0):.0f} s, eval "
                  f"{record['heldout']['wall_s']:.0f} s); ledger CPU-s execution {cpu.get('execution', 0):.1f} "
                  f"({counts.get('execution', 0)} runs), world model {cpu.get('world_model', 0):.1f} "
                  f"({counts.get('world_model', 0)} scripts), total {sum(cpu.values()):.1f}; held-out "
                  f"{record['final_heldout']:.3f}; load {os.getloadavg()[0]:.1f}", flush=True)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (SCRATCH / "smoke.json").write_text(json.dumps({"steps": steps, "eval_k": k, "runs": rows}, indent=1, default=str))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="write the report from the archive; train nothing")
    parser.add_argument("--smoke", action="store_true", help="time every arm on a few steps (nothing archived)")
    parser.add_argument("--steps", type=int, default=SMOKE_STEPS, help="with --smoke: steps a run trains")
    parser.add_argument("--seeds", type=int, nargs="+", default=[SEEDS[0]], help="with --smoke: seeds")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="with --smoke: arms")
    parser.add_argument("--settings", action="store_true",
                        help="print the settings as the registration's JSON block (to register a screen), and stop")
    args = parser.parse_args(argv)
    if args.settings:
        print(f"```json\n{settings_block(settings())}\n```")
        return
    if args.smoke:
        prepare()
        smoke(args.steps, args.seeds, args.arms, EVAL_K)
        return
    registered = run_registered(REGISTRATION, RUNS, SCRATCH, planned_runs(SEEDS, ARMS), settings, prepare,
                                lambda name, memo, current: run_one(name, STEPS, EVAL_K, memo, current),
                                report_only=args.report)
    summary = summarise(read_runs(RUNS), registered)
    md = write_result(NAME, __spec__.name, {"registered": registered, "summary": summary}, markdown(summary, registered))
    print(md.read_text())

if __name__ == "__main__":
    sys.exit(main())
