"""The fitted maps: isotonic (optionally centered) or affine, global, per stratum and per task, partially pooled.

:func:`fit_maps` chooses which maps exist from the pair counts, :func:`apply_maps` calibrates
through them, and :class:`CalibrationMap` freezes them for shipping. Pure functions of the pairs.

**Weights.** Every fit takes optional per-pair ``weights``: under a schedule that draws anchors
with unequal inclusion probabilities ``pi``, a pair weighs ``1 / pi`` (Horvitz-Thompson), so
the maps estimate the population of groups, not the anchors' own. The global line is weighted
least squares, an isotonic map a weighted isotonic regression, and the out-of-fold choices (the
global form, the task and stratum priors) compare weighted mean squared errors. ``None`` is the
unweighted fit, the same arithmetic as before weights existed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.isotonic import IsotonicRegression

from wmrl_envs.calibration.config import CalibratorConfig
from wmrl_envs.calibration.data import ArrayLike, TaskIds, as_scores, as_tasks
from wmrl_envs.calibration.strata import flagged_strata, repeat_groups, stratum_residuals

# Candidates for task_prior_pairs=None, from full pooling (the global map alone) to none.
# Listed in that order so that a tie keeps the more pooled, less variable, value.
_TASK_PRIOR_GRID = (math.inf, 64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0, 0.0)


@dataclass(frozen=True)
class Maps:
    """Fitted maps: none (identity) below ``min_pairs_global`` or while every real score is
    the same, else global plus per-task, blended with ``task_prior`` pseudo-pairs of the
    global map (``inf``: the global map alone, and no task maps are kept). With
    ``stratify``, per-stratum maps (a kind of solution) are blended into the global map first,
    with ``stratum_prior`` pseudo-pairs, and a task's map is blended into that. With
    ``debias_flagged_strata``, the maps are fitted without the flagged strata's pairs, and
    each flagged stratum's mean residual (``stratum_offsets``) is subtracted from its scores."""

    global_map: MonotoneMap | None
    task_maps: dict[str, MonotoneMap]
    task_prior: float
    stratum_maps: dict[str, MonotoneMap] = field(default_factory=dict)
    stratum_prior: float = math.inf
    stratum_offsets: dict[str, float] = field(default_factory=dict)
    global_form: str = "isotonic"  # the global map's form (CalibratorConfig.global_form, once chosen)


@dataclass(frozen=True)
class CalibrationMap:
    """A calibrator's fitted maps at one moment, without its pairs: small to ship, and it
    calibrates as the calibrator did then (:meth:`Calibrator.current_map`)."""

    maps: Maps
    config: CalibratorConfig

    def calibrate(self, wm_scores: ArrayLike, task_ids: TaskIds = None, strata: TaskIds = None) -> np.ndarray:
        """As :meth:`Calibrator.calibrate`."""
        wm = as_scores(wm_scores, "wm_scores")
        return apply_maps(self.maps, wm, as_tasks(task_ids, wm.size), self.config,
                          as_tasks(strata, wm.size, "strata"))


def fit_maps(wm: np.ndarray, real: np.ndarray, tasks: np.ndarray, config: CalibratorConfig,
             strata: np.ndarray | None = None, folds: np.ndarray | None = None,
             weights: np.ndarray | None = None) -> Maps:
    """The production maps: which exist depends on the pair counts.

    Pairs whose real scores are all equal (every anchor failed, say) fit no map: it would be
    a constant that erases the world model's ranking, with no evidence against it. The global
    map then stays the identity and such a task uses the global map. Strata (``stratify``)
    are pooled like tasks, their prior chosen out of fold the same way; both priors are
    chosen against the global map alone. ``debias_flagged_strata``: see :func:`_flag_strata`
    (``folds``: each pair's cross-fitting fold; default: its index modulo ``cv_folds``).
    """
    if wm.size < config.min_pairs_global or np.ptp(real) == 0:
        return Maps(None, {}, math.inf)
    form = _choose_global_form(wm, real, tasks, config, weights)
    if config.debias_flagged_strata and strata is not None:
        return _flag_strata(wm, real, tasks, strata, config,
                            np.arange(wm.size) % config.cv_folds if folds is None else folds, form, weights)
    task_prior, task_maps = _pooled_maps(wm, real, tasks, config, config.task_prior_pairs, form, weights)
    stratum_prior, stratum_maps = math.inf, {}
    if config.stratify and strata is not None:
        stratum_prior, stratum_maps = _pooled_maps(wm, real, strata, config, None, form, weights)
    return Maps(_global_map(wm, real, config, form, weights), task_maps, task_prior, stratum_maps, stratum_prior,
                global_form=form)


def _take(weights: np.ndarray | None, rows: np.ndarray) -> np.ndarray | None:
    """The weights of ``rows`` (None stays None: unweighted)."""
    return None if weights is None else weights[rows]


def mean(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Mean of ``values`` under ``weights`` (None: the plain mean); NaN when there are none (no warning)."""
    if values.size == 0:
        return math.nan
    return float(values.mean()) if weights is None else float(np.average(values, weights=weights))


def _choose_global_form(wm: np.ndarray, real: np.ndarray, tasks: np.ndarray, config: CalibratorConfig,
                        weights: np.ndarray | None = None) -> str:
    """``global_form``, or for ``chosen`` the affine line unless the isotonic map's squared error
    out of fold is lower by more than one standard error of the paired difference. Copies of
    one pair share a fold, or the isotonic map, which can pass through a pair, would be scored
    on pairs it was fitted on."""
    if config.global_form != "chosen":
        return config.global_form
    folds = repeat_groups(wm, real, tasks) % config.cv_folds
    errors = {form: (cross_fit(folds, lambda train, test, form=form: _global_map(
        wm[train], real[train], config, form, _take(weights, train)).predict(wm[test])) - real) ** 2
        for form in ("affine", "isotonic")}
    gain = errors["affine"] - errors["isotonic"]
    return "isotonic" if mean(gain, weights) > standard_error(gain, weights) else "affine"


def _global_map(wm: np.ndarray, real: np.ndarray, config: CalibratorConfig, form: str,
                weights: np.ndarray | None = None) -> MonotoneMap:
    return _affine(wm, real, config, weights) if form == "affine" else _isotonic(wm, real, config, weights)


def _affine(wm: np.ndarray, real: np.ndarray, config: CalibratorConfig, weights: np.ndarray | None = None) -> MonotoneMap:
    """The least-squares line of real on world-model scores, slope at least 0 (a monotone map),
    clipped to the score range. Under std-normalised group advantages it changes no advantage
    of a group that it does not clip: only a map's curvature reaches the gradient."""
    centre, level = mean(wm, weights), mean(real, weights)
    w = 1.0 if weights is None else weights
    spread = float((w * (wm - centre) ** 2).sum())
    slope = max(float((w * (wm - centre) * (real - level)).sum()) / spread, 0.0) if spread > 0 else 0.0
    return MonotoneMap(np.array([centre]), np.array([float(np.clip(level, *config.score_range))]), wm.size,
                       end_slope=slope, score_range=config.score_range)


def _flag_strata(wm: np.ndarray, real: np.ndarray, tasks: np.ndarray, strata: np.ndarray,
                 config: CalibratorConfig, folds: np.ndarray, form: str, weights: np.ndarray | None = None) -> Maps:
    """Maps that correct only the strata the stratum check flags.

    The check reads the residuals of the global and task maps, cross-fitted over ``folds``, with
    an isotonic global map where the reward's is a line (see :func:`cross_fitted`). The most
    flagged stratum is set aside: its pairs leave the maps, which they bend towards their bias (a family the world model over-scores by 0.5 makes every other family look
    under-scored near its scores). The maps are refitted on the rest, and the check runs again
    until no stratum left in them is flagged. Each stratum set aside gets an offset, its mean
    residual under the final maps, which :func:`apply_maps` subtracts. With ``weights`` the maps
    and the offsets are weighted; the check's statistic is not (it tests the anchors' own pairs).
    """
    offsets: dict[str, float] = {}
    repeats = repeat_groups(wm, real, tasks)
    while True:
        kept = np.array([stratum not in offsets for stratum in strata])
        kept_weights = _take(weights, kept)
        task_prior, task_maps = _pooled_maps(wm[kept], real[kept], tasks[kept], config, config.task_prior_pairs, form,
                                             kept_weights)
        maps = Maps(_global_map(wm[kept], real[kept], config, form, kept_weights), task_maps, task_prior,
                    global_form=form)
        residual = cross_fitted(maps, wm, real, tasks, config, folds, kept=kept, weights=weights) - real
        # The offsets are what the maps leave; the flags read a monotone map's residual, as the audit does.
        check = residual if form == "isotonic" else (
            cross_fitted(maps, wm, real, tasks, config, folds, kept=kept, monotone=True, weights=weights) - real)
        offsets = {name: mean(residual[rows], _take(weights, rows))
                   for name in offsets if (rows := strata == name).any()}
        bias, z = stratum_residuals(check, strata, repeats, config.min_stratum_pairs)
        flagged = {name: abs(z[name]) for name in flagged_strata(bias, z, config) if name not in offsets}
        if not flagged:
            return replace(maps, stratum_offsets=offsets)
        worst = max(flagged, key=flagged.__getitem__)
        rest = kept & (strata != worst)
        if rest.sum() < config.min_pairs_global or np.ptp(real[rest]) == 0:
            return replace(maps, stratum_offsets=offsets)  # too little would be left to map
        offsets[worst] = mean(residual[strata == worst], _take(weights, strata == worst))


def _pooled_maps(wm: np.ndarray, real: np.ndarray, keys: np.ndarray, config: CalibratorConfig,
                 prior: float | None, form: str, weights: np.ndarray | None = None) -> tuple[float, dict[str, MonotoneMap]]:
    """The prior (``None``: chosen out of fold against the global map of ``form``) and the maps
    of every key that earns one."""
    counts = Counter(key for key in keys if key is not None)
    own = {key for key in counts if _may_have_map(real[keys == key], config)}
    if prior is None:
        prior = _choose_task_prior(wm, real, keys, config, form, weights) if own else math.inf
    return prior, ({} if math.isinf(prior) else _fit_task_maps(own, wm, real, keys, config, weights))


def _may_have_map(real: np.ndarray, config: CalibratorConfig) -> bool:
    """Whether a task's fitted real scores earn it a map of its own."""
    return real.size >= config.min_pairs_per_task and np.ptp(real) > 0


def _choose_task_prior(wm: np.ndarray, real: np.ndarray, tasks: np.ndarray,
                       config: CalibratorConfig, form: str, weights: np.ndarray | None = None) -> float:
    """The grid value of ``task_prior_pairs`` whose blend of task and global maps, fitted on
    the other folds, has the lowest squared error on each fold's pairs of mapped tasks.

    Out of fold, a task map fitted on a handful of pairs shows its noise, so the choice falls
    on the global map unless per-task maps predict new pairs better. Repeats of one pair (a
    policy that writes the same script twice) share a fold, or a task map would be scored on
    pairs it was fitted on. ``eta2``'s cross-fit reuses the chosen value, a single number
    chosen on the same pairs, which leaves ``eta2`` slightly optimistic.
    """
    # Folds dealt round the distinct (task, score) keys in sorted order: repeats share a
    # fold, and every fold sees a spread of each task's scores.
    keys = np.array([f"{task}" for task in tasks])
    _, order = np.unique(np.rec.fromarrays([keys, wm]), return_inverse=True)
    folds = order.ravel() % config.cv_folds
    pooled = np.empty(wm.size)
    own = np.full(wm.size, np.nan)
    own_pairs = np.zeros(wm.size)
    for fold in range(config.cv_folds):
        test = folds == fold
        if not test.any():
            continue
        train = ~test
        pooled[test] = _global_map(wm[train], real[train], config, form, _take(weights, train)).predict(wm[test])
        mapped_here = [task for task in set(tasks[test]) - {None}
                       if _may_have_map(real[train & (tasks == task)], config)]
        for task, task_map in _fit_task_maps(mapped_here, wm[train], real[train], tasks[train], config,
                                             _take(weights, train)).items():
            scored = test & (tasks == task)
            own[scored] = task_map.predict(wm[scored])
            own_pairs[scored] = task_map.n_pairs
    mapped = ~np.isnan(own)
    if not mapped.any():
        return math.inf

    def squared_errors(prior: float) -> np.ndarray:
        weight = _pool_weight(own_pairs[mapped], prior)
        blend = weight * own[mapped] + (1 - weight) * pooled[mapped]
        return (blend - real[mapped]) ** 2

    # The one-standard-error rule: the most pooled value whose error is within one standard
    # error of the best. With few pairs a task map's edge is mostly luck of the folds.
    scored = _take(weights, mapped)
    errors = {prior: squared_errors(prior) for prior in _TASK_PRIOR_GRID}
    best = min(_TASK_PRIOR_GRID, key=lambda prior: mean(errors[prior], scored))
    gap_se = {prior: standard_error(errors[prior] - errors[best], scored) for prior in _TASK_PRIOR_GRID}
    return next(prior for prior in _TASK_PRIOR_GRID
                if mean(errors[prior], scored) - mean(errors[best], scored) <= gap_se[prior])


def _pool_weight(n_pairs: np.ndarray | int, prior: float) -> np.ndarray | float:
    """Weight of a task's own map, fitted on ``n_pairs``, against ``prior`` global pseudo-pairs."""
    if math.isinf(prior):
        return np.zeros_like(n_pairs, dtype=float)
    return n_pairs / (n_pairs + prior)


def fit_like(maps: Maps, wm: np.ndarray, real: np.ndarray, tasks: np.ndarray, config: CalibratorConfig,
             strata: np.ndarray | None = None, monotone: bool = False, weights: np.ndarray | None = None) -> Maps:
    """The same maps as ``maps``, refitted on other pairs (a fold's training set).

    Strata set aside (``stratum_offsets``) stay aside: the maps are refitted without their
    pairs, and each offset is refitted as the stratum's mean residual here. ``monotone``: with
    an isotonic global map where ``maps`` has a line (see :func:`cross_fitted`)."""
    if maps.stratum_offsets and strata is not None:
        aside = np.array([stratum in maps.stratum_offsets for stratum in strata])
        refitted = fit_like(replace(maps, stratum_offsets={}), wm[~aside], real[~aside], tasks[~aside], config,
                            monotone=monotone, weights=_take(weights, ~aside))
        residual = apply_maps(refitted, wm[aside], tasks[aside], config) - real[aside]
        aside_weights = _take(weights, aside)
        offsets = {name: mean(residual[rows], _take(aside_weights, rows)) for name in maps.stratum_offsets
                   if (rows := strata[aside] == name).any()}
        return replace(refitted, stratum_offsets=offsets)
    form = "isotonic" if monotone else maps.global_form
    stratum_maps = {} if strata is None else _fit_task_maps(maps.stratum_maps, wm, real, strata, config, weights)
    return Maps(_global_map(wm, real, config, form, weights), _fit_task_maps(maps.task_maps, wm, real, tasks, config,
                                                                             weights),
                maps.task_prior, stratum_maps, maps.stratum_prior, global_form=form)


def cross_fitted(maps: Maps, wm: np.ndarray, real: np.ndarray, tasks: np.ndarray, config: CalibratorConfig,
                 folds: np.ndarray, strata: np.ndarray | None = None, kept: np.ndarray | None = None,
                 monotone: bool = False, weights: np.ndarray | None = None) -> np.ndarray:
    """Each pair's calibrated score under ``maps`` refitted on the other folds' pairs (those ``kept``:
    default all).

    ``monotone``: under the same maps with an isotonic global map in place of a line, which is
    what the audit's stratum check and its non-monotone challenger read. They ask whether the
    real score is a monotone function of the world-model score; a line that misfits a curved
    (say, saturating) world model leaves a residual on every family that sits at another level
    of the score, and the stratum check cannot tell that from a family-dependent error."""
    fit = np.ones(wm.size, dtype=bool) if kept is None else kept
    return cross_fit(folds, lambda train, test: apply_maps(
        fit_like(maps, wm[train & fit], real[train & fit], tasks[train & fit], config,
                 None if strata is None else strata[train & fit], monotone, _take(weights, train & fit)),
        wm[test], tasks[test], config, None if strata is None else strata[test]))


def _fit_task_maps(names: Iterable[str], wm: np.ndarray, real: np.ndarray, tasks: np.ndarray,
                   config: CalibratorConfig, weights: np.ndarray | None = None) -> dict[str, MonotoneMap]:
    # A task without pairs here (possible only in a cross-fitting fold) uses the global map.
    return {name: _isotonic(wm[rows], real[rows], config, _take(weights, rows))
            for name in names if (rows := tasks == name).any()}


class MonotoneMap:
    """A fitted isotonic map as knots of a piecewise-linear function. Beyond its end knots it
    holds the end values (``end_slope`` 0) or continues at ``end_slope``, clipped to ``score_range``."""

    def __init__(self, knots_x: np.ndarray, knots_y: np.ndarray, n_pairs: int, end_slope: float = 0.0,
                 score_range: tuple[float, float] = (-np.inf, np.inf)) -> None:
        self.knots_x, self.knots_y = knots_x, knots_y
        self.n_pairs = n_pairs  # how many pairs it was fitted on
        self.end_slope, self.score_range = end_slope, score_range

    def predict(self, wm: np.ndarray) -> np.ndarray:
        # np.interp holds the end values beyond the knots: out_of_bounds="clip".
        inside = np.interp(wm, self.knots_x, self.knots_y)
        if not self.end_slope:
            return inside
        beyond = np.minimum(wm - self.knots_x[0], 0.0) + np.maximum(wm - self.knots_x[-1], 0.0)
        return np.clip(inside + self.end_slope * beyond, *self.score_range)


def _isotonic(wm: np.ndarray, real: np.ndarray, config: CalibratorConfig,
              weights: np.ndarray | None = None) -> MonotoneMap:
    lo, hi = config.score_range
    # out_of_bounds="clip": the default "nan" would turn scores beyond the anchors' range
    # into NaN rewards.
    isotonic = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=lo, y_max=hi)
    isotonic.fit(wm, real, sample_weight=weights)
    if not config.centered or isotonic.X_thresholds_.size < 2:
        return MonotoneMap(isotonic.X_thresholds_, isotonic.y_thresholds_, wm.size)
    return _centered(wm, isotonic.predict(wm), config, weights)


def _centered(wm: np.ndarray, fitted: np.ndarray, config: CalibratorConfig,
              weights: np.ndarray | None = None) -> MonotoneMap:
    """Centered isotonic regression (Oron & Flournoy, 2017): one knot per block of equal
    fitted value, at the block's mean world-model score, plus the anchors' extreme scores
    holding the end blocks' values. The map stays monotone and passes through every block
    mean, but it rises between blocks instead of stepping.

    With ``extend_ends`` and two blocks or more, the map instead continues past the first and
    last block centres at its mean slope between them, so no two world-model scores past a
    centre tie until the score range clips them."""
    order = np.argsort(wm, kind="stable")
    x, y = wm[order], fitted[order]
    block_id = np.concatenate([[0], np.cumsum(np.diff(y) != 0)])
    sizes = np.bincount(block_id)
    # A block's centre is its (weighted) mean score: where its weighted fit is exact.
    centres = (np.bincount(block_id, weights=x) / sizes if weights is None else
               np.bincount(block_id, weights=x * weights[order]) / np.bincount(block_id, weights=weights[order]))
    levels = y[np.concatenate([[0], np.cumsum(sizes)[:-1]])]
    if config.extend_ends and centres.size >= 2:
        slope = (levels[-1] - levels[0]) / (centres[-1] - centres[0])
        return MonotoneMap(centres, levels, wm.size, end_slope=float(slope), score_range=config.score_range)
    knots_x = np.concatenate([[x[0]], centres, [x[-1]]])
    knots_y = np.concatenate([[levels[0]], levels, [levels[-1]]])
    # An end block of one distinct score has its centre on the extreme score: drop the twin.
    keep = np.concatenate([[True], np.diff(knots_x) > 0])
    return MonotoneMap(knots_x[keep], knots_y[keep], wm.size)


def apply_maps(maps: Maps, wm: np.ndarray, tasks: np.ndarray, config: CalibratorConfig,
               strata: np.ndarray | None = None) -> np.ndarray:
    """Calibrated scores of ``wm`` (one task label, and optionally one stratum, per score) through ``maps``."""
    if maps.global_map is None:
        return np.clip(wm, *config.score_range)
    out = maps.global_map.predict(wm)
    for stratum, stratum_map in (maps.stratum_maps.items() if strata is not None else ()):
        rows = strata == stratum
        if rows.any():
            weight = _pool_weight(stratum_map.n_pairs, maps.stratum_prior)
            out[rows] = weight * stratum_map.predict(wm[rows]) + (1 - weight) * out[rows]
    for task, task_map in maps.task_maps.items():
        rows = tasks == task
        if rows.any():
            # Partial pooling: a blend of two monotone maps is monotone, and the task's own
            # map takes over as its pairs outnumber the prior's pseudo-pairs.
            weight = _pool_weight(task_map.n_pairs, maps.task_prior)
            out[rows] = weight * task_map.predict(wm[rows]) + (1 - weight) * out[rows]
    for stratum, offset in (maps.stratum_offsets.items() if strata is not None else ()):
        # Last, as measured: the offset is the stratum's mean residual under the maps above.
        rows = strata == stratum
        out[rows] = np.clip(out[rows] - offset, *config.score_range)
    return out


def cross_fit(folds: np.ndarray, fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Out-of-fold predictions: ``fit_predict(train_mask, test_mask)`` for each fold."""
    out = np.empty(folds.size)
    for k in np.unique(folds):
        test = folds == k
        out[test] = fit_predict(~test, test)
    return out


def standard_error(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Standard error of the (weighted) mean of ``values`` (0 for fewer than two). Weighted: the
    ratio estimator's, ``sqrt(sum(w^2 (v - m)^2)) / sum(w)``."""
    if values.size < 2:
        return 0.0
    if weights is None:
        return float(values.std(ddof=1) / math.sqrt(values.size))
    centred = values - np.average(values, weights=weights)
    return float(np.sqrt(np.sum(weights**2 * centred**2) * values.size / (values.size - 1)) / weights.sum())
