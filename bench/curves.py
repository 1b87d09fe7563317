"""Learning curves of the benchmarks: the mean curve over seeds and where it crosses a target.

A curve is a list of evaluation points ``{"step", "compute_cpu_s", "heldout_mean",
"heldout_se"}`` (training compute so far, held-out score there). DESIGN's speedup reads the
compute at which a mean curve first reaches a target off these points.
"""

from __future__ import annotations

import math

import numpy as np


def crossing(compute: np.ndarray, score: np.ndarray, target: float) -> float | None:
    """The compute at which a curve first reaches ``target`` (linear between points), or None."""
    for i, value in enumerate(score):
        if value >= target:
            if i == 0:
                return float(compute[0])
            frac = (target - score[i - 1]) / (value - score[i - 1])
            return float(compute[i - 1] + frac * (compute[i] - compute[i - 1]))
    return None


def mean_curve(results: list[dict]) -> dict[str, np.ndarray]:
    """Mean over seeds of compute and held-out score at each evaluation point, and the score's SE."""
    compute = np.array([[p["compute_cpu_s"] for p in r["curve"]] for r in results])
    score = np.array([[p["heldout_mean"] for p in r["curve"]] for r in results])
    if len(results) > 1:
        se = score.std(axis=0, ddof=1) / math.sqrt(len(results))
    else:  # one seed: the SE the evaluation itself reports
        se = np.array([p["heldout_se"] for p in results[0]["curve"]])
    return {"step": np.array([p["step"] for p in results[0]["curve"]]), "compute": compute.mean(axis=0),
            "score": score.mean(axis=0), "se": se}


def draw_curve(ax, curve: dict[str, np.ndarray], label: str) -> None:
    """A mean curve (from :func:`mean_curve`) on a matplotlib axis, with its ± SE band."""
    x, y, se = (np.asarray(curve[k], dtype=float) for k in ("compute", "score", "se"))
    line, = ax.plot(x, y, marker="o", label=label)
    ax.fill_between(x, y - se, y + se, color=line.get_color(), alpha=0.15)
