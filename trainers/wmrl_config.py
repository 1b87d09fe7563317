"""Configuration of :class:`trainers.wmrl.WMRLTrainer`, in groups.

``WMRLConfig`` holds the run-level settings and five groups, each a typed dataclass whose
fields carry their help text and are validated in ``__post_init__``:

* ``family`` (:class:`FamilyConfig`): the env family, its tasks, policy and world model;
* ``schedule`` (:class:`ScheduleConfig`): batch shape, anchor share and warmup;
* ``loss`` (:class:`LossConfig`): optimiser and clipped-surrogate settings;
* ``fusion`` (:class:`~wmrl_envs.scoring.FusionConfig`): the anchor weight's ``w_max`` and ``c``;
* ``calibration`` (:class:`~wmrl_envs.calibration.CalibratorConfig`): the calibrator.

:meth:`WMRLConfig.from_flat` builds a config from flat keyword names (the command line's
``--anchor-fraction``, ``--fusion-c``, ``--calibration-min-pairs-global``, ...), see
:data:`FLAT_PREFIXES`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from trainers.evaluate import DEFAULT_MAX_INFRA_SHARE, check_max_infra_share
from trainers.families import get_family
from wmrl_envs.calibration import CalibratorConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.workers import DEFAULT_EPISODE_TIMEOUT_S
from wmrl_envs.sandbox import DEFAULT_EXECUTOR, EXECUTOR_HELP
from wmrl_envs.scoring import FusionConfig
from wmrl_envs.scoring.schedule import (
    anchor_steps,
    check_adaptation,
    check_final_anchors,
    check_min_anchor_groups,
)
from wmrl_envs.world_models.base import DEFAULT_WORLD_MODEL
from wmrl_envs.world_models.sample_run import RUN_RULES

#: World models built on the surrogate, which take its artefact and its proofs' switch.
SURROGATE_BASED = ("surrogate", "sample_run")
MODES = ("real", "world_model", "wmrl", "wmrl-no-debias", "wmrl-no-denoise")
ADVANTAGES = ("std", "mean")
ANCHOR_CHOICES = ("random", "informed", "informed_per_cost")
#: The warmup's steps by default (and, with ``warmup_steps=None``, where the anchor-weight rule
#: measures ``c`` in it): enough anchor groups for per-sample gradient variances of both rewards
#: at the default batch shape, and pairs of every family before the policy can exploit one.
MEASURING_WARMUP_STEPS = 2
#: How a simulated family's world-model episodes are scored: cut at ``wm_horizon`` and predicted
#: (``truncate``), or run to the end with a potential-shaped dense reward (``shaped``).
WM_REWARDS = ("truncate", "shaped")


@dataclass
class FamilyConfig:
    """Which environment family is trained, on what, with which policy and world model."""

    env_id: str = field(default="wmrl/MLEDojo-v0", metadata={"help": "environment family to train on"})
    policy: str = field(default="grammar", metadata={
        "help": "policy family: 'grammar' (CPU default), 'grammar-buggy' (the grammar policy that may inject "
                "an agent's bug) or 'lm' for code envs, 'vla' for LIBERO-Long"})
    policy_path: str | None = field(default=None, metadata={
        "help": "starting weights: a local transformers checkpoint ('lm', required) or a MiniVLA "
                "policy.pt, e.g. from behaviour cloning ('vla'; default: a fresh policy)"})
    split: str = field(default="train", metadata={"help": "task split sampled for training"})
    task_ids: tuple[str, ...] | None = field(default=None, metadata={"help": "restrict training to these tasks"})
    world_model: str = field(default=DEFAULT_WORLD_MODEL, metadata={"help": "world model name (code envs)"})
    world_model_path: str | None = field(default=None, metadata={
        "help": "surrogate artefact to load (default: the shipped one), e.g. an older one to compare with"})
    sample_runs: str = field(default="always", metadata={
        "help": "world_model 'sample_run': which scripts run on a sample of their task: 'always', 'uncertain' "
                "(where the surrogate is unsure), 'cost' (on tasks whose anchors show a sample run costs at most a "
                "quarter of a full one) or 'never' (SampleRunConfig.run)"})
    prove: bool = field(default=True, metadata={
        "help": "code envs: settle scripts the static prover proves to fail before the world model and the "
                "sandbox; --no-prove: every script is predicted or executed (the behaviour before proofs)"})
    wm_horizon: int = field(default=260, metadata={
        "help": "LIBERO-Long: steps a world-model episode runs before the success model scores it"})
    wm_reward: str = field(default="truncate", metadata={
        "help": "LIBERO-Long: how world-model groups are rewarded. 'truncate': their episodes stop at --wm-horizon "
                "and the calibrated success model's P(success) is the reward (simulator steps saved); 'shaped': every "
                "episode runs to its end, and the reward is the simulator's success plus the rise of the calibrated "
                "P(success | states so far), a potential-based shaping with gamma 1 (wmrl_envs/scoring/shaping.py)"})
    executor: str = field(default=DEFAULT_EXECUTOR, metadata={"help": EXECUTOR_HELP})
    workers: int | None = field(default=None, metadata={"help": "parallel executions (default: cores)"})
    sim_workers: int = field(default=1, metadata={
        "help": "LIBERO-Long: simulation workers, each with its own simulator, that run an update's episodes; 1 "
                "runs them in this process. More are local processes, or Ray actors with --executor ray (on the "
                "cluster of ray.init() or RAY_ADDRESS). Episodes are seeded per (seed, group, member): any number "
                "of workers gives the same ones"})
    sim_timeout_s: float = field(default=DEFAULT_EPISODE_TIMEOUT_S, metadata={
        "help": "LIBERO-Long: seconds an episode may run on a simulation worker before the worker is stopped and "
                "the episode counts as an infrastructure failure (neither success nor failure)"})

    def __post_init__(self) -> None:
        if self.task_ids is not None:
            self.task_ids = tuple(str(t) for t in self.task_ids)
        profile = get_family(self.env_id)
        if self.policy not in profile.policies:
            raise ConfigError(f"policy {self.policy!r} cannot act in {self.env_id}; use one of {profile.policies}")
        if self.policy == "lm" and not self.policy_path:
            raise ConfigError("the lm policy needs --policy-path pointing at a local transformers checkpoint")
        if self.world_model_path is not None and self.world_model not in SURROGATE_BASED:
            raise ConfigError(f"world_model_path is a surrogate artefact; world model {self.world_model!r} takes none")
        if self.sample_runs not in RUN_RULES:
            raise ConfigError(f"sample_runs must be one of {RUN_RULES}, got {self.sample_runs!r}")
        if self.sample_runs != "always" and self.world_model != "sample_run":
            raise ConfigError(f"sample_runs applies to world model 'sample_run', not {self.world_model!r}")
        if self.wm_horizon < 1:
            raise ConfigError(f"wm_horizon must be >= 1, got {self.wm_horizon}")
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"workers must be >= 1, got {self.workers}")
        if self.wm_reward not in WM_REWARDS:
            raise ConfigError(f"wm_reward must be one of {WM_REWARDS}, got {self.wm_reward!r}")
        if self.sim_workers < 1:
            raise ConfigError(f"sim_workers must be >= 1, got {self.sim_workers}")
        if not self.sim_timeout_s > 0:
            raise ConfigError(f"sim_timeout_s must be > 0, got {self.sim_timeout_s}")
        if not profile.simulated and (self.sim_workers != 1 or self.wm_reward != "truncate"
                                      or self.sim_timeout_s != DEFAULT_EPISODE_TIMEOUT_S):
            raise ConfigError(f"{self.env_id} runs no simulator: sim_workers, sim_timeout_s and wm_reward apply to simulated "
                              "families (LIBERO-Long)")

    def world_model_kwargs(self) -> dict[str, Any]:
        """Options of ``make_world_model(world_model, ...)``: the surrogate's artefact and whether it
        proves, so that ``prove=False`` turns off every proof (the scorer's and the world model's);
        the multi-fidelity model gets them for its surrogate, and runs its samples on ``executor``."""
        if self.world_model not in SURROGATE_BASED:
            return {}
        surrogate = {"prove": self.prove, **({"path": self.world_model_path} if self.world_model_path else {})}
        if self.world_model == "sample_run":
            return {"base_kwargs": surrogate, "executor": self.executor, "config": {"run": self.sample_runs}}
        return surrogate


@dataclass
class ScheduleConfig:
    """How many groups a step has, how large they are, and how many are anchors.

    Adaptive anchoring (off by default; the rule is ``StepSchedule.adapt`` in
    :mod:`wmrl_envs.scoring.schedule`): after a step whose audit fails, or whose η̂² is above
    ``eta2_bound``, the anchor share doubles, up to ``max_anchor_fraction``; once three steps in
    a row passed, each passing step halves it, back down to ``anchor_fraction``. The trainer
    logs the share of the next step as ``anchors/fraction`` and the failed checks as
    ``anchors/reason`` (a bitmask: 1 the audit, 2 the η̂² bound, 0 none; logged with adaptation
    off too).
    """

    tasks_per_step: int = field(default=8, metadata={"help": "B: groups (tasks) per step"})
    group_size: int = field(default=4, metadata={"help": "G: rollouts per group"})
    anchor_fraction: float = field(default=0.1, metadata={"help": "share of groups executed as anchors"})
    warmup_steps: int | None = field(default=MEASURING_WARMUP_STEPS, metadata={
        "help": "first steps, with warmup_anchor_fraction anchors: they seed the calibrator before the policy can "
                "exploit a family the world model over-scores, and measure the fusion constant c of the eta2 and "
                "sampling rules; None: 2 where the rule measures c, else none (at a 10%% share without it, the "
                "registered stress screen collapsed under a family bias: bench/results/stress_anchors.md)"})
    warmup_anchor_fraction: float = field(default=0.5, metadata={"help": "anchor share during warmup"})
    adaptive_anchors: bool = field(default=False, metadata={
        "help": "adaptive anchoring: double the anchor share after a step whose audit fails (or whose eta2 "
                "exceeds --eta2-bound), halve it back towards --anchor-fraction once three in a row passed"})
    eta2_bound: float | None = field(default=None, metadata={
        "help": "adaptive anchoring: a step whose calibrator residual eta2 is above this fails too; "
                "default: only the audit fails a step"})
    max_anchor_fraction: float = field(default=1.0, metadata={
        "help": "adaptive anchoring: the highest anchor share (1.0: every group executed)"})
    min_anchor_groups: int = field(default=1, metadata={
        "help": "the fewest anchor groups of a step; 0: a step's count rounds down or up so that the run "
                "executes exactly anchor_fraction of its groups"})
    anchor_choice: str = field(default="random", metadata={
        "help": "which groups are anchors: 'random' (seeded by the step), 'informed' (drawn, as many, with "
                "probabilities rising with the world model's predictive variance; pairs weighted by their inverse) "
                "or 'informed_per_cost' (as informed, the variance weighed against each group's predicted "
                "execution cost: sqrt(variance / cost))"})
    inclusion_floor_share: float = field(default=0.25, metadata={
        "help": "informed anchors: every group's inclusion probability is at least this share of the mean"})
    max_staleness: int = field(default=0, metadata={
        "help": "asynchronous anchors: a step submits its anchor groups' runs and goes on; a group trains at "
                "exactly this many steps later, when it lands (that step waits for its runs if need be, so a run "
                "repeats whatever the machine's speed), and its pairs calibrate then (0: every step waits for "
                "its own anchors)"})
    final_anchors: str = field(default="land", metadata={
        "help": "asynchronous anchors at the run's end: 'land' (anchors of the last max_staleness steps "
                "land at the last step, which waits for their runs, and train in its update) or 'skip' (those "
                "steps choose no anchor groups: their real scores could reach only the last update, so they are "
                "not executed and the last step waits only for anchors max_staleness steps old; at max_staleness "
                "0 there is no step to skip). The main job (scripts/main.sh) runs at 8 with 'skip'"})
    anchor_timeout_s: float | None = field(default=None, metadata={
        "help": "asynchronous anchors: seconds after its submission at which an anchor's run that has not "
                "returned is an infrastructure failure (default: the sandbox's own limits end it)"})

    def __post_init__(self) -> None:
        if self.tasks_per_step < 1:
            raise ConfigError(f"tasks_per_step must be >= 1, got {self.tasks_per_step}")
        if self.group_size < 2:
            raise ConfigError("group_size must be >= 2: group-relative advantages need a baseline")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be None or >= 0, got {self.warmup_steps}")
        for name in ("anchor_fraction", "warmup_anchor_fraction"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        check_adaptation(self.anchor_fraction, self.eta2_bound, self.max_anchor_fraction)
        check_min_anchor_groups(self.min_anchor_groups, self.tasks_per_step)
        if self.anchor_choice not in ANCHOR_CHOICES:
            raise ConfigError(f"anchor_choice must be one of {ANCHOR_CHOICES}, got {self.anchor_choice!r}")
        if not 0.0 < self.inclusion_floor_share <= 1.0:
            raise ConfigError(f"inclusion_floor_share must be in (0, 1], got {self.inclusion_floor_share}")
        if isinstance(self.max_staleness, bool) or not isinstance(self.max_staleness, int) or self.max_staleness < 0:
            raise ConfigError(f"max_staleness must be an int >= 0, got {self.max_staleness!r}")
        check_final_anchors(self.final_anchors)
        if self.anchor_timeout_s is not None and not self.anchor_timeout_s > 0:
            raise ConfigError(f"anchor_timeout_s must be None or > 0, got {self.anchor_timeout_s}")


@dataclass
class LossConfig:
    """The optimiser and the clipped surrogate loss (see :mod:`trainers.grpo`)."""

    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping norm"})
    update_epochs: int = field(default=1, metadata={"help": "policy updates per batch (PPO epochs)"})
    epsilon: float = field(default=0.2, metadata={"help": "lower clip range of the surrogate"})
    epsilon_high: float | None = field(default=None, metadata={"help": "upper clip range (default: epsilon)"})
    kl_coef: float = field(default=0.0, metadata={"help": "KL penalty to the initial policy (k3 estimator)"})
    advantage: str = field(default="std", metadata={"help": "'std' (GRPO) or 'mean' (Dr.GRPO)"})
    aggregation: str = field(default="sequence", metadata={"help": "loss aggregation (see trainers.grpo)"})

    def __post_init__(self) -> None:
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ConfigError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.update_epochs < 1:
            raise ConfigError(f"update_epochs must be >= 1, got {self.update_epochs}")
        if not self.max_grad_norm > 0:
            raise ConfigError(f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        if self.advantage not in ADVANTAGES:
            raise ConfigError(f"advantage must be one of {ADVANTAGES}, got {self.advantage!r}")
        if self.kl_coef < 0:
            raise ConfigError(f"kl_coef must be >= 0, got {self.kl_coef}")


def _calibration_default() -> CalibratorConfig:
    # Training refits often from few pairs: use the map from 12 pairs on, not the env's 20.
    return CalibratorConfig(min_pairs_global=12)


@dataclass
class WMRLConfig:
    """Every knob of a WMRL (or baseline) training run.

    Modes:
        ``real``: GRPO with every group executed (the expensive baseline).
        ``world_model``: every group scored by the raw world model; no anchors, no correction.
        ``wmrl``: anchors + online debiasing (calibration) + inverse-variance denoising.
        ``wmrl-no-debias``: as ``wmrl`` but world-model samples use raw scores.
        ``wmrl-no-denoise``: as ``wmrl`` but anchor samples get weight 1.
    """

    mode: str = field(default="wmrl", metadata={"help": f"one of {MODES}"})
    steps: int = field(default=30, metadata={"help": "optimiser steps (one batch of groups each)"})
    seed: int = field(default=0, metadata={
        "help": "seeds policy init, sampling and the anchor schedule"})
    output_dir: str = field(default="runs/wmrl", metadata={"help": "run folder (metrics, checkpoints, plots)"})
    checkpoint_every: int = field(default=5, metadata={"help": "steps between checkpoints (0: only at the end)"})
    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard events when available"})
    max_infra_share: float = field(default=DEFAULT_MAX_INFRA_SHARE, metadata={
        "help": "the largest share of executions that may fail for infrastructure reasons (the sandbox could not "
                "start): over the last --infra-window steps (more stops training with an error, after saving a "
                "resumable checkpoint), and per task in the held-out evaluation (more stops it instead of reporting "
                "a score); in [0, 1)"})
    infra_window: int = field(default=5, metadata={
        "help": "training steps whose executions --max-infra-share is checked over, counted from the start or the "
                "resume; a shorter run is checked over all its steps at its end"})
    family: FamilyConfig = field(default_factory=FamilyConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    calibration: CalibratorConfig = field(default_factory=_calibration_default)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.steps < 1:
            raise ConfigError(f"steps must be >= 1, got {self.steps}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        check_max_infra_share(self.max_infra_share)
        if self.infra_window < 1:
            raise ConfigError(f"infra_window must be >= 1, got {self.infra_window}")
        if self.uses_anchors and self.warmup_steps >= self.steps:
            raise ConfigError(f"warmup_steps must be in [0, steps), got {self.warmup_steps}")
        if self.measures_fusion_constant and self.warmup_steps == 0:
            raise ConfigError(f"the {self.fusion.rule!r} anchor-weight rule measures c in warmup: set "
                              "warmup_steps >= 1 or give fusion_c")
        if self.schedule.adaptive_anchors and not self.uses_anchors:
            raise ConfigError(f"adaptive anchoring needs a wmrl mode; mode {self.mode!r} has no anchors")
        if self.schedule.anchor_choice != "random" and get_family(self.family.env_id).make_scorer is None:
            raise ConfigError(f"informed anchors are chosen from a batch scorer's predictions; {self.family.env_id}'s "
                              "episodes score themselves one at a time: use anchor_choice 'random'")
        if self.schedule.max_staleness and not self.uses_anchors:
            raise ConfigError(f"max_staleness applies to anchor groups; mode {self.mode!r} has none")
        anchor_steps(self.steps, self.schedule.max_staleness, self.schedule.final_anchors)
        if self.schedule.max_staleness and get_family(self.family.env_id).make_scorer is None:
            raise ConfigError(f"asynchronous anchors submit a batch scorer's runs; {self.family.env_id}'s episodes "
                              "score themselves one at a time: use max_staleness 0")
        if self.family.wm_reward == "shaped" and self.mode == "real":
            raise ConfigError("wm_reward 'shaped' shapes the rewards of world-model groups, and mode 'real' has none: "
                              "use mode world_model or a wmrl mode")

    @property
    def uses_anchors(self) -> bool:
        return self.mode.startswith("wmrl")

    @property
    def warmup_steps(self) -> int:
        """The warmup's steps: as configured, or with None :data:`MEASURING_WARMUP_STEPS` where the
        anchor-weight rule measures ``c`` in it and none otherwise."""
        if self.schedule.warmup_steps is not None:
            return self.schedule.warmup_steps
        return MEASURING_WARMUP_STEPS if self.measures_fusion_constant else 0

    @property
    def measures_fusion_constant(self) -> bool:
        """Whether warmup measures ``c`` from gradients (the ``eta2`` and ``sampling`` rules, no ``c`` given)."""
        return (self.uses_anchors and self.denoise and self.fusion.c is None
                and self.fusion.rule in ("eta2", "sampling"))

    @property
    def debias(self) -> bool:
        return self.mode in ("wmrl", "wmrl-no-denoise")

    @property
    def denoise(self) -> bool:
        return self.mode in ("wmrl", "wmrl-no-debias")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WMRLConfig:
        """The inverse of :meth:`to_dict`; unknown keys are an error."""
        data = dict(data)
        groups = {name: data.pop(name) for name in GROUPS if name in data}
        _check_known(cls, data, "config")
        built = {}
        for name, values in groups.items():
            kind = GROUPS[name]
            if name == "calibration":
                built[name] = CalibratorConfig.from_dict(values)
            else:
                _check_known(kind, values, name)
                built[name] = kind(**values)
        return cls(**data, **built)

    @classmethod
    def from_flat(cls, **values: Any) -> WMRLConfig:
        """A config from flat names: run-level fields, then each group's fields under its prefix
        in :data:`FLAT_PREFIXES` (``anchor_fraction``, ``learning_rate``, ``fusion_w_max``,
        ``calibration_min_pairs_global``, ...)."""
        top, grouped = {}, {name: {} for name in GROUPS}
        for key, value in values.items():
            group = flat_group(key)
            if group is None:
                top[key] = value
            else:
                grouped[group[0]][group[1]] = value
        _check_known(cls, top, "config")
        built = {name: dataclasses.replace(_default(name), **kw) for name, kw in grouped.items()}
        return cls(**top, **built)


#: Named sets of flat settings (``wmrl train --preset NAME``; explicit flags still win).
#: ``paper``: the reference release's corrections (``ml_research/configs/wmrl_4b.yaml`` and
#: ``wmrl/denoise.py`` of ``xiyuanyang45/WMRL``): 8 groups of 8 per step, 2 of them anchors; the
#: calibrator stays at the identity until 200 pairs and reads the last 5,000; the anchor weight
#: follows the within-group disagreement (EMA half-life 64 anchor groups, ``c`` fixed after 32
#: so that the weight is 2, cap 4), so no gradient warmup. What it cannot reproduce is in
#: :data:`PRESET_DEVIATIONS`.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"tasks_per_step": 8, "group_size": 8, "anchor_fraction": 0.25, "min_anchor_groups": 2,
              "warmup_steps": 0, "calibration_min_pairs_global": 200, "calibration_pair_window": 5000,
              "calibration_global_form": "isotonic",
              "fusion_rule": "paper", "fusion_w_max": 4.0, "fusion_target_weight": 2.0,
              "fusion_half_life": 64.0, "fusion_calibrate_after": 32},
}
#: What a preset leaves different from its source, and why.
PRESET_DEVIATIONS: dict[str, tuple[str, ...]] = {
    "paper": (
        "the calibrator refits on every anchor batch, not every 64 pairs, and fits isotonic regression on "
        "the pairs themselves (centred), not on 10 bins",
        "pairs older than the last 5,000 stay in the state (a reload applies the same window) instead of "
        "being dropped",
        "one turn per episode (the release's agent takes up to 4), synchronous rollouts (no staleness)",
        "the optimiser (learning rate 1e-6, KL 0.04, entropy 0.002 for a 4B model) is not ported: the "
        "policy here is the grammar policy or a small model",
        "the world model is this suite's surrogate, not the agent's own 4B backbone",
    ),
}

#: The groups of :class:`WMRLConfig` and their types.
GROUPS: dict[str, type] = {"family": FamilyConfig, "schedule": ScheduleConfig, "loss": LossConfig,
                           "fusion": FusionConfig, "calibration": CalibratorConfig}
#: Prefix of each group's flat names (command-line flags are these with ``-`` for ``_``).
FLAT_PREFIXES = {"family": "", "schedule": "", "loss": "", "fusion": "fusion_", "calibration": "calibration_"}
#: Calibrator fields that are not flags: the score range is the reward's.
CALIBRATION_FIXED = ("score_range",)


def _default(group: str):
    return WMRLConfig.__dataclass_fields__[group].default_factory()


def flat_fields() -> dict[str, tuple[str, dataclasses.Field]]:
    """Every flat name: ``{flat_name: (group, field)}``."""
    out = {}
    for group, kind in GROUPS.items():
        for f in fields(kind):
            if group == "calibration" and f.name in CALIBRATION_FIXED:
                continue
            out[FLAT_PREFIXES[group] + f.name] = (group, f)
    return out


def flat_group(name: str) -> tuple[str, str] | None:
    """``(group, field)`` of a flat name, or None for a run-level field."""
    hit = flat_fields().get(name)
    return None if hit is None else (hit[0], hit[1].name)


def _check_known(kind: type, data: dict[str, Any], where: str) -> None:
    unknown = set(data) - {f.name for f in fields(kind)}
    if unknown:
        raise ConfigError(f"unknown {where} field(s) {sorted(unknown)}")
