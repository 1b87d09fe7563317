"""How a benchmark reads WMRL's saving off its runs (issue 46): one set of definitions for every report.

The former reading, "the compute `real` needs to reach its own final held-out score over the
compute a mode needs to reach it", rests on a few evaluation points and a noisy target: over
bootstrapped seeds its interval spans several-fold, and a mode that ends just below `real` never
reaches the target at all. The readings here are steadier and say what they rest on:

* **executed share**: the training scripts a mode executed (anchors and real groups; proofs and
  reuse are not executions) over all its training scripts, the ceiling of any saving being about
  its inverse;
* **total-compute ratio**: the mean training compute (ledger CPU-seconds, evaluation excluded) of
  `real` over the mode's on the same seeds, read together with
* **non-inferiority**: the mean final held-out score of the mode minus `real`'s; the mode is
  non-inferior at margin ``m`` when the difference is at least ``-m`` (the saving counts only then);
* **compute to a fixed score**: `real`'s compute to first reach a score fixed *before* the runs
  (not `real`'s own final score) over the mode's, on the mean curves (:mod:`bench.curves`).

Intervals come from bootstrapping seeds: a seed's runs of both modes are resampled together, so
the interval carries the pairing of a shared seed (the same tasks drawn, the same start).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.curves import crossing

#: Bootstrap resamples of seeds, and the interval's level.
DRAWS, LEVEL = 4000, 0.9


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap interval (``lo``, ``hi``; NaN when it cannot be read)."""

    point: float
    lo: float
    hi: float

    def text(self, digits: int = 2, suffix: str = "", signed: bool = False) -> str:
        if not np.isfinite(self.point):
            return "—"
        point = f"{self.point:+.{digits}f}" if signed else f"{self.point:.{digits}f}"
        if not (np.isfinite(self.lo) and np.isfinite(self.hi)):  # one seed, or no resample reached
            return point + suffix
        return f"{point}{suffix} [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"

    def to_dict(self) -> dict[str, float | None]:
        """As JSON keeps it: a number that cannot be read is None (NaN would not equal itself)."""
        return {name: value if np.isfinite(value) else None for name, value in
                (("point", self.point), ("lo", self.lo), ("hi", self.hi))}

    @classmethod
    def from_dict(cls, data: dict[str, float | None]) -> Interval:
        return cls(*(float("nan") if data[name] is None else float(data[name]) for name in ("point", "lo", "hi")))


def _bootstrap(statistic, n: int, seed: int) -> tuple[float, float]:
    """The ``LEVEL`` interval of ``statistic(indices)`` over seeds resampled with replacement."""
    if n < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    values = np.array([statistic(rng.integers(0, n, size=n)) for _ in range(DRAWS)], dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - LEVEL) / 2.0
    return float(np.quantile(values, tail)), float(np.quantile(values, 1.0 - tail))


def _paired(real: Sequence[float], mode: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    real_values, mode_values = np.asarray(real, dtype=float), np.asarray(mode, dtype=float)
    if real_values.shape != mode_values.shape or real_values.ndim != 1:
        raise ValueError(f"paired seeds: {real_values.shape} runs of real against {mode_values.shape} of the mode")
    return real_values, mode_values


def compute_ratio(real_compute: Sequence[float], mode_compute: Sequence[float], seed: int = 0) -> Interval:
    """Mean compute of `real` over the mode's, paired by seed (position ``i`` of both is seed ``i``)."""
    real, mode = _paired(real_compute, mode_compute)
    lo, hi = _bootstrap(lambda idx: real[idx].mean() / mode[idx].mean(), real.size, seed)
    return Interval(float(real.mean() / mode.mean()), lo, hi)


def score_difference(real_scores: Sequence[float], mode_scores: Sequence[float], seed: int = 0) -> Interval:
    """Mean final held-out score of the mode minus `real`'s, paired by seed."""
    real, mode = _paired(real_scores, mode_scores)
    lo, hi = _bootstrap(lambda idx: mode[idx].mean() - real[idx].mean(), real.size, seed)
    return Interval(float(mode.mean() - real.mean()), lo, hi)


def executed_share(executed: Sequence[float], scripts: Sequence[float]) -> float:
    """Executed training scripts over training scripts, pooled over a mode's runs."""
    total = float(np.sum(scripts))
    return float(np.sum(executed)) / total if total > 0 else float("nan")


def compute_to_score(real_curves: Sequence[dict], mode_curves: Sequence[dict], score: float,
                     seed: int = 0) -> Interval:
    """`real`'s compute to first reach ``score`` over the mode's, on mean curves over paired seeds;
    NaN where a mean curve never reaches it (the interval reads the resamples that reach it)."""
    if len(real_curves) != len(mode_curves):
        raise ValueError(f"paired seeds: {len(real_curves)} runs of real against {len(mode_curves)} of the mode")

    def ratio(indices) -> float:
        reached = [_mean_crossing([curves[i] for i in indices], score) for curves in (real_curves, mode_curves)]
        return float("nan") if None in reached or reached[1] <= 0 else reached[0] / reached[1]

    everything = np.arange(len(real_curves))
    lo, hi = _bootstrap(ratio, len(real_curves), seed)
    return Interval(ratio(everything), lo, hi)


def _mean_crossing(curves: Sequence[dict], score: float) -> float | None:
    compute = np.mean([[p["compute_cpu_s"] for p in c] for c in curves], axis=0)
    heldout = np.mean([[p["heldout_mean"] for p in c] for c in curves], axis=0)
    return crossing(compute, heldout, score)
