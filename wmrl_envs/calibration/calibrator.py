"""The :class:`Calibrator`: anchor pairs in, calibrated scores, η̂² and the audit out.

It holds the pairs (and their window), refits the maps on every add (:mod:`.maps`), caches
the cross-fitted scores behind η̂² and the audit (:mod:`.audit`), and round-trips its state.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from wmrl_envs.calibration.audit import AuditReport, run_audit
from wmrl_envs.calibration.config import CalibratorConfig
from wmrl_envs.calibration.data import ArrayLike, TaskIds, as_scores, as_tasks, require_data
from wmrl_envs.calibration.maps import CalibrationMap, Maps, apply_maps, cross_fitted, fit_maps, mean
from wmrl_envs.errors import CalibrationDataError

_STATE_FORMAT = 1


class Calibrator:
    """Isotonic online debiasing of world-model scores from anchor pairs.

    One instance is shared by every environment in a process, so an internal lock
    serialises every public method.
    """

    def __init__(self, config: CalibratorConfig | None = None) -> None:
        self._lock = threading.RLock()
        #: The process-wide registry's key when this is a shared calibrator (see
        #: ``wmrl_envs.scoring.calibrators``), else None.
        self.shared_key: str | None = None
        self._reset(config or CalibratorConfig())

    # Locks cannot be pickled or deep-copied: a copy travels as its state and gets a new lock.
    def __getstate__(self) -> dict[str, Any]:
        return self.state_dict()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.RLock()
        self.shared_key = None  # a copy is a calibrator of its own
        self._reset(CalibratorConfig())
        self.load_state_dict(state)

    def _reset(self, config: CalibratorConfig) -> None:
        self.config = config
        self._wm = np.empty(0)
        self._real = np.empty(0)
        self._tasks = np.empty(0, dtype=object)  # str, or None for untasked pairs
        self._strata = np.empty(0, dtype=object)  # str, or None for a pair of no stratum
        self._weights = np.empty(0)  # each pair's design weight (1 / its inclusion probability)
        self._maps = Maps(None, {}, math.inf)
        self._oof: dict[bool, np.ndarray] = {}  # cross-fitted predictions (monotone or not), computed lazily
        self._audit: AuditReport | None = None

    @property
    def n_pairs(self) -> int:
        """Number of pairs added so far (``pair_window`` forgets none of the state)."""
        with self._lock:
            return int(self._wm.size)

    def add_pairs(self, wm_scores: ArrayLike, real_scores: ArrayLike,
                  task_ids: TaskIds = None, strata: TaskIds = None, weights: ArrayLike | None = None) -> None:
        """Add anchor pairs and refit the maps.

        ``task_ids`` is one id per pair, a single id for all of them, or ``None``
        (untasked: these pairs feed only the global map). ``strata`` labels the pairs the
        same way for the audit's stratum check (the kind of solution; ``None``: none). Real scores must be finite and in
        ``score_range``, so an invalid submission enters as the real score 0. The caller
        must leave out infrastructure failures, which are not scores. ``weights`` (one per pair,
        finite and > 0; default 1) are design weights: a pair drawn with inclusion probability
        ``pi`` weighs ``1 / pi``, so that the maps and ``eta2`` describe every group, not the
        anchors alone (:mod:`~wmrl_envs.calibration.maps`). The audit's tests read the pairs
        unweighted: they ask whether the anchors' own pairs are monotone.

        Raises:
            CalibrationDataError: On non-finite scores, a real score out of range, bad weights,
                or mismatched lengths.
        """
        wm = as_scores(wm_scores, "wm_scores")
        real = as_scores(real_scores, "real_scores")
        require_data(wm.size == real.size,
                     f"wm_scores has {wm.size} values but real_scores has {real.size}")
        tasks = as_tasks(task_ids, wm.size)
        labels = as_tasks(strata, wm.size, "strata")
        design = np.ones(wm.size) if weights is None else as_scores(weights, "weights")
        require_data(design.size == wm.size and bool(np.all(design > 0)),
                     f"weights must be one number > 0 per pair ({wm.size}), got {design.size} values")
        with self._lock:
            lo, hi = self.config.score_range
            outside = np.flatnonzero((real < lo) | (real > hi))
            if outside.size:
                raise CalibrationDataError(f"real_scores must lie in score_range {self.config.score_range};"
                                           f" index {outside[0]} is {real[outside[0]]}")
            self._wm = np.concatenate([self._wm, wm])
            self._real = np.concatenate([self._real, real])
            self._tasks = np.concatenate([self._tasks, tasks])
            self._strata = np.concatenate([self._strata, labels])
            self._weights = np.concatenate([self._weights, design])
            # Refit eagerly, because calibrate() follows every add in a training step. The
            # cross-fit and the audit are recomputed lazily, only when read.
            recent = self._recent()
            self._maps = fit_maps(self._wm[recent], self._real[recent], self._tasks[recent], self.config,
                                  self._strata[recent], self._folds(), self._recent_weights())
            self._oof = {}
            self._audit = None

    def calibrate(self, wm_scores: ArrayLike, task_ids: TaskIds = None, strata: TaskIds = None) -> np.ndarray:
        """Map world-model scores to calibrated scores in ``score_range``.

        A task with at least ``min_pairs_per_task`` fitted pairs, whose real scores differ,
        blends its own map with the global one (see :attr:`task_prior_pairs`). Any other
        task, an unknown one or ``None`` uses the global map. Before
        ``min_pairs_global`` fitted pairs, or while all their real scores are equal, the
        result is the raw score clipped to range. Scores outside the anchors' range clip to
        the map's end values. With ``stratify``, a score's stratum (the kind of solution, as
        :meth:`add_pairs` labels pairs) with enough differing pairs blends its own map into the
        global one first. With ``debias_flagged_strata``, a score of a stratum the stratum check
        flags is moved by minus that stratum's mean residual (:attr:`debiased_strata`).

        Raises:
            CalibrationDataError: On non-finite scores or mismatched lengths.
        """
        return self.current_map().calibrate(wm_scores, task_ids, strata)

    def current_map(self) -> CalibrationMap:
        """The maps :meth:`calibrate` uses now, frozen (a later refit makes new maps)."""
        with self._lock:
            return CalibrationMap(self._maps, self.config)

    @property
    def task_prior_pairs(self) -> float:
        """Global pseudo-pairs in each task's blend: the configured value, or the one chosen
        from the anchors when the config says ``None``. ``inf`` while tasks use the global
        map alone (no map yet, no task with enough pairs, or task maps predict no better)."""
        with self._lock:
            return self._maps.task_prior

    @property
    def debiased_strata(self) -> dict[str, float]:
        """The strata ``debias_flagged_strata`` corrects now, each with the mean residual
        (calibrated minus real, cross-fitted, before the correction) subtracted from its scores.
        Empty when the option is off or no stratum is flagged."""
        with self._lock:
            return dict(self._maps.stratum_offsets)

    @property
    def eta2(self) -> float:
        """Cross-fitted mean squared residual of calibrated vs real scores (NaN if no pairs).

        Each pair (of the window) is predicted by the same maps as calibrate() uses (identity, or
        global plus the same per-task maps), refitted on the other ``cv_folds - 1`` folds.
        In-sample isotonic residuals are optimistic, because the map bends toward each
        pair's own noise. Cross-fitted residuals estimate the error on a new score instead.
        They are slightly conservative, since each fold's maps see ``1/cv_folds`` fewer
        pairs.
        """
        with self._lock:
            residual = self._cross_fitted() - self._real[self._recent()]
            return _windowed_mean(residual**2, self.config.eta2_window, self._recent_weights())

    @property
    def eta2_in_sample(self) -> float:
        """In-sample mean squared residual over the same window, for reference only."""
        with self._lock:
            recent = self._recent()
            calibrated = apply_maps(self._maps, self._wm[recent], self._tasks[recent], self.config,
                                    self._strata[recent])
            return _windowed_mean((calibrated - self._real[recent]) ** 2, self.config.eta2_window,
                                  self._recent_weights())

    def audit(self) -> AuditReport:
        """Run the Assumption-6 audit: is real score a monotone function of world-model score?

        * Spearman's rho, raw world-model vs real score, must be at least ``min_spearman``.
          So must the rho of each task with enough pairs, which catches a world model that
          ranks one task the wrong way.
        * The discordant-pair rate must be at most ``max_discordant_rate``.
        * Both rank checks read raw scores, which no map is fitted to, so every pair counts
          (none is held back) and they report from 40 pairs on.
        * An unconstrained challenger, the mean real score per quantile bin of world-model
          score, must not beat the calibrated scores by more than ``nonmonotone_z``
          standard errors in cross-fitted squared error. This catches a local reversal
          (say, over the top third of scores) that leaves the rank statistics high.
        * No stratum's mean calibrated residual may pass the stratum check's alarm.
        * The last two read the calibrated scores of a monotone map: where the global map
          is a line (``global_form``), of the same maps with an isotonic global map. A line
          that misfits a curved world model would otherwise fail them with a monotone truth.
        """
        with self._lock:
            if self._audit is None:
                recent = self._recent()
                self._audit = run_audit(self._wm[recent], self._real[recent], self._tasks[recent],
                                        self._strata[recent], self._cross_fitted(), self._cross_fitted(monotone=True),
                                        self._folds(), self._maps.global_map is not None, self.config)
            return self._audit

    def metrics(self) -> dict[str, float]:
        """Scalars to log, under ``calibration/`` names."""
        with self._lock:
            report = self.audit()
            metrics = {
                "calibration/eta2": self.eta2,
                "calibration/n_pairs": float(self.n_pairs),
                "calibration/spearman": report.spearman_rho,
                "calibration/discordant_rate": report.discordant_pair_rate,
                "calibration/mae_raw": report.mae_raw,
                "calibration/mae_calibrated": report.cv_calibration_mae,
                "calibration/monotone_ok": float(report.monotone_ok),
            }
            if report.stratum_z:  # only once a stratum has enough pairs to be checked
                metrics["calibration/stratum_z_max"] = max(abs(z) for z in report.stratum_z.values())
            if self.config.debias_flagged_strata:
                metrics["calibration/strata_debiased"] = float(len(self._maps.stratum_offsets))
            if self.config.global_form == "chosen" and self._maps.global_map is not None:
                metrics["calibration/global_affine"] = float(self._maps.global_form == "affine")
            return metrics

    def state_dict(self) -> dict[str, Any]:
        """Config and every pair, in order. Hold-out flags and maps are rebuilt from these.

        Python's ``json`` writes floats in their shortest round-trip form, so a run
        restored from JSON refits the same maps and returns the same ``calibrate()`` values.
        """
        with self._lock:
            state = {
                "format": _STATE_FORMAT,
                "config": self.config.to_dict(),
                "wm_scores": self._wm.tolist(),
                "real_scores": self._real.tolist(),
                "task_ids": self._tasks.tolist(),
                "strata": self._strata.tolist(),
            }
            if np.any(self._weights != 1.0):  # unweighted states keep their old shape
                state["weights"] = self._weights.tolist()
            return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace this calibrator's config and pairs with those of ``state``.

        Raises:
            CalibrationDataError: If ``state`` is not a calibrator state of a known format.
            ConfigError: If its config is not a valid :class:`CalibratorConfig`.
        """
        require_data(state.get("format") == _STATE_FORMAT,
                     f"unknown calibrator state format {state.get('format')!r}; expected {_STATE_FORMAT}")
        missing = {"config", "wm_scores", "real_scores", "task_ids"} - set(state)
        require_data(not missing, f"calibrator state lacks {sorted(missing)}")
        with self._lock:
            self._reset(CalibratorConfig.from_dict(state["config"]))
            # A state saved before strata (or weights) existed has none.
            self.add_pairs(state["wm_scores"], state["real_scores"], state["task_ids"], state.get("strata"),
                           state.get("weights"))

    def to_json(self) -> str:
        """The state dict as a JSON string."""
        return json.dumps(self.state_dict())

    @classmethod
    def from_json(cls, text: str) -> Calibrator:
        """Rebuild a calibrator from :meth:`to_json` output."""
        calibrator = cls()
        calibrator.load_state_dict(json.loads(text))
        return calibrator

    def _recent(self) -> slice:
        """The pairs the maps, η̂² and the audit read: the most recent ``pair_window``, or all."""
        window = self.config.pair_window
        return slice(0 if window is None else max(0, self._wm.size - window), self._wm.size)

    def _cross_fitted(self, monotone: bool = False) -> np.ndarray:
        """Out-of-fold calibrated score of every pair of the window, in pair order (cached).
        ``monotone``: with an isotonic global map where the maps have a line, as the audit reads
        them (:func:`~wmrl_envs.calibration.maps.cross_fitted`)."""
        monotone = monotone and self._maps.global_form != "isotonic"
        if monotone not in self._oof:
            recent = self._recent()
            wm = self._wm[recent]
            if self._maps.global_map is None:  # the identity has nothing to cross-fit
                self._oof[monotone] = np.clip(wm, *self.config.score_range)
            else:
                self._oof[monotone] = cross_fitted(self._maps, wm, self._real[recent], self._tasks[recent],
                                                   self.config, self._folds(), self._strata[recent],
                                                   monotone=monotone, weights=self._recent_weights())
        return self._oof[monotone]

    def _recent_weights(self) -> np.ndarray | None:
        """The window's design weights; None while every one is 1 (the unweighted fits)."""
        weights = self._weights[self._recent()]
        return None if np.all(weights == 1.0) else weights

    def _folds(self) -> np.ndarray:
        # The j-th pair is in fold j mod K, so a pair keeps its fold as pairs accumulate and
        # the window slides (eta2 moves smoothly), and two pairs already give two folds.
        recent = self._recent()
        return np.arange(recent.start, recent.stop) % self.config.cv_folds


def _windowed_mean(values: np.ndarray, window: int | None, weights: np.ndarray | None = None) -> float:
    if window is not None:
        values, weights = values[-window:], None if weights is None else weights[-window:]
    return mean(values, weights)
