"""Leaderboards: MLE-Dojo position score, MLE-bench medals and above-median.

Scores are held best-first in the metric's direction; the row order of a leaderboard file is
never trusted. Conventions:

* **Position** (MLE-Dojo): ``1 + i`` for the first 0-based index ``i`` in the best-first board
  whose score the new score beats or ties, else ``N + 1``. A tie therefore takes the better
  place. ``position_score = (N - position + 1) / N`` lies in [0, 1]: beating or tying the
  best entry gives 1, losing to every entry gives 0.
* **Medals** (MLE-bench): :func:`medal_ranks` gives the gold/silver/bronze rank thresholds by
  board size N. A rank threshold ``r`` becomes the score threshold ``scores[r - 1]`` (the entry
  at rank ``r``), and a medal is awarded when the score beats or ties it, best medal first.
  A threshold rank of 0 (e.g. silver on a board of 4) means that medal cannot be won.
* **Above median** is strict: the score must beat the median of the board's scores.
* A missing score (``None`` or NaN, i.e. no valid submission) ranks ``N + 1``, scores 0 and
  wins nothing.
* **Files** (:meth:`Leaderboard.from_csv`): any CSV with a ``score`` column. Wholly blank rows
  (Kaggle exports have them) are dropped and counted in :attr:`Leaderboard.blank_rows`; an empty
  score in a row that is otherwise filled is an error, as is a Git LFS pointer in place of the
  file (MLE-bench keeps its boards in Git LFS).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from wmrl_envs.errors import TaskFormatError, preview

Medal = Literal["gold", "silver", "bronze"]
# What a file checked into Git LFS holds until `git lfs pull` fetches it.
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def medal_ranks(n: int) -> tuple[int, int, int]:
    """MLE-bench's (gold, silver, bronze) rank thresholds for a board of ``n`` entries."""
    if n < 1:
        raise ValueError(f"a leaderboard needs at least one entry, got n={n}")
    if n < 100:
        return max(1, int(0.1 * n)), int(0.2 * n), int(0.4 * n)
    if n < 250:
        return 10, int(0.2 * n), int(0.4 * n)
    if n < 1000:
        return 10 + int(0.002 * n), 50, 100
    return 10 + int(0.002 * n), int(0.05 * n), int(0.1 * n)


def _missing(score: float | None) -> bool:
    return score is None or math.isnan(score)


class Leaderboard:
    """A leaderboard of finite scores, held best-first for the given metric direction."""

    def __init__(self, scores: Iterable[float], higher_is_better: bool, *, blank_rows: int = 0) -> None:
        values = np.asarray(list(scores), dtype=float)
        if values.size == 0:
            raise TaskFormatError("leaderboard is empty")
        if not np.isfinite(values).all():
            raise TaskFormatError(f"leaderboard has {int((~np.isfinite(values)).sum())} non-finite score(s)")
        self.higher_is_better = bool(higher_is_better)
        #: Wholly blank rows of the file the board was read from, dropped (not entries).
        self.blank_rows = int(blank_rows)
        # Sorting a direction-adjusted key ascending puts the best entry first in both
        # directions and lets position() use a binary search.
        self._keys = np.sort(self._key(values))
        self._keys.setflags(write=False)

    def _key(self, score: Any) -> Any:
        return -score if self.higher_is_better else score

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str], higher_is_better: bool) -> Leaderboard:
        """Read a board with a ``score`` column: ``rank,score``, MLE-Dojo or MLE-bench files."""
        path = Path(path)
        try:
            with path.open("rb") as fh:
                head = fh.read(len(_LFS_POINTER))
            frame = pd.read_csv(path)
        except FileNotFoundError as exc:
            raise TaskFormatError(f"leaderboard file not found: {path}") from exc
        except pd.errors.EmptyDataError as exc:
            raise TaskFormatError(f"leaderboard file is empty: {path}") from exc
        except pd.errors.ParserError as exc:
            raise TaskFormatError(f"leaderboard file is not a parseable CSV: {path}") from exc
        if head == _LFS_POINTER:
            raise TaskFormatError(f"leaderboard {path} is a Git LFS pointer, not the board: run `git lfs pull` in the "
                                  "repository it came from (for MLE-bench, its checkout) and copy the file again")
        score_columns = [c for c in frame.columns if str(c).strip().lower() == "score"]
        if not score_columns:
            raise TaskFormatError(f"leaderboard {path} has no 'score' column; columns are {preview(frame.columns)}")
        blank = frame.isna().all(axis=1)
        frame = frame[~blank]
        raw = frame[score_columns[0]]
        if len(raw) == 0:
            raise TaskFormatError(f"leaderboard {path} has no entries")
        empty = raw.isna()
        if empty.any():
            raise TaskFormatError(
                f"leaderboard {path} has {int(empty.sum())} row(s) with an empty score but other fields filled "
                f"(data rows {preview(np.flatnonzero(empty.to_numpy()) + 1, 3)} after dropping blank rows); "
                "fill in their scores or delete the rows"
            )
        numbers = pd.to_numeric(raw, errors="coerce")
        bad = numbers.isna() | ~np.isfinite(numbers.to_numpy(float))
        if bad.any():
            raise TaskFormatError(
                f"leaderboard {path} has {int(bad.sum())} non-numeric or non-finite score(s), "
                f"e.g. {preview(raw[bad], 3)}"
            )
        return cls(numbers.to_numpy(float), higher_is_better, blank_rows=int(blank.sum()))

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        """Write ``rank,score`` best first (rank = 1-based row number)."""
        scores = self.scores
        pd.DataFrame({"rank": np.arange(1, len(scores) + 1), "score": scores}).to_csv(path, index=False)

    @property
    def scores(self) -> np.ndarray:
        """The scores, best first (a read-only copy)."""
        scores = self._key(self._keys).astype(float)
        scores.setflags(write=False)
        return scores

    @property
    def n(self) -> int:
        return int(self._keys.size)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        direction = "higher" if self.higher_is_better else "lower"
        return f"Leaderboard(n={self.n}, best={self.scores[0]!r}, {direction}_is_better)"

    def beats_or_ties(self, a: float, b: float) -> bool:
        """Whether score ``a`` is at least as good as ``b`` in the board's direction."""
        return a >= b if self.higher_is_better else a <= b

    def beats(self, a: float, b: float) -> bool:
        """Whether score ``a`` is strictly better than ``b`` in the board's direction."""
        return a > b if self.higher_is_better else a < b

    def position(self, score: float | None) -> int:
        """1-based place the score would take (ties take the better place); ``N + 1`` if last."""
        if _missing(score):
            return self.n + 1
        # First i with key(score) <= keys[i], i.e. the score beats or ties entry i.
        return int(np.searchsorted(self._keys, self._key(float(score)), side="left")) + 1

    def position_score(self, score: float | None) -> float:
        """MLE-Dojo's ``(N - position + 1) / N`` in [0, 1]; a missing score gives 0."""
        return (self.n - self.position(score) + 1) / self.n

    def medal(self, score: float | None) -> Medal | None:
        """``"gold"``, ``"silver"``, ``"bronze"`` or ``None`` under MLE-bench's thresholds."""
        if _missing(score):
            return None
        scores = self.scores
        medals: tuple[Medal, ...] = ("gold", "silver", "bronze")
        for name, rank in zip(medals, medal_ranks(self.n)):
            if rank >= 1 and self.beats_or_ties(float(score), float(scores[rank - 1])):
                return name
        return None

    @property
    def median(self) -> float:
        return float(np.median(self._keys) * (-1 if self.higher_is_better else 1))

    def above_median(self, score: float | None) -> bool:
        """Whether the score strictly beats the board's median score."""
        if _missing(score):
            return False
        return self.beats(float(score), self.median)

    def report(self, score: float | None) -> dict[str, Any]:
        """Position, position score, medal and above-median of one score, plus the board size."""
        return {
            "position": self.position(score),
            "position_score": self.position_score(score),
            "medal": self.medal(score),
            "above_median": self.above_median(score),
            "n": self.n,
        }
