"""DSBench's relative performance gap (RPG).

``RPG = max(0, (p - b) / (g - b))`` with ``p`` the agent's score, ``g`` the answers graded
against themselves (:func:`wmrl_envs.grading.grader.best_possible`) and ``b`` a trivial
baseline's score. The ratio needs no direction flip: for a lower-is-better metric both
``p - b`` and ``g - b`` are negative when ``p`` improves on ``b``, so ``p = g`` still gives 1
and ``p = b`` gives 0. The direction is used to check that ``g`` really beats ``b``. A score
better than ``g`` (possible only where ``g`` is not the metric's optimum) yields a value above 1;
it is not capped, as in DSBench.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from wmrl_envs.errors import TaskFormatError


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def relative_performance_gap(p: float | None, g: float, b: float, higher_is_better: bool = True) -> float:
    """``max(0, (p - b) / (g - b))``; a missing ``p`` (failed or invalid run) gives 0.

    Raises :class:`TaskFormatError` when ``g`` or ``b`` is not finite or ``g`` does not
    strictly beat ``b`` in the metric's direction (the gap would be undefined or inverted).
    """
    if not (math.isfinite(g) and math.isfinite(b)):
        raise TaskFormatError(f"RPG needs finite best and baseline scores, got g={g!r}, b={b!r}")
    if not (g > b if higher_is_better else g < b):
        direction = "higher" if higher_is_better else "lower"
        raise TaskFormatError(
            f"RPG is undefined: the best score g={g!r} must be strictly better ({direction} is better) "
            f"than the baseline b={b!r}"
        )
    if _missing(p):
        return 0.0
    return max(0.0, (float(p) - b) / (g - b))


def mean_rpg(values: Iterable[float | None]) -> float:
    """Mean RPG over tasks (DSBench's aggregate); a missing value counts as a failed task, 0."""
    gaps = [0.0 if _missing(v) else float(v) for v in values]
    if not gaps:
        raise ValueError("mean_rpg needs at least one task's RPG")
    return sum(gaps) / len(gaps)
