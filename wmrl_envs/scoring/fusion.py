"""The anchor weight: one home for every rule, called by the envs, the trainer and the adapters.

An anchor sample's advantage comes from its real reward; a world-model sample's from the
calibrated score, whose error inflates that stream's gradient variance. Inverse-variance
weighting gives each anchor sample a weight ``w_A >= 1`` relative to a world-model sample's 1,
capped at ``w_max``; weights are then rescaled to mean 1 over a batch (:func:`sample_weights`),
so the step size does not depend on the anchor share. :attr:`FusionConfig.rule` picks how
``w_A`` is set (``trainers/fusion.py`` derives each). The default is ``none``: on the stress
grid of issue 28 (``bench/results/stress_corrections.md``) every rule that up-weights anchors
ended lower, because with a few anchor groups a step the anchor stream's own sampling variance
outweighs the world model's error; the rule was chosen by a pre-registered criterion and
confirmed on five further seeds (``bench/results/stress_confirmation.md``).

``eta2``
    ``w_A = clip(1 + c·η̂², 1, w_max)`` with ``η̂²`` the calibrator's cross-fitted residual and
    ``c`` measured in the trainer's warmup from per-sample gradient variances of the two
    streams; without a measurement ``c = 1/η̂²`` at the first residual (weight 2 then).
``sampling``
    The same form, with ``c`` measured so that the weight is the inverse-variance ratio of the
    two streams' *means*: groups, not samples, are the independent units, so the anchor
    stream's own sampling variance (which tasks, which rollouts) enters. Its weight is
    ``1 + V_e / (G·V_b + V_w)`` at warmup: error variance over G times the between-group plus
    the within-group variance, never above ``eta2``'s ``1 + V_e / (V_b + V_w)``.
``paper``
    The reference release's: ``s²``, the within-group centred disagreement between calibrated
    and real scores normalised by the group's real-score variance (:func:`group_disagreement`),
    is tracked by an EMA over anchor groups (half-life ``half_life``); after
    ``calibrate_after`` anchor groups ``c`` is fixed so that the weight is ``target_weight``,
    then ``w_A = clip(1 + c·s²_EMA, 1, w_max)`` (:class:`DisagreementTracker`).
``none`` (the default)
    ``w_A = 1``: plain averaging. Debiasing still runs: anchors still correct the world model's
    scores through the calibrator, they only do not count for more than a world-model sample.

What an anchor sample's reward *is* is a second, separate setting:
:attr:`FusionConfig.anchor_real_share`. The paper's anchor reward is the real score (share 1, the
default). A share below 1 blends in the sample's calibrated world-model score (computed before
the anchor's own pair reaches the calibrator), and 0 makes anchors pure calibration data: every
group then trains on calibrated scores, and real execution reaches the gradient only through the
map. It is for a world model that is a better training signal than one execution. On the stress
grid it did not pay (``bench/results/stress_corrections_preregistration.md``, sixth candidate):
what cost score there was the calibration map's curvature, not the real reward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wmrl_envs.calibration.bound import smallest_sample
from wmrl_envs.errors import ConfigError

#: The anchor-weight rules (module docstring).
ANCHOR_WEIGHT_RULES = ("eta2", "sampling", "paper", "none")
# Below this real-score variance a group carries no ranking to disagree with.
_FLAT_GROUP_VAR = 1e-9


@dataclass(frozen=True)
class FusionConfig:
    """Settings of the anchor weight.

    Attributes:
        rule: How ``w_A`` is set, one of :data:`ANCHOR_WEIGHT_RULES` (module docstring).
        w_max: Upper clip of ``w_A``; it bounds the harm of an overestimated error.
        c: Slope of ``w_A`` (``eta2`` and ``sampling``: in the calibrator residual; ``paper``:
            in the tracked disagreement). ``None``: measured (``eta2``/``sampling``: in the
            trainer's warmup, weight 1 until then, or ``1/η̂²`` at the first residual without
            a trainer; ``paper``: fixed after ``calibrate_after`` anchor groups).
        half_life: ``paper``: half-life, in anchor groups, of the disagreement's EMA.
        calibrate_after: ``paper``: anchor groups (with differing real scores) observed
            before ``c`` is fixed; the weight is 1 until then.
        target_weight: ``paper``: the weight at the moment ``c`` is fixed.
        anchor_real_share: An anchor sample's reward is ``share·real + (1 - share)·calibrated``
            (module docstring). 1 (the default, the paper's): the real score alone. An anchor
            without a calibrated score (its world model failed) keeps the real score.
        error_bound_level: The share of world-model samples whose reward the published bound
            on ``|reward - real|`` covers (:mod:`wmrl_envs.calibration.bound`).
        error_bound_window: The most recent anchor residuals the bound reads: a shorter window
            follows a drifting world model sooner and is looser.
    """

    rule: str = field(default="none", metadata={"help": f"anchor-weight rule, one of {ANCHOR_WEIGHT_RULES}"})
    w_max: float = field(default=4.0, metadata={"help": "upper clip of the anchor weight w_A"})
    c: float | None = field(default=None, metadata={
        "help": "slope of w_A; default: measured (warmup for eta2/sampling, or 1/eta2 at the first residual "
                "without a trainer; after calibrate_after anchor groups for paper)"})
    half_life: float = field(default=64.0, metadata={"help": "paper rule: EMA half-life in anchor groups"})
    calibrate_after: int = field(default=32, metadata={"help": "paper rule: anchor groups before c is fixed"})
    target_weight: float = field(default=2.0, metadata={"help": "paper rule: w_A when c is fixed"})
    anchor_real_share: float = field(default=1.0, metadata={
        "help": "an anchor sample's reward: this share of its real score, the rest its calibrated world-model score"})
    error_bound_level: float = field(default=0.9, metadata={
        "help": "share of world-model samples whose |reward - real| the published bound covers, in (0, 1)"})
    error_bound_window: int = field(default=256, metadata={
        "help": "the most recent anchor residuals the reward-error bound reads"})

    def __post_init__(self) -> None:
        if self.rule not in ANCHOR_WEIGHT_RULES:
            raise ConfigError(f"rule must be one of {ANCHOR_WEIGHT_RULES}, got {self.rule!r}")
        if not math.isfinite(self.w_max) or self.w_max < 1:
            raise ConfigError(f"w_max must be a finite number >= 1, got {self.w_max}")
        if self.c is not None and (not math.isfinite(self.c) or self.c < 0):
            raise ConfigError(f"c must be None or a finite number >= 0, got {self.c}")
        if not math.isfinite(self.half_life) or self.half_life < 1:
            raise ConfigError(f"half_life must be a finite number >= 1, got {self.half_life}")
        if isinstance(self.calibrate_after, bool) or not isinstance(self.calibrate_after, int) \
                or self.calibrate_after < 1:
            raise ConfigError(f"calibrate_after must be an int >= 1, got {self.calibrate_after!r}")
        if not math.isfinite(self.target_weight) or self.target_weight < 1:
            raise ConfigError(f"target_weight must be a finite number >= 1, got {self.target_weight}")
        if isinstance(self.anchor_real_share, bool) or not isinstance(self.anchor_real_share, (int, float)) \
                or not 0.0 <= self.anchor_real_share <= 1.0:
            raise ConfigError(f"anchor_real_share must be a number in [0, 1], got {self.anchor_real_share!r}")
        if isinstance(self.error_bound_level, bool) or not isinstance(self.error_bound_level, (int, float)) \
                or not 0.0 < self.error_bound_level < 1.0:
            raise ConfigError(f"error_bound_level must be a number in (0, 1), got {self.error_bound_level!r}")
        if isinstance(self.error_bound_window, bool) or not isinstance(self.error_bound_window, int) \
                or self.error_bound_window < smallest_sample(self.error_bound_level):
            raise ConfigError(f"error_bound_window must be an int of at least {smallest_sample(self.error_bound_level)} "
                              f"(the fewest residuals that give a finite bound at level {self.error_bound_level}), "
                              f"got {self.error_bound_window!r}")
        if self.rule == "none" and self.c is not None:
            # A slope the rule never reads would be silently ignored; say so instead.
            raise ConfigError(f"c={self.c} has no effect under the 'none' rule (w_A = 1): pick rule 'eta2', "
                              "'sampling' or 'paper', or leave c unset")


def anchor_weight(eta2: float, c: float, w_max: float) -> float:
    """Anchor sample weight ``w_A = clip(1 + c·eta2, 1, w_max)`` relative to world-model samples."""
    if not math.isfinite(eta2) or eta2 < 0:
        raise ValueError(f"eta2 must be finite and >= 0, got {eta2}")
    if not math.isfinite(c) or c < 0:
        raise ValueError(f"c must be finite and >= 0, got {c}")
    if not math.isfinite(w_max) or w_max < 1:
        raise ValueError(f"w_max must be finite and >= 1, got {w_max}")
    return min(max(1.0 + c * eta2, 1.0), w_max)


def anchor_reward(real: float, calibrated: float | None, real_share: float) -> float:
    """An anchor sample's reward: ``real_share·real + (1 - real_share)·calibrated``
    (:attr:`FusionConfig.anchor_real_share`); the real score alone without a calibrated one."""
    if calibrated is None or real_share == 1.0:
        return float(real)
    return float(real_share * real + (1.0 - real_share) * calibrated)


def sample_weights(is_anchor: np.ndarray, w_anchor: float) -> np.ndarray:
    """Per-sample weights: ``w_anchor`` for anchors, 1 for world-model samples, rescaled to mean 1.

    The rescaling (divide by the total weight, multiply by N) keeps the anchor/world-model
    ratio and makes the weights sum to N: an unweighted mean is recovered exactly when every
    sample is from one stream, and a loss normaliser that counts samples (or their tokens)
    sees the same total as without weights.
    """
    is_anchor = np.asarray(is_anchor, dtype=bool)
    if is_anchor.ndim != 1 or is_anchor.size == 0:
        raise ValueError(f"is_anchor must be a non-empty 1-D array, got shape {is_anchor.shape}")
    if not math.isfinite(w_anchor) or w_anchor <= 0:
        raise ValueError(f"w_anchor must be finite and > 0, got {w_anchor}")
    raw = np.where(is_anchor, float(w_anchor), 1.0)
    return raw * (raw.size / raw.sum())


def group_disagreement(calibrated: np.ndarray, real: np.ndarray) -> float | None:
    """The ``paper`` rule's ``s²`` of one anchor group: the mean squared difference between the
    group-centred calibrated and real scores, over the real scores' variance.

    Centred because GRPO sees only within-group differences; normalised so that groups of any
    difficulty compare. ``None`` for a group whose real scores are all equal (it has no ranking
    to disagree with, and counting it as 0 would drag the estimate down).
    """
    calibrated, real = np.asarray(calibrated, dtype=float), np.asarray(real, dtype=float)
    if calibrated.shape != real.shape or calibrated.ndim != 1:
        raise ValueError(f"need two 1-D arrays of one shape, got {calibrated.shape} and {real.shape}")
    keep = np.isfinite(calibrated) & np.isfinite(real)
    calibrated, real = calibrated[keep], real[keep]
    if real.size < 2 or real.var() < _FLAT_GROUP_VAR:
        return None
    gap = (calibrated - calibrated.mean()) - (real - real.mean())
    return float(np.mean(gap**2) / real.var())


@dataclass
class DisagreementTracker:
    """The ``paper`` rule's state: an EMA of :func:`group_disagreement` over anchor groups and
    ``c``, fixed once after ``calibrate_after`` groups so that the weight is ``target_weight``.

    Fixing ``c`` makes the weight follow how the disagreement *moves* (doubling it from the
    calibration moment doubles ``w_A - 1``) rather than its absolute scale.
    """

    config: FusionConfig
    ema: float | None = None
    groups: int = 0
    c: float | None = None

    def __post_init__(self) -> None:
        if self.c is None:
            self.c = self.config.c  # a configured slope applies from the first group

    def observe(self, calibrated: np.ndarray, real: np.ndarray) -> None:
        """Fold one anchor group in (a group with equal real scores is skipped)."""
        s2 = group_disagreement(calibrated, real)
        if s2 is None:
            return
        alpha = 1.0 - 0.5 ** (1.0 / self.config.half_life)
        self.ema = s2 if self.ema is None else (1.0 - alpha) * self.ema + alpha * s2
        self.groups += 1
        if self.c is None and self.groups >= self.config.calibrate_after and self.ema > 0:
            self.c = (self.config.target_weight - 1.0) / self.ema

    def weight(self) -> float:
        """``clip(1 + c·s²_EMA, 1, w_max)``; exactly 1 before ``c`` is fixed."""
        if self.c is None or self.ema is None:
            return 1.0
        return anchor_weight(self.ema, self.c, self.config.w_max)

    def state_dict(self) -> dict[str, float | int | None]:
        return {"ema": self.ema, "groups": self.groups, "c": self.c}

    def load_state_dict(self, state: dict[str, float | int | None]) -> None:
        self.ema, self.groups, self.c = state["ema"], int(state["groups"]), state["c"]
