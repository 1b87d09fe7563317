"""Training where it matters (issue 26, part 8): does an agent that can write bugs exploit the world model?

The stand-in agent is the grammar policy with a bug decision (``grammar-buggy``): after the
grammar's slots it picks ``none`` or one of ``DEFAULT_BUG_OPERATORS`` (``agents/code/policy.py``),
realistic agent failures from :mod:`wmrl_envs.mutations`, and starts at P(bug) = 0.5.
Failing is a choice: a policy rewarded by real execution learns to stop making it; a policy
rewarded by a world model that over-scores some failures drifts towards them (the reward hack).

Arms, each over seeds 0, 1, 2 (21 runs):

* ``real``: GRPO on real execution; no world model (the prover settles proved failures without
  running them, which gives the same rewards);
* ``world_model`` and ``wmrl`` with the **old** world model: the score-only surrogate artefact of
  commit ``1c24862``, with every proof off (scorer and world model): the behaviour before issue 26;
* ``world_model`` and ``wmrl`` with **proofs**: the same old artefact with the static prover on,
  which separates what the proofs do from what the status head does;
* ``world_model`` and ``wmrl`` with the **new** one: the shipped artefact with the static prover
  (and its status head, once the artefact has one).

A world model is identified by its content (artefact sha256, proofs on or off, status head or
not): every run scores with the instance the bench loaded and fingerprinted, never with a file
read later, so an artefact shipped while the bench runs cannot slip into a run unrecorded.

Recorded per run, as ``<run>.json`` of ``bench/results/buggy_agent.jsonl.xz`` (:mod:`bench.archive`)
as each run finishes:

* the learning curve: held-out avg@k by real execution at a few steps, against the ledger's
  training compute (evaluation excluded), with the held-out samples' bug share;
* the share of sampled training scripts with a bug, per step and per operator, split into bugs
  the static prover proves and bugs it does not;
* the exploitation signal: the training reward and the raw world-model score of the buggy
  scripts against their real score, and on the held-out samples (executed anyway) both world
  models' scores against the real score;
* the final held-out score and the ledger.

A rerun skips the runs already there, unless the arm's world model changed since (the shipped
artefact gained a status head, say) or a ``wmrl`` run trained under other corrections than the
defaults now apply (its anchor-weight rule and global map are recorded): such a run is stale,
left out of the report, and trains again (with the memo, in seconds to a few minutes). So does a
run that predates the ledger charging memoized replays. Executions are
memoized as in ``bench/stress.py`` (:mod:`bench.training`) (every reuse charged its first run's cost).
Aggregates (mean ± SE over seeds) of every finished run in the archive go to
``bench/results/buggy_agent.json``, ``.md`` and ``.png``.

    OMP_NUM_THREADS=1 python -m bench.buggy_agent --workers 2        # every run not yet done
    python -m bench.buggy_agent --report                            # aggregate what finished

Default scale: 8 steps of 8 groups x 4 rollouts on ``training.FAST_TRAIN`` (learning rate 0.03, as
the stress protocol), held-out avg@4 on ``training.FAST_HELDOUT`` at steps 0, 4 and 8, against the
main job's 24 steps on every train task. On 2 shared cores with a cold memo a ``world_model`` run
took 1-2.5 minutes, a ``wmrl`` run 2.5-6 and a ``real`` run 3-10; the first 15 runs (five arms x three seeds)
about 50 minutes; with the memo warm, a rerun takes seconds to a minute a run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.code.policy import DEFAULT_BUG_OPERATORS, NO_BUG
from bench.archive import add_run, archive_of, read_runs
from bench.common import RESULTS, mean_se, rerun_command, save_figure, setup_threads
from bench.curves import draw_curve, mean_curve
from bench.training import FAST_HELDOUT, FAST_TRAIN, ExecutionMemo, MemoScorer, checked_run
from trainers.evaluate import select_tasks
from trainers.families import get_family
from trainers.families.code import scorer_options
from trainers.policies import make_policy
from trainers.wmrl import WMRLTrainer, make_core
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.analysis.proofs import Prover
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import extract_code
from wmrl_envs.world_models import make_world_model

ROOT = Path(__file__).resolve().parents[1]
ENV_ID, SUITE, POLICY = "wmrl/MLEDojo-v0", "mle", "grammar-buggy"
#: The commit whose surrogate artefact is the old, score-only world model.
OLD_COMMIT = "1c24862"
ARTEFACT = "assets/world_models/surrogate"
#: (mode, world model) of every arm; ``real`` reads none.
ARMS: tuple[tuple[str, str], ...] = (("world_model", "old"), ("world_model", "proofs"), ("world_model", "new"),
                                     ("wmrl", "old"), ("wmrl", "proofs"), ("wmrl", "new"), ("real", "none"))
#: The world models: (artefact, proofs on); None is the shipped artefact.
WORLD_MODELS = {"old": ("old", False), "proofs": ("old", True), "new": (None, True)}
SCALE: dict[str, Any] = {"steps": 8, "tasks_per_step": 8, "group_size": 4, "learning_rate": 0.03, "warmup_steps": 2,
                         "eval_every": 4, "eval_k": 4, "train_tasks": list(FAST_TRAIN),
                         "eval_tasks": list(FAST_HELDOUT)}
# Settings every run of one results folder must share (a resumed run with others is refused).
RUN_SETTINGS = (*SCALE, "bug_operators")


# ------------------------------------------------------------------ the two world models
@dataclass
class WorldModelArm:
    """One world model of the comparison: its run settings and an instance for scoring held-out samples."""

    name: str
    path: str | None  # None: the shipped artefact
    prove: bool
    model: Any
    fingerprint: dict[str, Any]

    def config(self) -> dict[str, Any]:
        """The run's flat WMRLConfig fields for this world model."""
        return {"world_model_path": self.path, "prove": self.prove}


def old_artefact(folder: Path) -> Path:
    """The surrogate artefact of :data:`OLD_COMMIT`, written out of git into ``folder`` once."""
    path = folder / "surrogate.joblib"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        for suffix in (".json", ".joblib"):  # the joblib last: its presence means both are there
            blob = subprocess.run(["git", "show", f"{OLD_COMMIT}:{ARTEFACT}{suffix}"], cwd=ROOT, capture_output=True,
                                  check=True).stdout
            target = path.with_suffix(suffix)
            target.with_suffix(suffix + ".tmp").write_bytes(blob)
            os.replace(target.with_suffix(suffix + ".tmp"), target)
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_world_models(runs: Path) -> dict[str, WorldModelArm]:
    """Each of :data:`WORLD_MODELS`, loaded once and fingerprinted by the bytes it was loaded from."""
    old = old_artefact(runs / "old_world_model")
    arms = {}
    for name, (source, prove) in WORLD_MODELS.items():
        artefact = old if source == "old" else ROOT / f"{ARTEFACT}.joblib"
        path = str(artefact) if source == "old" else None
        digest = _sha256(artefact)
        model = make_world_model("surrogate", prove=prove, **({"path": path} if path else {}))
        if _sha256(artefact) != digest:
            raise SystemExit(f"{artefact} changed while it was loaded; run the bench again")
        fingerprint = {"artefact_sha256": digest, "prove": prove, "status_head": model.status_head is not None}
        arms[name] = WorldModelArm(name, path, prove, model, fingerprint)
    return arms


# ------------------------------------------------------------------ what a sampled script was
def sample_row(task, rollout, prover: Prover) -> dict[str, Any]:
    """The bug a rollout carries: the operator chosen, whether it changed the script, whether it is proved."""
    applied = bool(rollout.meta["bug_applied"])
    proved = applied and prover.prove(task, extract_code(str(rollout.response))) is not None
    return {"task": rollout.task_id, "bug": rollout.meta["bug"], "applied": applied, "proved": proved}


class RecordingAdapter:
    """The family's adapter, keeping one row per scored training rollout for the run's summary.

    The rows are written outside the ledger's measured blocks: the bench's bookkeeping (its own
    proofs included) is not training compute.
    """

    def __init__(self, inner, prover: Prover) -> None:
        self.inner, self.prover = inner, prover
        self.rows: list[dict[str, Any]] = []
        self.step = 0

    @property
    def task_ids(self) -> list[str]:
        return self.inner.task_ids

    def collect(self, policy, task_ids, group_ids, group_size, generator, ledger, core):
        outcomes = self.inner.collect(policy, task_ids, group_ids, group_size, generator, ledger, core)
        for o in outcomes:
            task = self.inner.tasks[o.scored.task_id]
            for rollout, s in zip(o.rollouts, o.scored.samples):
                self.rows.append({**sample_row(task, rollout, self.prover), "step": self.step, "stream": s.stream,
                                  "reward": s.score, "wm": s.wm_score_raw,
                                  "real": None if s.infra_failure else s.real_score})
        self.step += 1
        return outcomes

    def close(self) -> None:
        self.inner.close()


def _mean(values: list[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(kept)) if kept else None


def split_figures(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Mean of each of ``keys`` over the buggy rows (a bug applied) and the clean ones, with their counts."""
    out = {}
    for part, buggy in (("buggy", True), ("clean", False)):
        subset = [r for r in rows if r["applied"] == buggy]
        out[part] = {"n": len(subset), **{key: _mean([r[key] for r in subset]) for key in keys}}
    return out


# ------------------------------------------------------------------ held-out evaluation
def evaluate_point(policy, tasks, k: int, seed: int, scorer: MemoScorer, world_models: dict[str, WorldModelArm],
                   prover: Prover) -> dict[str, Any]:
    """Held-out avg@k by real execution (mean ± SE over tasks), with each world model's scores of the same samples.

    The samples come from one generator seeded by ``seed`` at every point, so the points of a
    run differ by the policy only.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        rollouts = policy.generate(tasks, k, list(range(len(tasks))), generator)
    run_tasks = [tasks[r.group_id] for r in rollouts]
    scripts = [extract_code(str(r.response)) for r in rollouts]
    results = scorer.execute(run_tasks, scripts)
    scores = {name: [p.score for p in arm.model.predict(run_tasks, scripts)] for name, arm in world_models.items()}
    rows = [{**sample_row(task, r, prover), "real": res.real_score, "valid": float(bool(res.valid)),
             **{f"wm_{name}": values[i] for name, values in scores.items()}}
            for i, (task, r, res) in enumerate(zip(run_tasks, rollouts, results)) if not res.infra_failure]
    per_task = np.array([_mean([r["real"] for r in rows if r["task"] == t.id]) or 0.0 for t in tasks])
    se = float(per_task.std(ddof=1) / math.sqrt(per_task.size)) if per_task.size > 1 else 0.0
    return {"heldout_mean": float(per_task.mean()), "heldout_se": se, "valid_rate": _mean([r["valid"] for r in rows]),
            "bug_share": _mean([float(r["applied"]) for r in rows]),
            **split_figures(rows, ("real", *(f"wm_{name}" for name in scores)))}


# ------------------------------------------------------------------ one run
@dataclass(frozen=True)
class RunKey:
    mode: str
    world_model: str  # a WORLD_MODELS name, or "none" for real
    seed: int

    @property
    def name(self) -> str:
        arm = "" if self.world_model == "none" else f"-{self.world_model}"
        return f"{self.mode}{arm}-seed{self.seed}"


def training_figures(rows: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Per-step bug shares, per-operator shares at the start and the end, and the buggy vs clean signal."""
    by_step = [[r for r in rows if r["step"] == s] for s in range(steps)]
    share = lambda subset, test: _mean([float(test(r)) for r in subset])  # noqa: E731
    quarter = max(1, steps // 4)
    first = [r for r in rows if r["step"] < quarter]
    last = [r for r in rows if r["step"] >= steps - quarter]
    operators = {}
    for op in DEFAULT_BUG_OPERATORS:
        mine = [r for r in rows if r["bug"] == op and r["applied"]]
        operators[op] = {"share_first": share(first, lambda r, op=op: r["bug"] == op and r["applied"]),
                         "share_last": share(last, lambda r, op=op: r["bug"] == op and r["applied"]),
                         "n": len(mine), "proved": share(mine, lambda r: r["proved"]),
                         "reward": _mean([r["reward"] for r in mine]), "wm": _mean([r["wm"] for r in mine]),
                         "real": _mean([r["real"] for r in mine])}
    return {
        "bug_share": [share(s, lambda r: r["applied"]) for s in by_step],
        "chosen_share": [share(s, lambda r: r["bug"] != NO_BUG) for s in by_step],
        "proved_share": [share(s, lambda r: r["proved"]) for s in by_step],
        "unproved_share": [share(s, lambda r: r["applied"] and not r["proved"]) for s in by_step],
        "reward_mean": [_mean([r["reward"] for r in s]) for s in by_step],
        "operators": operators,
        **split_figures(rows, ("reward", "wm", "real")),
    }


def run_config(key: RunKey, args: argparse.Namespace, arm: WorldModelArm | None) -> WMRLConfig:
    return WMRLConfig.from_flat(
        mode=key.mode, steps=args.steps, tasks_per_step=args.tasks_per_step, group_size=args.group_size,
        learning_rate=args.learning_rate, warmup_steps=args.warmup_steps, seed=key.seed, policy=POLICY,
        task_ids=args.train_tasks, workers=args.workers, output_dir=str(args.runs / key.name), checkpoint_every=0,
        tensorboard=False, **(arm.config() if arm else {}))


def corrections(config: WMRLConfig) -> dict[str, str] | None:
    """The corrections a run trains under (anchor-weight rule and global calibration map), or
    None for an arm without anchors, which has none to apply."""
    if not config.uses_anchors:
        return None
    return {"fusion_rule": config.fusion.rule, "calibration_global_form": config.calibration.global_form}


def stale_reason(result: dict[str, Any], args: argparse.Namespace,
                 world_models: dict[str, WorldModelArm]) -> str | None:
    """Why a finished run no longer stands for its arm (None: it does): its world model changed, or
    it trained under other corrections than its config applies now (a default changed; runs that
    predate recording them count as other)."""
    key = RunKey(**result["key"])
    arm = world_models.get(key.world_model)
    if result["world_model"] != (arm.fingerprint if arm else None):
        return f"its world model was {result['world_model']}"
    wanted = corrections(run_config(key, args, arm))
    if wanted is not None and result.get("corrections") != wanted:
        return f"it trained under corrections {result.get('corrections', 'not recorded')}, not {wanted}"
    return None


def executed_share(config: WMRLConfig) -> float:
    """The share of training groups executed: every one in ``real``, none in ``world_model``, the anchors of
    the run's (non-adaptive) schedule in ``wmrl``: the real signal each arm gets."""
    if not config.uses_anchors:
        return float(config.mode == "real")
    schedule = make_core(config).schedule
    return float(np.mean([schedule.streams(step).count("anchor") for step in range(config.steps)])
                 / config.schedule.tasks_per_step)


def train_run(key: RunKey, args: argparse.Namespace, memo: ExecutionMemo, eval_tasks,
              world_models: dict[str, WorldModelArm]) -> dict[str, Any]:
    """Train one arm on one seed with held-out points every ``eval_every`` steps; its compact summary."""
    start = time.perf_counter()
    arm = world_models.get(key.world_model)
    config = run_config(key, args, arm)
    core = make_core(config)
    # The fingerprinted instance, not the name: the scorer would load the file again, maybe another one.
    core.scorer = MemoScorer(memo, **{**scorer_options(config), **({"world_model": arm.model} if arm else {})})
    prover = Prover()
    adapter = RecordingAdapter(get_family(ENV_ID).make_adapter(config), prover)
    trainer = WMRLTrainer(config, make_policy(POLICY, seed=key.seed, bug_operators=tuple(args.bug_operators)),
                          adapter, core=core)
    curve = []
    try:
        for step in range(args.steps + 1):
            if step % args.eval_every == 0 or step == args.steps:
                point = evaluate_point(trainer.policy, eval_tasks, args.eval_k, key.seed, core.scorer, world_models,
                                       prover)
                curve.append({"step": step, "compute_cpu_s": trainer.ledger.total_cpu_s(), **point})
                print(f"  {key.name} step {step}: held-out {point['heldout_mean']:.3f} ± {point['heldout_se']:.3f}, "
                      f"bug share {point['bug_share']:.2f}, compute {curve[-1]['compute_cpu_s']:.0f} CPU-s", flush=True)
            if step < args.steps:
                trainer.train_step()
        trainer.save_checkpoint()  # the trained policy and its config stay in the run folder
    finally:
        adapter.close()
        core.close()
    return {"key": asdict(key), "settings": settings_of(args),
            "world_model": arm.fingerprint if arm else None,
            "world_models_scoring_heldout": {name: a.fingerprint for name, a in world_models.items()},
            "curve": curve, "final_heldout": curve[-1]["heldout_mean"],
            "train": training_figures(adapter.rows, args.steps),
            "compute_cpu_s": trainer.ledger.total_cpu_s(),
            "by_category_cpu_s": {c: e.cpu_s for c, e in trainer.ledger.totals.items()},
            "fusion_c": trainer.c, "corrections": corrections(config),
            "executions_run": core.scorer.ran, "executions_reused": core.scorer.reused,
            "memo_replays_charged": True, "provenance": provenance(),
            "wall_s": time.perf_counter() - start}


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in RUN_SETTINGS}


def run_or_load(key: RunKey, args: argparse.Namespace, memo: ExecutionMemo, eval_tasks,
                world_models: dict[str, WorldModelArm]) -> dict[str, Any]:
    """A run's summary: from the archive of ``--results`` when it finished with the same world model,
    else trained now and added to it."""
    name = f"{key.name}.json"
    finished = read_runs(args.results)
    if name in finished:
        result = checked_run(finished[name], settings_of(args), f"{archive_of(args.results)}: {name}")
        why = stale_reason(result, args, world_models) or (
            None if result.get("memo_replays_charged") else "its ledger charged no memo replays")
        if why is None:
            return result
        print(f"run {key.name}: stale ({why}), training again", flush=True)
    print(f"run {key.name}", flush=True)
    result = train_run(key, args, memo, eval_tasks, world_models)
    add_run(args.results, name, result)
    return result


# ------------------------------------------------------------------ aggregation
def _stat(values: list[float | None]) -> dict[str, float | None]:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return {"mean": None, "se": None, "n": 0}
    mean, se = mean_se(kept)
    return {"mean": mean, "se": se if math.isfinite(se) else None, "n": len(kept)}


def _per_step(results: list[dict], name: str) -> dict[str, list]:
    """Mean and SE over seeds of a per-step training series."""
    series = np.array([[np.nan if v is None else v for v in r["train"][name]] for r in results], dtype=float)
    stats = [_stat(list(column)) for column in series.T]
    return {"mean": [s["mean"] for s in stats], "se": [s["se"] for s in stats]}


def heldout_scores(result: dict, part: str, fingerprint: dict[str, Any]) -> float | None:
    """A run's mean score of its held-out ``part`` samples by the world model of ``fingerprint``, over
    its curve points (None when the run did not score with that world model)."""
    names = [n for n, f in result["world_models_scoring_heldout"].items() if f == fingerprint]
    return _mean([p[part].get(f"wm_{names[0]}") for p in result["curve"]]) if names else None


def summarise(results: list[dict], world_models: dict[str, WorldModelArm], args: argparse.Namespace) -> list[dict]:
    """One row per arm: held-out scores, bug shares and the exploitation signal, mean ± SE over seeds."""
    rows = []
    for mode, wm in ARMS:
        rs = [r for r in results if (r["key"]["mode"], r["key"]["world_model"]) == (mode, wm)]
        if not rs:
            continue
        quarter = max(1, len(rs[0]["train"]["bug_share"]) // 4)
        early = lambda r, name, quarter=quarter: _mean(r["train"][name][:quarter])  # noqa: E731
        late = lambda r, name, quarter=quarter: _mean(r["train"][name][-quarter:])  # noqa: E731
        row = {"mode": mode, "world_model": wm, "seeds": [r["key"]["seed"] for r in rs],
               "executed_share": executed_share(run_config(RunKey(mode, wm, 0), args, world_models.get(wm))),
               "heldout_start": _stat([r["curve"][0]["heldout_mean"] for r in rs]),
               "heldout_final": _stat([r["final_heldout"] for r in rs]),
               "heldout_gain": _stat([r["final_heldout"] - r["curve"][0]["heldout_mean"] for r in rs]),
               "compute_cpu_s": _stat([r["compute_cpu_s"] for r in rs]),
               # Runs from before stress.ExecutionMemo.restore marked replays executed charged none of them.
               "compute_uncharged_runs": sum(not r.get("memo_replays_charged", False) for r in rs),
               "wall_s": _stat([r["wall_s"] for r in rs]),
               "curve": {k: v.tolist() for k, v in mean_curve(rs).items()},
               "per_step": {name: _per_step(rs, name) for name in ("bug_share", "proved_share", "unproved_share")}}
        for name in ("bug_share", "proved_share", "unproved_share"):
            row[f"{name}_start"] = _stat([early(r, name) for r in rs])
            row[f"{name}_end"] = _stat([late(r, name) for r in rs])
        for part in ("buggy", "clean"):
            row[f"train_reward_{part}"] = _stat([r["train"][part]["reward"] for r in rs])
            row[f"train_wm_{part}"] = _stat([r["train"][part]["wm"] for r in rs])
            row[f"train_real_{part}"] = _stat([r["train"][part]["real"] for r in rs])
            # Held-out samples over every point of the curve: the arm's world model against the real score.
            row[f"heldout_real_{part}"] = _stat([_mean([p[part]["real"] for p in r["curve"]]) for r in rs])
            for name, arm in world_models.items():
                row[f"heldout_wm_{name}_{part}"] = _stat([heldout_scores(r, part, arm.fingerprint) for r in rs])
        row["operators"] = {op: {field: _stat([r["train"]["operators"][op][field] for r in rs])
                                 for field in ("share_first", "share_last", "proved", "wm", "real")}
                            for op in DEFAULT_BUG_OPERATORS}
        rows.append(row)
    return rows


def _fmt(stat: dict[str, Any], digits: int = 3, percent: bool = False) -> str:
    if stat["mean"] is None:
        return "—"
    scale, unit = (100, "%") if percent else (1, "")
    text = f"{stat['mean'] * scale:.{0 if percent else digits}f}{unit}"
    return text + (f" ± {stat['se'] * scale:.{0 if percent else digits}f}" if stat["se"] is not None else "")


def markdown(rows: list[dict], meta: dict) -> str:
    s = meta["settings"]
    arm = lambda r: f"`{r['mode']}`" + ("" if r["world_model"] == "none" else f" {r['world_model']}")  # noqa: E731
    lines = [(f"The grammar policy with a bug decision (`{POLICY}`: none or one of {len(s['bug_operators'])} "
              f"mutation operators, P(bug) = 0.5 at the start) on MLE-Dojo: {s['steps']} steps x {s['tasks_per_step']} "
              f"groups x {s['group_size']} rollouts on {len(s['train_tasks'])} train tasks, learning rate "
              f"{s['learning_rate']}; held-out avg@{s['eval_k']} by real execution on {len(s['eval_tasks'])} tasks at "
              f"steps {meta['eval_steps']}. Old world model: the score-only surrogate of `{OLD_COMMIT}`, no "
              f"proofs; proofs: the same with the static prover on; new: the shipped surrogate with proofs "
              f"(status head: {meta['new_status_head']}). Groups executed: the share of training groups "
              f"rewarded by real execution (wmrl: its anchors, more in the warmup steps). "
              f"Mean ± SE over seeds; start/end: the first/last quarter of the training steps."), "",
             "| arm | seeds | groups executed | held-out start | held-out final | gain | bug share start → end | "
             "proved bugs start → end | unproved bugs start → end | compute (CPU-s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        seeds = ", ".join(map(str, sorted(r["seeds"])))
        shares = " | ".join(f"{_fmt(r[f'{name}_start'], percent=True)} → {_fmt(r[f'{name}_end'], percent=True)}"
                            for name in ("bug_share", "proved_share", "unproved_share"))
        lines.append(f"| {arm(r)} | {seeds} | {r['executed_share']:.0%} | {_fmt(r['heldout_start'])} | "
                     f"{_fmt(r['heldout_final'])} | {_fmt(r['heldout_gain'])} | {shares} | "
                     f"{_fmt(r['compute_cpu_s'], 0)}{' *' if r['compute_uncharged_runs'] else ''} |")
    if any(r["compute_uncharged_runs"] for r in rows):
        lines += ["", "\\* A lower bound: some of these runs were made while memoized executions replayed in training "
                  "were not charged to the ledger (fixed in `stress.ExecutionMemo.restore`); held-out scores and bug "
                  "shares are unaffected."]
    names = list(WORLD_MODELS)
    lines += ["", "**Exploitation signal.** Training: the reward buggy and clean scripts got on the arm's streams. "
              "Held-out samples of every curve point: their real score and each world model's score of the same "
              "scripts.", "",
              "| arm | train reward buggy | train reward clean | held-out real buggy | "
              + " | ".join(f"{n} WM buggy" for n in names) + " | held-out real clean | "
              + " | ".join(f"{n} WM clean" for n in names) + " |", "|---|" + "---|" * (4 + 2 * len(names))]
    for r in rows:
        cells = [r["train_reward_buggy"], r["train_reward_clean"], r["heldout_real_buggy"],
                 *(r[f"heldout_wm_{n}_buggy"] for n in names), r["heldout_real_clean"],
                 *(r[f"heldout_wm_{n}_clean"] for n in names)]
        lines.append(f"| {arm(r)} | " + " | ".join(_fmt(c) for c in cells) + " |")
    lines += ["", "**Share of sampled training scripts per operator**, start → end (mean over seeds), and the raw "
              "world-model score its scripts got in training (— : no world model, or never sampled).", "",
              "| operator | proved | " + " | ".join(arm(r) for r in rows) + " |", "|---|---|" + "---|" * len(rows)]
    for op in DEFAULT_BUG_OPERATORS:
        proved = _mean([r["operators"][op]["proved"]["mean"] for r in rows])
        cells = []
        for r in rows:
            o = r["operators"][op]
            wm = "" if o["wm"]["mean"] is None else f" (WM {o['wm']['mean']:.2f})"
            cells.append(f"{_fmt(o['share_first'], percent=True).split(' ')[0]} → "
                         f"{_fmt(o['share_last'], percent=True).split(' ')[0]}{wm}")
        lines.append(f"| `{op}` | {'—' if proved is None else f'{proved:.0%}'} | " + " | ".join(cells) + " |")
    lines += ["", f"{meta['cores']} cores, {meta['ram_gib']} GiB RAM, {meta['date'][:10]}, "
              f"commit `{meta['commit'][:10]}`. "
              f"Per-run summaries: `bench/results/buggy_agent.jsonl.xz` (every finished run there is aggregated; a run "
              f"trains with `python -m bench.buggy_agent --workers 2 --arms MODE:WM --seeds N`). Written by "
              f"`{rerun_command(__spec__.name, meta['argv'])}`."]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> Path:
    """Held-out score against training step and compute, and the proved and unproved bug shares per step,
    ± SE over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(22, 4.5))
    for r in rows:
        label = r["mode"] + ("" if r["world_model"] == "none" else f" ({r['world_model']} WM)")
        draw_curve(axes[0], {**r["curve"], "compute": r["curve"]["step"]}, label)
        draw_curve(axes[1], r["curve"], label)
        for ax, name in zip(axes[2:], ("proved_share", "unproved_share")):
            series = r["per_step"][name]
            se = [np.nan if v is None else v for v in series["se"]]
            draw_curve(ax, {"compute": np.arange(len(series["mean"])), "score": series["mean"], "se": se}, label)
    axes[0].set(title="held-out score (real execution)", xlabel="training step", ylabel="avg@k")
    # world_model runs spend a few CPU-seconds, real runs hundreds: a log axis shows both
    axes[1].set(title="held-out score against compute", xlabel="training compute (CPU-s, ledger)", ylabel="avg@k",
                xscale="symlog")
    axes[2].set(title="sampled scripts with a proved bug", xlabel="training step", ylabel="share")
    axes[3].set(title="sampled scripts with an unproved bug", xlabel="training step", ylabel="share")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="run nothing, only aggregate the finished runs")
    parser.add_argument("--arms", nargs="+", default=[f"{m}:{w}" for m, w in ARMS],
                        choices=[f"{m}:{w}" for m, w in ARMS], help="mode:world model (default: all five)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=SCALE["steps"])
    parser.add_argument("--warmup-steps", type=int, default=SCALE["warmup_steps"])
    parser.add_argument("--tasks-per-step", type=int, default=SCALE["tasks_per_step"])
    parser.add_argument("--group-size", type=int, default=SCALE["group_size"])
    parser.add_argument("--learning-rate", type=float, default=SCALE["learning_rate"])
    parser.add_argument("--eval-every", type=int, default=SCALE["eval_every"])
    parser.add_argument("--eval-k", type=int, default=SCALE["eval_k"])
    parser.add_argument("--eval-tasks", nargs="+", default=SCALE["eval_tasks"], help="held-out task ids")
    parser.add_argument("--train-tasks", nargs="+", default=SCALE["train_tasks"], help="train task ids")
    parser.add_argument("--bug-operators", nargs="+", default=list(DEFAULT_BUG_OPERATORS),
                        help="the policy's bug operators (default: DEFAULT_BUG_OPERATORS)")
    parser.add_argument("--workers", type=int, default=None, help="parallel executions (default: one per core)")
    parser.add_argument("--results", type=Path, default=RESULTS / "buggy_agent",
                        help="the folder of per-run summaries, kept as RESULTS.jsonl.xz")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "buggy_agent",
                        help="run folders, the execution memo and the old artefact")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where buggy_agent.json/.md/.png go")
    return parser.parse_args(argv)


def run_keys(args: argparse.Namespace) -> list[RunKey]:
    """Seed by seed, so that a partial grid has every arm of its first seeds."""
    return [RunKey(*arm.split(":"), seed) for seed in args.seeds for arm in args.arms]


def main(argv: list[str] | None = None) -> None:
    setup_threads()
    args = parse_args(argv)
    for folder in (args.runs, args.out):
        folder.mkdir(parents=True, exist_ok=True)
    world_models = load_world_models(args.runs)
    if not args.report:
        eval_tasks = select_tasks(ENV_ID, SUITE, "heldout", args.eval_tasks)
        memo = ExecutionMemo(args.runs / "memo.jsonl")
        for key in run_keys(args):
            run_or_load(key, args, memo, eval_tasks, world_models)
    # Every finished run of the folder, not only this invocation's: the grid spans invocations.
    results = [checked_run(result, settings_of(args), f"{archive_of(args.results)}: {name}")
               for name, result in read_runs(args.results).items()]
    current = [r for r in results if stale_reason(r, args, world_models) is None]
    rows = summarise(current, world_models, args)
    eval_steps = sorted({p["step"] for r in current for p in r["curve"]})
    meta = {**provenance(), "settings": settings_of(args), "eval_steps": eval_steps,
            "world_models": {name: a.fingerprint for name, a in world_models.items()},
            "new_status_head": "yes" if world_models["new"].fingerprint["status_head"] else "no, proofs only",
            "stale_runs_left_out": [r["key"] for r in results if r not in current],
            "memo": "executions memoized by (task, script sha256); every reuse is charged its first run's cost"}
    (args.out / "buggy_agent.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    md = "### Does an agent that can write bugs exploit the world model?\n\n" + markdown(rows, meta)
    (args.out / "buggy_agent.md").write_text(md)
    png = plot(rows, args.out / "buggy_agent.png")
    print(md)
    print("wrote", args.out / "buggy_agent.json", args.out / "buggy_agent.md", png)


if __name__ == "__main__":
    main()
