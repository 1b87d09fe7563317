"""The calibrator's settings: :class:`CalibratorConfig`, validated on construction.

A bad setting raises :class:`~wmrl_envs.errors.ConfigError`; bad scores or states handed to a
calibrator raise :class:`~wmrl_envs.errors.CalibrationDataError` (:mod:`.data`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from wmrl_envs.errors import ConfigError

#: The global map's forms (:attr:`CalibratorConfig.global_form`).
GLOBAL_FORMS = ("isotonic", "affine", "chosen")


@dataclass(frozen=True)
class CalibratorConfig:
    """Settings of :class:`Calibrator`.

    Attributes:
        score_range: ``(lo, hi)`` of real scores. Real scores must lie in it, and
            calibrated scores always do.
        min_pairs_global: Fitted pairs needed before the global map is used. Below it, and
            while every fitted real score is the same, ``calibrate()`` returns the raw score
            clipped to ``score_range``.
        min_pairs_per_task: Fitted pairs a task needs for its own map, among which real
            scores must differ. Any other task uses the global map alone. A task map also
            needs the global map to exist (``min_pairs_global`` pairs over all tasks).
        task_prior_pairs: Pseudo-pairs of the global map in a task's calibration: a task
            with ``n`` fitted pairs and a map of its own gets ``w * own + (1 - w) * global``
            with ``w = n / (n + task_prior_pairs)``. Partial pooling lets a task's few
            pairs correct its own bias (a task-specific scale, such as DSBench's RPG)
            only as far as their number justifies. ``0`` uses the task's own map alone.
            ``None`` (the default) chooses it on every refit from the anchors themselves:
            the most pooled value of a grid (the global map alone, 64, 32, ..., 1, 0) whose
            blend predicts the pairs out of fold within one standard error of the best
            (squared error over ``cv_folds`` folds).
            A world model whose error does not depend on the task (MLE-Dojo held-out) then
            keeps the global map; one with a per-task bias (the MLE-trained surrogate on
            DSBench) gets per-task maps (``bench/calibrator_settings.py``).
        cv_folds: Folds of the cross-fitted residuals behind ``eta2`` and the audit's MAE.
        pair_window: Forgetting: the maps, ``eta2`` and the audit read only the
            ``pair_window`` most recent pairs, so a world model whose distortion drifts during
            training is tracked. Older pairs stay in the state, so a reload applies the same
            window. ``None`` (the default) reads every pair.
        eta2_window: ``eta2`` averages over this many of the most recent pairs (of those
            ``pair_window`` keeps), which tracks a policy whose scores drift. ``None`` averages
            over all of them.
        min_spearman: The audit flags a Spearman rho (raw vs real) below this, globally or
            for one task.
        max_discordant_rate: The audit flags a discordant-pair rate above this.
        nonmonotone_z: The audit flags when a non-monotone challenger beats the calibrated
            scores, cross-fitted, by more than this many standard errors.
        min_stratum_pairs, stratum_z, stratum_min_bias: The stratum check of the audit. A
            stratum (a solution family) with at least ``min_stratum_pairs`` distinct pairs is
            flagged when the mean of its cross-fitted calibrated residuals (calibrated minus
            real) is both ``stratum_z`` standard errors and ``stratum_min_bias`` away from 0,
            the standard error clustered over repeats of one pair and the mean over it moved
            from a Student t to the normal scale (``strata.py``): the world
            model systematically over- or under-scores that kind of solution, which a policy
            can exploit and no monotone map corrects. 3.5 standard errors keeps the chance of
            a false flag among about 10 strata near 0.5% per audit; ``bench/corruption_calibration.py``
            measures power and false alarms.
        centered: Interpolate the fitted map through the centroid of each isotonic block
            (centered isotonic regression) instead of keeping each block flat. Both maps
            are monotone and fitted by the same ``IsotonicRegression``; the centered one is
            strictly increasing inside the anchors' range, so two world-model scores that
            differ keep their order after calibration and a GRPO group does not lose its
            within-group ranking to a plateau.
        global_form: The global map's form. ``isotonic``: the isotonic map (``centered`` as
            set). ``affine``: the least-squares line of real on world-model scores, slope at
            least 0, clipped to ``score_range``. ``chosen`` (the default): on every refit, the
            line unless the isotonic map predicts the pairs out of fold better by more than
            one standard error (the sixth candidate of issue 28's stress grid, confirmed on
            five fresh seeds). Per-task and per-stratum maps stay isotonic and are
            pooled toward this map. Under std-normalised GRPO advantages a line changes no
            group's advantages (up to clipping): a map reaches the gradient only through its
            curvature, and an isotonic map fitted on about a hundred on-policy pairs has
            curvature that is mostly noise (``bench/results/stress_corrections_preregistration.md``, sixth candidate).
        extend_ends: With ``centered``, continue the map past its first and last block
            centres at its mean slope between them (clipped to ``score_range``) instead of
            holding the end blocks' values: the best (and worst) solutions a policy writes keep
            their within-group order after calibration, where a held end value ties them and
            their advantages vanish.
        stratify: Stratified debiasing: each stratum (the kind of solution the scorer
            reports, as for the audit's stratum check) with ``min_pairs_per_task`` differing
            pairs gets a map of its own, blended into the global map with pseudo-pairs
            chosen out of fold as for tasks. An error that depends on the kind of solution
            (a world model that over-scores one family) is then corrected, not only flagged:
            no single monotone map can. Off: one global map (and per-task maps).
        debias_flagged_strata: Debias only the strata the audit's stratum check flags. On
            every refit the check runs on the cross-fitted residuals of the maps without
            stratum corrections, with the audit's thresholds (``min_stratum_pairs``,
            ``stratum_z``, ``stratum_min_bias``). Each flagged stratum's calibrated scores are
            moved by minus its mean residual, an offset of one number. Every other stratum
            keeps the global map, so a world model whose error does not depend on the kind
            of solution is calibrated exactly as without it. The alarm's 3.5 standard errors
            is the shrinkage: one stratum's noise neither moves its scores nor pays for maps
            that other strata do not need (``stratify`` fits a map for every stratum). The
            audit then reads the corrected residuals; :attr:`Calibrator.debiased_strata`
            says what was corrected. Exclusive with ``stratify``.
    """

    score_range: tuple[float, float] = field(default=(0.0, 1.0), metadata={"help": "(lo, hi) of real scores"})
    min_pairs_global: int = field(default=20, metadata={"help": "fitted pairs before the global map is used"})
    min_pairs_per_task: int = field(default=2, metadata={"help": "fitted pairs a task needs for a map of its own"})
    task_prior_pairs: float | None = field(default=None, metadata={
        "help": "global pseudo-pairs in each task's map; default: chosen out of fold from the anchors"})
    cv_folds: int = field(default=5, metadata={"help": "folds of the cross-fitted residual eta2"})
    pair_window: int | None = field(default=None, metadata={
        "help": "forgetting: maps, eta2 and the audit use the most recent N pairs; default: all"})
    eta2_window: int | None = field(default=None, metadata={
        "help": "eta2 averages the most recent N fitted pairs; default: all"})
    min_spearman: float = field(default=0.3, metadata={"help": "the audit flags a Spearman rho below this"})
    max_discordant_rate: float = field(default=0.35, metadata={
        "help": "the audit flags a discordant-pair rate above this"})
    nonmonotone_z: float = field(default=3.0, metadata={
        "help": "the audit flags a non-monotone challenger better by this many standard errors"})
    centered: bool = field(default=True, metadata={
        "help": "interpolate through isotonic block centroids (strictly increasing map)"})
    global_form: str = field(default="chosen", metadata={
        "help": f"the global map's form, one of {GLOBAL_FORMS}: chosen = affine unless isotonic wins out of fold"})
    extend_ends: bool = field(default=False, metadata={
        "help": "centered: continue past the end block centres at the map's mean slope, not flat"})
    min_stratum_pairs: int = field(default=8, metadata={
        "help": "distinct pairs a stratum (solution family) needs before the audit checks its residuals"})
    stratum_z: float = field(default=3.5, metadata={
        "help": "the audit flags a stratum whose mean calibrated residual is this many standard errors from 0"})
    stratum_min_bias: float = field(default=0.1, metadata={
        "help": "... and at least this far from 0 (a bias too small to matter is not flagged)"})
    stratify: bool = field(default=False, metadata={
        "help": "stratified debiasing: a map per solution family, pooled toward the global map out of fold"})
    debias_flagged_strata: bool = field(default=False, metadata={
        "help": "debias only the solution families the audit's stratum check flags, by their mean residual"})

    def __post_init__(self) -> None:
        # JSON turns the tuple into a list; store the canonical form.
        object.__setattr__(self, "score_range", tuple(float(v) for v in self.score_range))
        _require(len(self.score_range) == 2,
                 f"score_range must be (lo, hi), got {self.score_range}")
        lo, hi = self.score_range
        _require(math.isfinite(lo) and math.isfinite(hi) and lo < hi,
                 f"score_range must be finite with lo < hi, got {self.score_range}")
        for name in ("min_pairs_global", "min_pairs_per_task", "cv_folds"):
            value = getattr(self, name)
            _require(isinstance(value, int) and not isinstance(value, bool),
                     f"{name} must be an int, got {value!r}")
        # Two pairs give cross-fitting two folds, so no fold trains on nothing.
        _require(self.min_pairs_global >= 2,
                 f"min_pairs_global must be >= 2, got {self.min_pairs_global}")
        # A task map is fitted only next to a global map (_fit_maps), whatever this is.
        _require(self.min_pairs_per_task >= 2,
                 f"min_pairs_per_task must be >= 2, got {self.min_pairs_per_task}")
        _require(self.task_prior_pairs is None
                 or (isinstance(self.task_prior_pairs, (int, float))
                     and not isinstance(self.task_prior_pairs, bool)
                     and math.isfinite(self.task_prior_pairs) and self.task_prior_pairs >= 0),
                 f"task_prior_pairs must be None (chosen from the anchors) or a finite number >= 0, "
                 f"got {self.task_prior_pairs!r}")
        _require(self.cv_folds >= 2, f"cv_folds must be >= 2, got {self.cv_folds}")
        # A window shorter than min_pairs_global would never fit a map.
        _require(self.pair_window is None
                 or (isinstance(self.pair_window, int) and not isinstance(self.pair_window, bool)
                     and self.pair_window >= self.min_pairs_global),
                 f"pair_window must be None or an int >= min_pairs_global ({self.min_pairs_global}), "
                 f"got {self.pair_window!r}")
        _require(self.eta2_window is None
                 or (isinstance(self.eta2_window, int) and self.eta2_window >= 1),
                 f"eta2_window must be None or an int >= 1, got {self.eta2_window!r}")
        _require(-1.0 <= self.min_spearman <= 1.0,
                 f"min_spearman must be in [-1, 1], got {self.min_spearman}")
        _require(0.0 <= self.max_discordant_rate <= 1.0,
                 f"max_discordant_rate must be in [0, 1], got {self.max_discordant_rate}")
        _require(self.nonmonotone_z > 0, f"nonmonotone_z must be > 0, got {self.nonmonotone_z}")
        for name in ("centered", "extend_ends", "stratify", "debias_flagged_strata"):
            _require(isinstance(getattr(self, name), bool), f"{name} must be a bool, got {getattr(self, name)!r}")
        _require(self.global_form in GLOBAL_FORMS,
                 f"global_form must be one of {GLOBAL_FORMS}, got {self.global_form!r}")
        _require(self.centered or not self.extend_ends,
                 "extend_ends continues a centered map's end segments: it needs centered=True")
        _require(not (self.stratify and self.debias_flagged_strata),
                 "stratify and debias_flagged_strata are two corrections of one error; choose one")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibratorConfig:
        """Build a config from a (possibly partial) mapping; unknown keys are an error."""
        unknown = set(data) - {f.name for f in fields(cls)}
        _require(not unknown, f"unknown calibrator setting(s) {sorted(unknown)}")
        return cls(**dict(data))


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
