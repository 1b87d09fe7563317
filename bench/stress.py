"""Stress test: WMRL when the world model is wrong (issue 13, docs/architecture.md §10).

The grammar policy trains on MLE-Dojo tasks in every mode (``real``, ``world_model``, ``wmrl``
and its two ablations, adaptive anchoring off and on) under both advantages (``std``, ``mean``),
for several seeds, while the surrogate world model is corrupted by one of
:mod:`wmrl_envs.world_models.corrupted` (``none``: the surrogate as shipped). Every few steps the
policy is scored on held-out tasks by real execution (avg@k), which gives learning curves of
held-out score against training compute (CPU-seconds from the ledger, evaluation excluded).

Speedup, read off the curves (mean over seeds): the compute ``real`` needs to reach its own
final held-out score, divided by the compute a mode needs to reach that score (linear between
evaluation points; none when a mode never reaches it).

Executions are memoized by (task id, sha256 of the script) across every run, training and
evaluation: a scikit-learn script with a fixed seed scores the same on every run, so a repeat is
not run again. Every reuse is charged the measured cost of the first run, in every mode alike,
so the ledger's compute is what running it would have cost. ``real`` does not read the world
model, so its runs are shared by every corruption.

Resumable: each run's result is added to the archive of ``--runs`` as it finishes
(:mod:`bench.archive`: the folder ``F`` is kept as ``F.jsonl.xz``), and a rerun skips the runs
already there. Writes ``bench/results/stress.json`` (one row per
corruption, mode, advantage and adaptive setting), ``stress.md`` and a PNG of learning curves
per corruption (``stress_<corruption>.png``).

    python -m bench.stress --quick           # 21 runs: family bias and swap, std advantages
    python -m bench.stress                   # 300 runs: every corruption, mode and advantage
    python -m bench.stress --corruptions noise --modes real wmrl --advantages std \
        --sweep anchor_fraction=0.2 fusion_w_max=8 c_rule=inverse_eta2   # sensitivity of one setting at a time
    python -m bench.stress --corrections --corruptions none noise:0.1 \
        --sweep fusion_rule=sampling fusion_rule=paper fusion_rule=none preset=paper   # screen the anchor-weight rules

The ``corrections`` grid (issue 28) trains 12 steps with at least 2 anchor groups a step, so a
run collects 112 anchor pairs (2 warmup steps at half anchors, then 2 of 8 groups), on the
clean surrogate and the (a) saturate 4, (c) family bias 0.5, (d) swap 0.3 and (f) noise 0.1
rows. A candidate is a sweep variant: ``fusion_rule=<rule>`` (mode ``wmrl-<rule>``; plain
``wmrl`` is the default rule), ``calibration_stratify=true`` (mode ``wmrl-stratified``: a
calibration map per solution family), ``calibration_debias_flagged_strata=true`` (mode
``wmrl-flagged-strata``: an offset for each family the audit's stratum check flags) or
``preset=paper`` (mode ``wmrl-paper-preset``: the reference release's corrections,
:data:`trainers.wmrl_config.PRESETS`, inside the grid's batch shape). Diagnostic variants:
``calibration_extend_ends=true`` (mode ``wmrl-extended-ends``: the calibration map keeps rising
past its end blocks), ``fusion_anchor_real_share=<0..1>`` (an anchor's reward blends in its
calibrated world-model score) and ``calibration_task_prior_pairs=<n>`` (a fixed pooling of the
per-task maps, ``1e6`` the global map alone).
Its per-run summaries (curve, final score, anchor pairs, w_A trace) are kept in
``bench/results/stress_runs/corrections.jsonl.xz`` so that a grid resumes on another machine and
can be audited; the execution memo stays under ``runs/``. ``--report --pool RUNS...`` reads several
such folders as separate draws of the same grid (another machine, arithmetic or set of seeds):
seed s of the D-th folder is reported as 1000·D + s, so one seed run in two draws is two pairs.

Both presets train 8 steps of 8 groups x 4 rollouts on 12 fast train tasks (learning rate
0.03) and evaluate avg@4 on 6 fast held-out tasks at steps 0, 4 and 8.

Both are long on 2 cores: real execution is what the baseline pays for. A smoke test of the
plumbing: ``--corruptions swap --seeds 0 --advantages std --steps 2 --warmup-steps 1
--tasks-per-step 2 --group-size 2 --eval-every 1 --eval-tasks diabetes-progression
concrete-strength --eval-k 1``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.archive import add_run, archive_of, read_runs
from bench.common import median_flag, rerun_command, save_figure
from bench.curves import crossing, draw_curve, mean_curve
from bench.speedup import Interval, compute_ratio, compute_to_score, executed_share, score_difference
from bench.stress_records import (
    STRATUM_CHECK,
    SWITCHES,
    as_recorded,
    names_a_default,
)
from bench.training import (
    FAST_HELDOUT,
    FAST_TRAIN,
    MEMO_NOTE,
    ExecutionMemo,
    FreshPairAudit,
    MemoScorer,
    audit_summary,
    checked_run,
    heldout_score,
    step_scripts,
)
from trainers.evaluate import select_tasks
from trainers.families import get_family
from trainers.policies import make_policy
from trainers.wmrl import WMRLTrainer, make_core
from trainers.wmrl_config import ADVANTAGES, MODES, WMRLConfig
from trainers.wmrl_config import PRESETS as CONFIG_PRESETS
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.scoring.fusion import ANCHOR_WEIGHT_RULES
from wmrl_envs.world_models import make_world_model
from wmrl_envs.world_models.corrupted import (
    DEFAULT_STRENGTHS,
    CorruptedWorldModel,
    Corruption,
)

ROOT = Path(__file__).resolve().parents[1]
ENV_ID, SUITE = "wmrl/MLEDojo-v0", "mle"
# Both presets: 8 steps of 8 groups x 4 on the fast train tasks, a learning rate ten times the
# main job's (3e-3) so that 8 steps move the policy about as far as the main job's 24 (at 3e-3
# the held-out curves of 8-step runs barely left their start), and held-out avg@4 on 6 tasks.
SCALE: dict[str, Any] = {"steps": 8, "tasks_per_step": 8, "learning_rate": 0.03, "eval_every": 4, "eval_k": 4,
                         "train_tasks": list(FAST_TRAIN), "eval_tasks": list(FAST_HELDOUT)}
PRESETS: dict[str, dict[str, Any]] = {
    # The two script-dependent corruptions, where only real rewards help: exploitable family bias
    # (c) and the non-monotone swap (d), with and without adaptive anchoring; std advantages.
    # 21 runs, under an hour on 2 cores.
    "quick": {"corruptions": ["family_bias", "swap"], "modes": ["real", "world_model", "wmrl"],
              "advantages": ["std"], **SCALE},
    # Every corruption at its default strength and the clean surrogate, every mode, both
    # advantages: 300 runs (hours; resumable).
    "full": {"corruptions": ["none", *DEFAULT_STRENGTHS], "modes": list(MODES), "advantages": list(ADVANTAGES),
             **SCALE},
}
# The corrections grid (issue 28): runs long enough for >= 100 anchor pairs, at least two anchor
# groups a step as the reference release anchors; every row the issue names, std advantages.
PRESETS["corrections"] = {**SCALE, "steps": 12, "min_anchor_groups": 2, "adaptive": ["off"],
                          "corruptions": ["none", "saturate:4", "family_bias:0.5", "swap:0.3", "noise:0.1"],
                          "modes": ["real", "world_model", "wmrl"], "advantages": ["std"]}
# The confirmation (issue 28): the corrections grid on five seeds no screen saw, with the default
# chosen by the pre-registered rule (bench/results/stress_corrections_preregistration.md) as
# ``wmrl``, the former default as ``wmrl-eta2`` and the reference release's settings.
# Its committed runs (seeds 3-7) came before the map's form was a setting, so they ran with the
# isotonic map and are reported as ``(isotonic map)``; a rerun into an empty folder runs today's.
PRESETS["confirmation"] = {**PRESETS["corrections"], "seeds": [3, 4, 5, 6, 7],
                           "sweep": ["fusion_rule=eta2", "preset=paper"]}
# The anchors comparison (issue 46, registered in bench/results/informed_anchors_registration.md):
# the corrections grid's shape at an executed share of about 10% (no warmup under the default
# anchor weight, 0.8 anchor groups a step rounded so the run executes its share), the hash
# schedule (the default wmrl) beside informed anchors, on the clean, (f) and (c) rows and five
# seeds no run has used; one world-model group a step audited on fresh executions.
PRESETS["anchors"] = {**PRESETS["corrections"], "min_anchor_groups": 0, "warmup_steps": None,
                      "corruptions": ["none", "noise:0.1", "family_bias:0.5"], "modes": ["real", "wmrl"],
                      "seeds": [40, 41, 42, 43, 44], "sweep": ["anchor_choice=informed"], "audit_groups": 1}
# Issue 46's second registered comparison (bench/results/anchors_per_cost_registration.md): the
# anchors grid's shape, rows and audit on five new seeds, the hash schedule beside informed anchors
# per cost (information weighed against each group's predicted execution cost).
PRESETS["anchors_per_cost"] = {**PRESETS["anchors"], "seeds": [45, 46, 47, 48, 49],
                               "sweep": ["anchor_choice=informed_per_cost"]}
# Asynchronous anchors on the corrections grid's clean row (issue 47, item 4): its schedule (the
# warm-up, then at least two anchor groups a step) synchronous, against staleness bounds 1, 2 and 4,
# every execution run for real (no memo), so that the training wall each bound takes is the wall a
# user's run would take; seeds run back to back on one machine. Evaluated at the start and the end
# only: anchors in flight run on through a mid-run evaluation, whose time is no step's, so the steps'
# summed wall would miss their execution (see :func:`training_wall`).
PRESETS["async"] = {**PRESETS["corrections"], "corruptions": ["none"], "modes": ["wmrl"], "seeds": [0, 1, 2],
                    "eval_every": PRESETS["corrections"]["steps"], "fresh_executions": True,
                    "sweep": ["max_staleness=1", "max_staleness=2", "max_staleness=4"]}
#: What a sweep (``--sweep``) may vary in the wmrl mode: a flat WMRLConfig field, ``c_rule``
#: (``measured``: the trainer's warmup measurement, the default; ``inverse_eta2``: c = 1/η̂² at
#: the first residual), or ``preset`` (a :data:`trainers.wmrl_config.PRESETS` entry, keeping the
#: grid's batch shape and warmup so that every mode of a row trains on the same batches).
SWEEPABLE = ("anchor_fraction", "fusion_w_max", "fusion_rule", "fusion_anchor_real_share", "calibration_stratify",
             "calibration_debias_flagged_strata", "calibration_extend_ends", "calibration_task_prior_pairs",
             "calibration_global_form", "c_rule", "preset", "anchor_choice", "max_staleness")
# Settings every run of one --runs folder must share: a resumed run with others is refused.
RUN_SETTINGS = ("steps", "warmup_steps", "tasks_per_step", "group_size", "learning_rate", "eval_every", "eval_k",
                "eval_tasks",
                "train_tasks", "eta2_bound", "pair_window", "min_anchor_groups")


# ------------------------------------------------------------------ the execution memo
# ------------------------------------------------------------------ one run
@dataclass(frozen=True)
class RunKey:
    corruption: str  # "none", a corruption kind, or "any" for real (it reads no world model)
    strength: float | None
    mode: str
    advantage: str
    adaptive: bool
    seed: int
    variant: str = ""  # sweep settings "name=value[+name=value]" (SWEEPABLE), or "" for the defaults

    @property
    def name(self) -> str:
        strength = "" if self.strength is None else f"{self.strength:g}"
        adaptive = "-adaptive" if self.adaptive else ""
        variant = f"-{self.variant}" if self.variant else ""
        return f"{self.corruption}{strength}-{self.mode}{adaptive}{variant}-{self.advantage}-seed{self.seed}"

    def overrides(self) -> dict[str, Any]:
        """The variant's flat WMRLConfig overrides (``c_rule`` is not a config field). The ``w_max``
        and ``c_rule`` sweeps study the ``eta2`` rule's weight, so they run under it whatever the default."""
        overrides: dict[str, Any] = {}
        for setting in self.variant.split("+") if self.variant else []:
            overrides.update(setting_overrides(setting))
        return overrides


def setting_overrides(setting: str) -> dict[str, Any]:
    """One sweep setting's flat WMRLConfig overrides (see :meth:`RunKey.overrides`)."""
    name, _, value = setting.partition("=")
    if name == "c_rule":
        return {"fusion_rule": "eta2"}
    if name == "fusion_w_max":
        return {name: float(value), "fusion_rule": "eta2"}
    if name == "preset":
        return {k: v for k, v in CONFIG_PRESETS[value].items() if k not in GRID_SHAPE}
    if name in SWITCHES:
        return {name: value == "true"}
    if name == "max_staleness":
        return {name: int(value)}
    return {name: value if name in ("fusion_rule", "calibration_global_form", "anchor_choice") else float(value)}


def mode_label(mode: str, variant: str) -> str:
    """The mode as tables name it: ``wmrl-<rule>`` for a rule, ``wmrl-paper-preset`` for the preset,
    ``wmrl-<switch>`` for a switch turned on, else the mode; the variant's other settings follow in
    brackets, a rule as ``<rule> rule`` and a map form as ``<form> map``
    (``wmrl-stratified (isotonic map, eta2 rule)``)."""
    head, *rest = variant.split("+") if variant else [""]
    name, _, value = head.partition("=")
    qualifiers = [qualifier(setting) for setting in rest]
    if name == "fusion_rule":
        label = f"{mode}-{value}"
    elif name == "preset":
        label = f"{mode}-{value}-preset"
    elif value == "true" and name in SWITCHES:
        label = f"{mode}-{SWITCHES[name]}"
    else:
        label = mode
        qualifiers = ([qualifier(head)] if head else []) + qualifiers
    return label + (f" ({', '.join(qualifiers)})" if qualifiers else "")


def qualifier(setting: str) -> str:
    """One setting of a variant as a label's bracket names it."""
    name, _, value = setting.partition("=")
    if name == "fusion_rule":
        return f"{value} rule"
    if name == "calibration_global_form":
        return f"{value} map"
    if name == "anchor_choice":
        return f"{value} anchors"
    return setting


def world_model_of(key: RunKey, base) -> Any:
    if key.corruption in ("none", "any"):
        return base
    return CorruptedWorldModel(base, Corruption(key.corruption, key.strength), seed=key.seed)


def train_run(key: RunKey, args: argparse.Namespace, base, memo: ExecutionMemo, eval_tasks) -> dict[str, Any]:
    settings = dict(
        mode=key.mode, steps=args.steps, tasks_per_step=args.tasks_per_step, group_size=args.group_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps, seed=key.seed, advantage=key.advantage, adaptive_anchors=key.adaptive,
        eta2_bound=args.eta2_bound if key.adaptive else None, calibration_pair_window=args.pair_window,
        min_anchor_groups=args.min_anchor_groups if key.mode.startswith("wmrl") else 1,
        task_ids=args.train_tasks, workers=args.workers, output_dir=str(args.memo_dir / key.name),
        checkpoint_every=0, tensorboard=False)
    config = WMRLConfig.from_flat(**{**settings, **key.overrides()})
    world_model = world_model_of(key, base)
    core = make_core(config)
    if key.variant == "c_rule=inverse_eta2":
        core.measure_c = False  # c = 1/eta2 at the first residual; the warmup then measures nothing
    scorer_kind = CodeScorer if args.fresh_executions else partial(MemoScorer, memo)
    core.scorer = scorer_kind(world_model=world_model, executor=config.family.executor, workers=config.family.workers)
    adapter = get_family(ENV_ID).make_adapter(config)
    trainer = WMRLTrainer(config, make_policy("grammar", seed=key.seed), adapter, core=core)
    audit = FreshPairAudit(memo, {t.id: t for t in select_tasks(ENV_ID, SUITE, "train", args.train_tasks)},
                           args.audit_groups, key.seed, executor=config.family.executor,
                           workers=config.family.workers) if args.audit_groups and config.uses_anchors else None
    curve, executed, scripts = [], 0, 0
    try:
        for step in range(args.steps + 1):
            if step % args.eval_every == 0 or step == args.steps:
                point = heldout_score(trainer.policy, eval_tasks, args.eval_k, key.seed, core.scorer)
                mean, se = point.mean, point.se
                curve.append({"step": step, "compute_cpu_s": trainer.ledger.total_cpu_s(),
                              "heldout_mean": mean, "heldout_se": se})
                print(f"  {key.name} step {step}: held-out {mean:.3f} ± {se:.3f}, "
                      f"compute {curve[-1]['compute_cpu_s']:.0f} CPU-s", flush=True)
            if step < args.steps:
                if isinstance(world_model, CorruptedWorldModel):
                    world_model.step = trainer.step  # drift reads the training step
                trainer.train_step()
                outcomes = trainer.last_outcomes
                step_executed, step_total = step_scripts(outcomes)
                executed, scripts = executed + step_executed, scripts + step_total
                if audit is not None:
                    audit.add(step, outcomes)
    finally:
        adapter.close()
        core.close()
        if audit is not None:
            audit.close()
    history = trainer.history
    flagged = next((h["calibration/n_pairs"] for h in history if h.get("calibration/monotone_ok") == 0.0), None)
    fraction = {"real": 1.0, "world_model": 0.0}.get(key.mode, history[-1].get("anchors/fraction", math.nan))
    return {"key": asdict(key), "settings": {name: getattr(args, name) for name in RUN_SETTINGS},
            "curve": curve, "compute_cpu_s": trainer.ledger.total_cpu_s(),
            "by_category_cpu_s": {c: e.cpu_s for c, e in trainer.ledger.totals.items()},
            "audit_flagged_at_pairs": flagged, "final_anchor_fraction": fraction,
            "anchor_fractions": [h.get("anchors/fraction") for h in history],
            "anchor_reasons": [h.get("anchors/reason") for h in history],
            "fusion_c": trainer.c, "w_anchor": [h.get("fusion/w_anchor") for h in history],
            "fusion_rule": config.fusion.rule, "calibration_stratify": config.calibration.stratify,
            "calibration_debias_flagged_strata": config.calibration.debias_flagged_strata,
            "calibration_extend_ends": config.calibration.extend_ends,
            "calibration_global_form": config.calibration.global_form,
            "global_affine": [h.get("calibration/global_affine") for h in history],
            "fusion_anchor_real_share": config.fusion.anchor_real_share,
            "strata_debiased": [h.get("calibration/strata_debiased") for h in history],
            "stratum_z_max": [h.get("calibration/stratum_z_max") for h in history],
            "stratum_check": STRATUM_CHECK,
            "monotone_ok": [h.get("calibration/monotone_ok") for h in history],
            "pairs_per_step": [h.get("calibration/n_pairs") for h in history],
            "calibrator_state": core.calibrator.state_dict(),
            "eta2": [h.get("calibration/eta2") for h in history],
            "executions_run": getattr(core.scorer, "ran", None), "executions_reused": getattr(core.scorer, "reused", None),
            **training_wall(history, config.schedule.max_staleness, args.eval_every, args.steps),
            "max_staleness": config.schedule.max_staleness,
            "staleness_samples": staleness_of(Path(config.output_dir)),
            "executed_scripts": executed, "training_scripts": scripts,
            "anchor_choice": config.schedule.anchor_choice, "warmup_steps": config.warmup_steps,
            **({"fresh_pairs": audit.pairs} if audit is not None else {}),
            # Runs repeat on one machine, not across machines: say which machine this one was.
            "provenance": provenance()}


def training_wall(history: list[dict], max_staleness: int, eval_every: int, steps: int) -> dict[str, float]:
    """``{"train_wall_s": the steps' summed wall}`` where that sum is the training's wall, else ``{}``.
    Under asynchronous anchors an evaluation between the first and the last step runs while anchors
    are in flight: they execute in time no step counts (and beside the evaluation's own executions),
    so the sum would undercount the wall, and the run records none."""
    if max_staleness and eval_every < steps:
        return {}
    return {"train_wall_s": sum(h["time/step_s"] for h in history)}


def staleness_of(run_dir: Path) -> dict[str, int]:
    """Anchor samples by the steps between their submission and their landing (``anchors.csv``)."""
    path = run_dir / "anchors.csv"
    if not path.exists():
        return {}
    with path.open(newline="") as fh:
        ages = Counter(int(r["landed_step"]) - int(r["step"]) for r in csv.DictReader(fh))
    return {str(k): v for k, v in sorted(ages.items())}


#: Settings a preset variant leaves to the grid: every mode of a row trains on the same batches.
GRID_SHAPE = ("tasks_per_step", "group_size", "warmup_steps")


def run_keys(args: argparse.Namespace) -> list[RunKey]:
    keys = []
    for seed in args.seeds:
        for advantage in args.advantages:
            if "real" in args.modes:
                keys.append(RunKey("any", None, "real", advantage, False, seed))
            for corruption, strength in args.corruptions:
                for mode in args.modes:
                    if mode == "real":
                        continue
                    for adaptive in (args.adaptive if mode.startswith("wmrl") else [False]):
                        keys.append(RunKey(corruption, strength, mode, advantage, adaptive, seed))
                for variant in args.sweep if "wmrl" in args.modes else []:  # wmrl with one setting changed
                    keys.append(RunKey(corruption, strength, "wmrl", advantage, False, seed, variant))
    return keys


# ------------------------------------------------------------------ summary
def summarise(results: list[dict], args: argparse.Namespace) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        k = r["key"]
        group = groups.setdefault((k["corruption"], k["strength"], k["mode"], k["advantage"], k["adaptive"],
                                   k.get("variant", "")), [])
        if any(other["key"]["seed"] == k["seed"] for other in group):
            raise SystemExit(f"two runs of {mode_label(k['mode'], k.get('variant', ''))} on {k['corruption']}, seed "
                             f"{k['seed']}: one folder holds each run once (pool folders with --pool)")
        group.append(r)
    curves = {g: mean_curve(rs) for g, rs in groups.items()}
    rows = []
    for corruption, strength in args.corruptions:
        for advantage in args.advantages:
            real_runs = groups.get(("any", None, "real", advantage, False, ""), [])
            for g, curve in curves.items():
                if g[3] != advantage or (g[0], g[1]) not in (("any", None), (corruption, strength)):
                    continue
                rs = groups[g]
                target, real_cost = real_target(real_runs, {r["key"]["seed"] for r in rs})
                finals = np.array([r["curve"][-1]["heldout_mean"] for r in rs])
                cost = crossing(curve["compute"], curve["score"], target) if target is not None else None
                flagged = [r["audit_flagged_at_pairs"] for r in rs]
                rows.append({
                    **saving_readings(rs, real_runs), **wall_readings(rs),
                    "corruption": corruption, "strength": strength, "mode": g[2], "advantage": advantage,
                    "adaptive": g[4], "variant": g[5], "seeds": [r["key"]["seed"] for r in rs],
                    "heldout_mean": float(finals.mean()), "heldout_se": float(curve["se"][-1]),
                    "compute_cpu_s": float(np.mean([r["compute_cpu_s"] for r in rs])),
                    "compute_to_target_cpu_s": cost,
                    "speedup_vs_real": real_cost / cost if cost and real_cost is not None else None,
                    "audit_flagged_at_pairs": median_flag(flagged) if g[2].startswith("wmrl") else None,
                    "audit_flagged_at_pairs_by_seed": flagged,
                    "final_anchor_fraction": float(np.mean([r["final_anchor_fraction"] for r in rs])),
                    "fusion_c_by_seed": [r.get("fusion_c") for r in rs],
                    "finals_by_seed": {r["key"]["seed"]: r["curve"][-1]["heldout_mean"] for r in rs},
                    "last_stratum_z_by_seed": [last_value(r.get("stratum_z_max", [])) for r in rs],
                    "curve": {name: values.tolist() for name, values in curve.items()},
                })
    return rows


#: The score whose compute-to-reach the tables read (:func:`bench.speedup.compute_to_score`), fixed
#: before the runs that read it: issue 46's audit read the committed grid at it.
FIXED_SCORE = 0.55


def saving_readings(runs: list[dict], real_runs: list[dict]) -> dict[str, Any]:
    """A row's saving as :mod:`bench.speedup` reads it, against ``real`` on the seeds both ran, and
    its rewards' error on fresh executions where the runs audited them."""
    executed, scripts = zip(*(scripts_of(r) for r in runs))
    real_by_seed = {r["key"]["seed"]: r for r in real_runs}
    paired = [(real_by_seed[r["key"]["seed"]], r) for r in runs if r["key"]["seed"] in real_by_seed]
    readings: dict[str, Any] = {"executed_share": executed_share(executed, scripts),
                                "executed_share_counted": all("executed_scripts" in r for r in runs),
                                "paired_seeds": [r["key"]["seed"] for _, r in paired]}
    if paired:
        reals, mine = zip(*paired)
        readings["compute_ratio"] = compute_ratio([r["compute_cpu_s"] for r in reals],
                                                  [r["compute_cpu_s"] for r in mine]).to_dict()
        readings["score_difference"] = score_difference([r["curve"][-1]["heldout_mean"] for r in reals],
                                                        [r["curve"][-1]["heldout_mean"] for r in mine]).to_dict()
        readings["compute_to_fixed_score"] = compute_to_score([r["curve"] for r in reals], [r["curve"] for r in mine],
                                                              FIXED_SCORE).to_dict()
    if executed and all("executed_scripts" in r and "by_category_cpu_s" in r for r in runs) and sum(executed):
        # What a row's executions cost per sample of its executed groups (issue 46: the schedule that picks
        # anchors picks their price); a proved or reused sample costs nothing and counts.
        readings["execution_cpu_per_anchor_sample"] = (sum(r["by_category_cpu_s"].get("execution", 0.0) for r in runs)
                                                         / sum(executed))
    if all("fresh_pairs" in r for r in runs):
        readings["fresh_pairs"] = audit_summary([pair for r in runs for pair in r["fresh_pairs"]])
        readings["fresh_mae_by_seed"] = {r["key"]["seed"]: audit_summary(r["fresh_pairs"])["mae"] for r in runs}
    return readings


def wall_readings(runs: list[dict]) -> dict[str, Any]:
    """A row's training wall (mean ± SE over seeds) and its anchors' staleness, pooled, where its runs
    timed their steps (issue 47); the wall means something only where every execution ran."""
    if not all("train_wall_s" in r for r in runs):
        return {}
    walls = np.array([r["train_wall_s"] for r in runs])
    # The wall over its bound on the run's machine, the training's CPU-seconds over the cores: how much
    # of the wall is waiting. Steadier than a ratio of walls, since runs at other bounds train other
    # scripts and so execute different amounts.
    over_bound = np.array([r["train_wall_s"] / (r["compute_cpu_s"] / r["provenance"]["cores"]) for r in runs])
    ages = Counter()
    for r in runs:
        ages.update({int(k): v for k, v in r["staleness_samples"].items()})

    def se(values: np.ndarray) -> float:
        return float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan

    return {"train_wall_s": float(walls.mean()), "train_wall_se": se(walls),
            "wall_over_bound": float(over_bound.mean()), "wall_over_bound_se": se(over_bound),
            "staleness_samples": {str(k): ages[k] for k in sorted(ages)}}


def scripts_of(run: dict) -> tuple[float, float]:
    """``(executed, training)`` scripts of a run: as it counted them, or for a run made before it
    did, from its settings and its calibrator's pairs (each a script of an anchor group: the count
    per step, or in the oldest records the pairs themselves; NaN under a pair window, which
    forgets some)."""
    if "executed_scripts" in run:
        return run["executed_scripts"], run["training_scripts"]
    settings, mode = run["settings"], run["key"]["mode"]
    total = settings["steps"] * settings["tasks_per_step"] * settings["group_size"]
    if mode in ("real", "world_model"):
        return (total if mode == "real" else 0), total
    pairs = last_value(run["pairs_per_step"]) if "pairs_per_step" in run else len(run.get("anchor_pairs", []))
    return (math.nan if settings["pair_window"] is not None or not pairs else pairs), total


def real_target(real_runs: list[dict], seeds: set[int]) -> tuple[float | None, float | None]:
    """``real``'s final score off its mean curve, and the compute at which that curve first reaches
    it: over the runs of ``seeds`` when ``real`` ran every one of them, else over every ``real`` run.
    A pooled report's rows hold different seeds (one row ten, another twenty-five), and a mode's
    curve is compared with ``real``'s on the same seeds."""
    paired = [r for r in real_runs if r["key"]["seed"] in seeds]
    runs = paired if paired and len(paired) == len(seeds) else real_runs
    if not runs:
        return None, None
    curve = mean_curve(runs)
    target = float(curve["score"][-1])
    return target, crossing(curve["compute"], curve["score"], target)


def last_value(trace: list[float | None]) -> float | None:
    """The last logged value of a per-step trace (None: never logged)."""
    return next((v for v in reversed(trace) if v is not None), None)


#: The confirmation's acceptance (issue 28): ``wmrl`` no lower than each baseline minus one SE of
#: the difference, the speedup at least this on at least SPEEDUP_ROWS rows, and on the
#: script-dependent rows the last audit's stratum |z| under the alarm.
SPEEDUP_GOAL, SPEEDUP_ROWS, STRATUM_ROWS = 5.0, 4, ("family_bias", "swap")
#: The seeds the acceptance is read over; a report over as many reads it for every correction it ran.
ACCEPTANCE_SEEDS = 5


def acceptance(rows: list[dict], stratum_alarm: float, variant: str = "") -> tuple[list[dict], str]:
    """Issue 28's acceptance, row by row, read off the final scores of ``wmrl`` with ``variant``
    (default: the default ``wmrl``).

    Every comparison uses the seeds all three modes finished (a partial grid says how many). The
    SE of a difference of two means is ``sqrt(SE_a² + SE_b²)`` over those seeds; the paired SE
    (over the per-seed differences: the same seeds start from the same policy) is shown too. The
    speedup is the table's, read off the mean curves of every finished seed.
    """
    checks, lines = [], []
    lines += [(f"| row | seeds | `{mode_label('wmrl', variant)}` | − `real` (SE; paired SE) | "
               "− `world_model` (SE; paired SE) | speedup (issue 28's reading: to `real`'s final) | "
               "last stratum \\|z\\| (max over seeds) | holds |"), "|---|---|---|---|---|---|---|---|"]
    for corruption in dict.fromkeys(r["corruption"] for r in rows):
        pick = {r["mode"] + r["variant"]: r for r in rows if r["corruption"] == corruption and not r["adaptive"]}
        wmrl, real, world = pick.get("wmrl" + variant), pick.get("real"), pick.get("world_model")
        if not (wmrl and real and world):
            continue
        seeds = sorted(set(wmrl["finals_by_seed"]) & set(real["finals_by_seed"]) & set(world["finals_by_seed"]))
        if not seeds:
            continue
        ours = np.array([wmrl["finals_by_seed"][s] for s in seeds])
        diffs = {}
        for name, base in (("real", real), ("world_model", world)):
            theirs = np.array([base["finals_by_seed"][s] for s in seeds])
            se = math.hypot(*(x.std(ddof=1) / math.sqrt(x.size) for x in (ours, theirs))) if len(seeds) > 1 else math.nan
            per_seed = ours - theirs
            paired = float(per_seed.std(ddof=1) / math.sqrt(per_seed.size)) if len(seeds) > 1 else math.nan
            gap = float(per_seed.mean())
            diffs[name] = (gap, se, paired, bool(gap >= -se) if math.isfinite(se) else gap >= 0)
        z = [v for v in wmrl["last_stratum_z_by_seed"] if v is not None]
        z_max = max(z) if z else None
        stratum_ok = corruption not in STRATUM_ROWS or (z_max is not None and z_max < stratum_alarm)
        speedup = wmrl["speedup_vs_real"]
        holds = diffs["real"][3] and diffs["world_model"][3] and stratum_ok
        checks.append({"corruption": corruption, "seeds": seeds, "wmrl": float(ours.mean()),
                       "minus_real": diffs["real"][:3], "minus_world_model": diffs["world_model"][:3],
                       "speedup": speedup, "stratum_z_max": z_max, "holds_scores": bool(holds),
                       "speedup_goal": bool(speedup is not None and speedup >= SPEEDUP_GOAL)})
        fmt = lambda d: f"{d[0]:+.3f} ({d[1]:.3f}; {d[2]:.3f}) {'ok' if d[3] else '**below**'}"  # noqa: E731
        lines.append(f"| {corruption} | {len(seeds)} | {ours.mean():.3f} | {fmt(diffs['real'])} | "
                     f"{fmt(diffs['world_model'])} | {'—' if speedup is None else f'{speedup:.1f}x'} | "
                     f"{'—' if z_max is None else f'{z_max:.2f}'} | {'yes' if holds else '**no**'} |")
    fast = sum(c["speedup_goal"] for c in checks)
    lines += ["", f"Speedup ≥ {SPEEDUP_GOAL:g}x on {fast} of {len(checks)} rows judged (goal: {SPEEDUP_ROWS} of 5). "
              f"The stratum alarm is |z| > {stratum_alarm:g} (the audit's), checked on {', '.join(STRATUM_ROWS)}. "
              f"A row with fewer than {ACCEPTANCE_SEEDS} seeds is a partial reading, not the acceptance."]
    return checks, "\n".join(lines)


#: Issue 46's registered acceptance (bench/results/informed_anchors_registration.md): the executed
#: share's cap, the total-compute ratio's goal, the non-inferiority margin, the coverage band around
#: the nominal 0.9, and the bounded pairs a row needs before its coverage is judged.
SHARE_CAP, RATIO_GOAL, MARGIN, COVERAGE_BAND, MIN_BOUNDED = 0.12, 6.0, 0.03, (0.87, 0.93), 40
INFORMED = "anchor_choice=informed"
#: Each anchors grid's informed variant.
INFORMED_VARIANT = {"anchors": INFORMED, "anchors_per_cost": "anchor_choice=informed_per_cost"}


def anchors_acceptance(rows: list[dict], informed_variant: str = INFORMED) -> tuple[list[dict], str]:
    """Issue 46's acceptance, read once per row and schedule as registered: (1) executed share at
    most the cap; (2) total-compute ratio at least the goal and held-out difference at least minus
    the margin (points; the intervals beside them); (3) informed anchors' fresh-pair MAE no worse than
    the hash schedule's on the same row (pooled; the paired per-seed difference and its SE beside
    it); (4) bound coverage inside the band where a row has enough bounded pairs."""
    checks, lines = [], [
        "| row | anchors | seeds | executed share | compute ratio | held-out − `real` (\\|·\\|) | fresh-pair MAE "
        "| bound coverage (bounded pairs) | 1 share | 2 saving | 3 MAE | 4 coverage |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for corruption in dict.fromkeys(r["corruption"] for r in rows):
        pick = {r["variant"]: r for r in rows if r["corruption"] == corruption and r["mode"] == "wmrl"}
        hashed, informed = pick.get(""), pick.get(informed_variant)
        for name, row in (("hash", hashed), (informed_variant.partition("=")[2].replace("_", " "), informed)):
            if row is None or "compute_ratio" not in row or "fresh_pairs" not in row:
                continue
            ratio, diff = Interval.from_dict(row["compute_ratio"]), Interval.from_dict(row["score_difference"])
            pairs = row["fresh_pairs"]
            share_ok = bool(row["executed_share"] <= SHARE_CAP)
            saving_ok = bool(ratio.point >= RATIO_GOAL and diff.point >= -MARGIN)
            mae_ok, mae_note = None, ""
            if row is informed and hashed is not None and "fresh_pairs" in hashed:
                mae_ok = bool(pairs["mae"] <= hashed["fresh_pairs"]["mae"])
                common = sorted(set(row["fresh_mae_by_seed"]) & set(hashed["fresh_mae_by_seed"]))
                gaps = np.array([row["fresh_mae_by_seed"][s] - hashed["fresh_mae_by_seed"][s] for s in common])
                if gaps.size > 1:
                    mae_note = f"; paired − hash {gaps.mean():+.3f} (SE {gaps.std(ddof=1) / math.sqrt(gaps.size):.3f})"
            judged = pairs["bounded"] >= MIN_BOUNDED
            coverage_ok = bool(COVERAGE_BAND[0] <= pairs["coverage"] <= COVERAGE_BAND[1]) if judged else None
            checks.append({"corruption": corruption, "anchors": name, "seeds": row["seeds"],
                           "executed_share": row["executed_share"], "compute_ratio": row["compute_ratio"],
                           "score_difference": row["score_difference"], "fresh_pairs": pairs,
                           "execution_cpu_per_anchor_sample": row.get("execution_cpu_per_anchor_sample"),
                           "share_ok": share_ok, "saving_ok": saving_ok, "mae_ok": mae_ok, "coverage_ok": coverage_ok})
            verdict = lambda ok: "—" if ok is None else ("yes" if ok else "**no**")  # noqa: E731
            lines.append(
                f"| {corruption} | {name} | {len(row['seeds'])} | {row['executed_share']:.3f} | {ratio.text(1, 'x')} | "
                f"{diff.text(3, signed=True)} ({abs(diff.point):.3f}) | {pairs['mae']:.3f}{mae_note} | "
                f"{pairs['coverage']:.3f} ({pairs['bounded']}) | {verdict(share_ok)} | {verdict(saving_ok)} | "
                f"{verdict(mae_ok)} | {verdict(coverage_ok) if judged else 'unjudged'} |")
    per_script = [f"{c['corruption']} {c['anchors']} {c['execution_cpu_per_anchor_sample']:.2f}" for c in checks
                  if c.get("execution_cpu_per_anchor_sample") is not None]
    if per_script:
        lines += ["", "Execution CPU-seconds per anchor sample (the ledger's execution over the samples of anchor "
                      "groups; a proved or reused outcome costs nothing), pooled over a row's seeds; not a registered "
                      "point, added after the screen: " + "; ".join(per_script) + "."]
    lines += ["", (f"Registered thresholds: share ≤ {SHARE_CAP:g}; ratio ≥ {RATIO_GOAL:g}x and held-out − `real` ≥ "
                   f"−{MARGIN:g} (points); informed MAE ≤ hash MAE (pooled); coverage in [{COVERAGE_BAND[0]:g}, "
                   f"{COVERAGE_BAND[1]:g}] where at least {MIN_BOUNDED} pairs carried a bound. A row with fewer than "
                   f"{ACCEPTANCE_SEEDS} seeds is a partial reading.")]
    return checks, "\n".join(lines)


def acceptance_sections(rows: list[dict], stratum_alarm: float) -> tuple[dict[str, list[dict]], str]:
    """Issue 28's acceptance for every ``wmrl`` correction the rows hold, each under the name it
    ran with (the default first): the checks by correction, and the tables as markdown."""
    checks, md = {}, ""
    for variant in sorted({r["variant"] for r in rows if r["mode"] == "wmrl" and not r["adaptive"]}):
        checks[variant or "default"], table = acceptance(rows, stratum_alarm, variant)
        md += (f"\n**Acceptance (issue 28), `{mode_label('wmrl', variant)}`"
               f"{'' if variant else ' (the default)'}:**\n\n{table}\n")
    return checks, md


def markdown(rows: list[dict], meta: dict) -> str:
    cfg = meta["config"]
    audited = any("fresh_pairs" in r for r in rows)
    lines = [(f"Grammar policy on MLE-Dojo, {cfg['steps']} steps x {cfg['tasks_per_step']} groups x "
             f"{cfg['group_size']} rollouts; held-out avg@{cfg['eval_k']} by real execution on "
             f"{meta['n_eval_tasks']} tasks every {cfg['eval_every']} steps; mean ± SE over seeds {cfg['seeds']}. "
             f"The saving, as `bench/speedup.py` defines it, against `real` on the seeds both ran, 90% intervals "
             f"from bootstrapping seeds: the executed share of training scripts (* : counted from the calibrator's "
             f"pairs, for runs made before scripts were counted); the total-compute ratio (`real`'s training compute over the "
             f"mode's); the final held-out difference (mode − `real`); and `real`'s compute to first reach "
             f"{FIXED_SCORE:g}, a score fixed before the runs, over the mode's (— : a mean curve never reaches it). "
             f"{MEMO_NOTE}"), ""]
    if audited:
        lines += [("Fresh pairs: world-model groups (one a step, drawn at random whatever chose the anchors) "
                   "executed apart, never learned from: the mean absolute error of the reward the run trained "
                   "on, and how often the reward's error bound held (nominal "
                   f"{WMRLConfig().fusion.error_bound_level:g})."), ""]
    if cfg.get("pool"):
        draws = "; ".join(f"{POOL_SEED_STRIDE * d}s: `{folder}`" for d, folder in enumerate(cfg["pool"], start=1))
        lines += [(f"Pooled draws (a seed s of the D-th folder is reported as {POOL_SEED_STRIDE}·D + s, so one seed "
                   f"run in two draws is two pairs): {draws}."), ""]
    for corruption in dict.fromkeys(r["corruption"] for r in rows):
        strength = next(r["strength"] for r in rows if r["corruption"] == corruption)
        fresh_head, fresh_rule = (" fresh-pair MAE | bound coverage |", "---|---|") if audited else ("", "")
        if cfg.get("fresh_executions"):
            fresh_head += " training wall (s) | wall / (CPU-s / cores) | staleness (samples) |"
            fresh_rule += "---|---|---|"
        lines += [f"**{corruption}**" + (f" (strength {strength:g})" if strength is not None else ""), "",
                  ("| mode | advantage | adaptive | held-out | compute (CPU-s) | executed share | compute ratio | "
                   f"held-out − `real` | to {FIXED_SCORE:g}, ratio | audit flagged at (pairs) |{fresh_head}"),
                  f"|---|---|---|---|---|---|---|---|---|---|{fresh_rule}"]
        for r in (r for r in rows if r["corruption"] == corruption):
            flagged = ", ".join("—" if f is None else f"{f:.0f}" for f in r["audit_flagged_at_pairs_by_seed"])
            mode = mode_label(r["mode"], r["variant"])
            readings = [reading(r, "compute_ratio", 1, "x"), reading(r, "score_difference", 3, signed=True),
                        reading(r, "compute_to_fixed_score", 1, "x")]
            share = f"{r['executed_share']:.3f}{'' if r['executed_share_counted'] else '*'}"
            fresh = ""
            if audited:
                pairs = r.get("fresh_pairs")
                fresh = (" — | — |" if pairs is None else
                         f" {pairs['mae']:.3f} ({pairs['pairs']}) | {pairs['coverage']:.3f} ({pairs['bounded']}) |")
            if cfg.get("fresh_executions"):
                ages = ", ".join(f"{k}: {v}" for k, v in r.get("staleness_samples", {}).items())
                if "train_wall_s" in r:
                    se = f" ± {r['train_wall_se']:.0f}" if math.isfinite(r["train_wall_se"]) else ""
                    bound_se = f" ± {r['wall_over_bound_se']:.2f}" if math.isfinite(r["wall_over_bound_se"]) else ""
                    fresh += f" {r['train_wall_s']:.0f}{se} | {r['wall_over_bound']:.2f}{bound_se} | {ages} |"
                else:
                    fresh += " — | — | — |"
            lines.append(f"| `{mode}` | {r['advantage']} | {'on' if r['adaptive'] else 'off'} | "
                         f"{r['heldout_mean']:.3f} ± {r['heldout_se']:.3f} | {r['compute_cpu_s']:.0f} | {share} | "
                         f"{' | '.join(readings)} | {flagged if r['mode'].startswith('wmrl') else ''} |{fresh}")
        lines.append("")
    lines.append(f"{meta['cores']} cores, {meta['ram_gib']} GiB RAM, {meta['date'][:10]}, commit "
                 f"`{meta['commit'][:10]}`. Rerun: `{rerun_command(__spec__.name, meta['argv'])}`")
    return "\n".join(lines) + "\n"


def reading(row: dict, name: str, digits: int, suffix: str = "", signed: bool = False) -> str:
    """A saving reading of a row (:func:`saving_readings`) as a table cell: point [90% interval]."""
    return Interval.from_dict(row[name]).text(digits, suffix, signed) if name in row else "—"


def plot(rows: list[dict], out: Path, name: str = "stress") -> list[Path]:
    """One PNG per corruption (``<name>_<corruption>.png``): held-out score against training compute,
    one panel per advantage; the candidates of a rule sweep (``fusion_rule``, ``preset``) are curves too."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for corruption in dict.fromkeys(r["corruption"] for r in rows):
        subset = [r for r in rows if r["corruption"] == corruption]
        advantages = list(dict.fromkeys(r["advantage"] for r in subset))
        fig, axes = plt.subplots(1, len(advantages), figsize=(6 * len(advantages), 4.5), squeeze=False)
        for ax, advantage in zip(axes[0], advantages):
            for r in (r for r in subset if r["advantage"] == advantage):
                if r["variant"] and not r["variant"].startswith(("fusion_rule=", "preset=", *SWITCHES)):
                    continue  # one-setting sweeps are in the tables; the curves compare the modes
                draw_curve(ax, r["curve"], f"{mode_label(r['mode'], r['variant'])}{' adaptive' if r['adaptive'] else ''}")
            ax.set(title=f"{corruption}, {advantage} advantages", xlabel="training compute (CPU-s)",
                   ylabel="held-out score (avg@k)")
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{name}_{corruption}.png"
        save_figure(fig, path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


# ------------------------------------------------------------------ main
def parse_corruption(text: str) -> tuple[str, float | None]:
    kind, _, strength = text.partition(":")
    if kind == "none":
        return "none", None
    return kind, Corruption(kind, float(strength) if strength else None).strength


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    grid = parser.add_mutually_exclusive_group()
    grid.add_argument("--quick", action="store_true", help="the quick preset (default: the full grid)")
    grid.add_argument("--corrections", action="store_true",
                      help="the corrections grid (12 steps, >= 2 anchor groups a step, 5 rows; issue 28)")
    grid.add_argument("--confirmation", action="store_true",
                      help="the corrections grid on seeds 3-7: real, world_model, the default wmrl, wmrl-eta2 and "
                           "the paper preset (issue 28's confirmation)")
    grid.add_argument("--async", dest="async_", action="store_true",
                      help="issue 47's measurement: the clean row's wmrl at staleness bounds 0, 1, 2, 4, every "
                           "execution run for real, seeds 0-2")
    grid.add_argument("--anchors", action="store_true",
                      help="issue 46's registered comparison: hash against informed anchors at a 10%% executed share, "
                           "clean, (f) and (c) rows, seeds 40-44, fresh-pair audit")
    grid.add_argument("--anchors-per-cost", action="store_true",
                      help="issue 46's second registered comparison: as --anchors with informed anchors per cost, "
                           "seeds 45-49")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: summarise every finished run of --seeds in --runs (after several partial grids)")
    parser.add_argument("--corruptions", nargs="+", help="kind[:strength] or none (preset)")
    parser.add_argument("--modes", nargs="+", choices=MODES, help="(preset)")
    parser.add_argument("--adaptive", nargs="+", choices=("off", "on"),
                        help="adaptive anchoring settings of the wmrl modes (default: both; corrections: off)")
    parser.add_argument("--advantages", nargs="+", choices=ADVANTAGES, help="(preset)")
    parser.add_argument("--sweep", nargs="+", metavar="NAME=VALUE",
                        help=f"extra wmrl runs (adaptive off) with one setting changed, or several joined by '+' "
                             f"(calibration_stratify=true+fusion_rule=none); NAME in {SWEEPABLE}")
    parser.add_argument("--seeds", nargs="+", type=int, help="(preset; default 0 1 2, confirmation 3-7)")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--warmup-steps", type=int,
                        help="warmup steps (default 2; anchors: the config's default, none under the default rule)")
    parser.add_argument("--fresh-executions", action="store_true", default=None,
                        help="run every execution (no memo across runs): the wall a run takes (async: on)")
    parser.add_argument("--audit-groups", type=int,
                        help="world-model groups a step executed apart to measure the reward's error on fresh pairs "
                             "(default 0; anchors: 1)")
    parser.add_argument("--tasks-per-step", type=int)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, help="Adam learning rate (preset)")
    parser.add_argument("--eval-every", type=int)
    parser.add_argument("--eval-k", type=int)
    parser.add_argument("--eval-tasks", nargs="+", help="held-out task ids (preset)")
    parser.add_argument("--train-tasks", nargs="+", help="train task ids (preset; full: every train task)")
    # About twice the shipped surrogate's squared error on held-out MLE solutions (MAE 0.165):
    # only a world model clearly worse than that fails a step on eta2 alone.
    parser.add_argument("--eta2-bound", type=float, default=0.08, help="adaptive runs: the eta2 bound")
    parser.add_argument("--pair-window", type=int, default=None, help="calibrator forgetting window (default: off)")
    parser.add_argument("--min-anchor-groups", type=int,
                        help="the wmrl modes' fewest anchor groups a step (preset; default 1, corrections 2)")
    parser.add_argument("--workers", type=int, default=None, help="parallel executions (default: one per core)")
    parser.add_argument("--runs", type=Path, help="the run folder, kept as RUNS.jsonl.xz (default: runs/stress/<preset>; "
                                                  "corrections: bench/results/stress_runs/corrections, committed)")
    parser.add_argument("--pool", nargs="+", type=Path, metavar="RUNS",
                        help="with --report: pool the runs of --seeds in these folders, each folder a draw of its "
                             f"own (seed s of the D-th folder is reported as {POOL_SEED_STRIDE}·D + s)")
    parser.add_argument("--memo-dir", type=Path, help="the execution memo and run folders (default: runs/stress/<preset>)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--name", help="results file name (default: stress; corrections, confirmation: stress_<preset>)")
    args = parser.parse_args(argv)
    flags = {"quick": "quick", "corrections": "corrections", "confirmation": "confirmation", "anchors": "anchors",
             "anchors_per_cost": "anchors_per_cost", "async_": "async"}
    args.preset = next((preset for flag, preset in flags.items() if getattr(args, flag)), "full")
    defaults = {"adaptive": ["off", "on"], "min_anchor_groups": 1, "seeds": [0, 1, 2], "sweep": [], "warmup_steps": 2,
                "audit_groups": 0, "fresh_executions": False}
    for name, value in {**defaults, **PRESETS[args.preset]}.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    # Issue 28's and 46's grids keep their runs in the repo.
    committed = args.preset in ("corrections", "confirmation", "anchors", "anchors_per_cost", "async")
    if args.name is None:
        args.name = f"stress_{args.preset}" if committed else "stress"
    if args.memo_dir is None:
        args.memo_dir = ROOT / "runs" / "stress" / args.preset
    if args.runs is None:
        args.runs = ROOT / "bench" / "results" / "stress_runs" / args.preset if committed else args.memo_dir
    if args.pool and not args.report:
        parser.error("--pool reads finished runs: use it with --report")
    args.corruptions = [parse_corruption(c) for c in args.corruptions]
    args.adaptive = [a == "on" for a in args.adaptive]
    for setting in (part for variant in args.sweep for part in variant.split("+")):
        name, sep, value = setting.partition("=")
        if not sep or name not in SWEEPABLE:
            parser.error(f"--sweep takes NAME=VALUE[+NAME=VALUE] with NAME in {SWEEPABLE}, got {setting!r}")
        if name == "c_rule" and value not in ("measured", "inverse_eta2"):
            parser.error(f"c_rule is 'measured' or 'inverse_eta2', got {value!r}")
        if name in SWITCHES and value not in ("true", "false"):
            parser.error(f"{name} is 'true' or 'false', got {value!r}")
        if name == "fusion_rule" and value not in ANCHOR_WEIGHT_RULES:
            parser.error(f"fusion_rule is one of {ANCHOR_WEIGHT_RULES}, got {value!r}")
        if name == "preset" and value not in CONFIG_PRESETS:
            parser.error(f"preset is one of {sorted(CONFIG_PRESETS)}, got {value!r}")
    for variant in [] if args.report else args.sweep:
        if all(names_a_default(setting) for setting in variant.split("+")):
            parser.error(f"--sweep {variant} names only today's defaults: it is the default run, --modes wmrl "
                         "(a command written before that setting became the default ran it beside another default)")
    return args


def finished_runs(runs: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run result of the folder ``runs`` (for --report), in the order of their names."""
    return [as_recorded(checked_run(result, settings, f"{archive_of(runs)}: {name}"))
            for name, result in read_runs(runs).items()]


#: A pooled report's seed for seed s of draw D (1, 2, ... in ``--pool`` order): POOL_SEED_STRIDE * D + s.
POOL_SEED_STRIDE = 1000


def pooled_runs(folders: list[Path], settings: dict[str, Any], seeds: list[int]) -> list[dict[str, Any]]:
    """The finished runs of ``seeds`` in each folder, each folder a draw of its own (another machine,
    another arithmetic, or other seeds): seed s of draw D becomes ``POOL_SEED_STRIDE * D + s``, so
    one seed's runs in two draws are two pairs, never one overwriting the other."""
    return [{**r, "key": {**r["key"], "seed": POOL_SEED_STRIDE * draw + r["key"]["seed"]}}
            for draw, folder in enumerate(folders, start=1)
            for r in finished_runs(folder, settings) if r["key"]["seed"] in seeds]


def run_or_load(key: RunKey, args: argparse.Namespace, settings: dict[str, Any], base, memo: ExecutionMemo,
                eval_tasks) -> dict[str, Any]:
    """A run's result: from the archive of ``--runs`` when it finished before (resuming), else
    trained now and added to it."""
    name = f"{key.name}.json"
    finished = read_runs(args.runs)
    if name in finished:
        return as_recorded(checked_run(finished[name], settings, f"{archive_of(args.runs)}: {name}"))
    print(f"run {key.name}", flush=True)
    result = train_run(key, args, base, memo, eval_tasks)
    add_run(args.runs, name, result)
    return result


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.memo_dir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    eval_tasks = select_tasks(ENV_ID, SUITE, "heldout", args.eval_tasks)
    base = make_world_model("surrogate")
    base.predict(eval_tasks[:1], ["print(0)"])  # loads the encoder now, so no run is charged for it
    settings = {name: getattr(args, name) for name in RUN_SETTINGS}
    if args.report:
        found = (pooled_runs(args.pool, settings, args.seeds) if args.pool else
                 [r for r in finished_runs(args.runs, settings) if r["key"]["seed"] in args.seeds])
        results = [r for r in found if r["key"]["mode"] in args.modes]
        args.corruptions = list(dict.fromkeys((r["key"]["corruption"], r["key"]["strength"]) for r in results
                                              if r["key"]["corruption"] != "any"))
        args.advantages = list(dict.fromkeys(r["key"]["advantage"] for r in results))
    else:
        memo = ExecutionMemo(args.memo_dir / "memo.jsonl")
        results = [run_or_load(key, args, settings, base, memo, eval_tasks) for key in run_keys(args)]
    rows = summarise(results, args)
    meta = {**provenance(), "n_eval_tasks": len(eval_tasks), "memo": MEMO_NOTE,
            "heldout_se": "SE over seeds (over tasks when one seed)",
            "real_runs": "shared by every corruption (real execution reads no world model)",
            "config": dict(vars(args))}  # its paths are written as strings (json default=str)
    md = "### WMRL when the world model is wrong (stress protocol)\n\n" + markdown(rows, meta)
    if args.preset in INFORMED_VARIANT:
        meta["acceptance"], table = anchors_acceptance(rows, INFORMED_VARIANT[args.preset])
        md += f"\n**Acceptance (issue 46, as registered):**\n\n{table}\n"
    elif len(args.seeds) >= ACCEPTANCE_SEEDS:
        meta["acceptance"], tables = acceptance_sections(rows, WMRLConfig().calibration.stratum_z)
        md += tables
    # One line: the report is the markdown, and a grid of rows with curves runs long when indented.
    (args.out / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, default=str))
    (args.out / f"{args.name}.md").write_text(md)
    plots = plot(rows, args.out, args.name)
    print(md)
    print("wrote", args.out / f"{args.name}.json", args.out / f"{args.name}.md", *plots)


if __name__ == "__main__":
    main()
