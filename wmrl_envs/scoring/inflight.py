"""Anchors in flight: anchor groups predicted at once and executed in the background (issue 47).

An asynchronous scoring call (:meth:`ScoringCore.score_async`) answers the world-model groups
of a batch at once and submits its anchor groups' scripts to the sandbox pool. Their
:class:`InFlightAnchors` record holds what landing needs: the groups, their samples as
predicted at submission (the calibrator's pair uses that prediction), which samples run, and
the runs' futures. Landing (:meth:`ScoringCore.land`) grades the finished runs, teaches the
scorer, feeds the calibrator and sets the rewards, in submission order, so the calibrator's state
does not depend on which run finished first.

A record pickles without its futures (a checkpoint of a run with anchors in flight): a restored
record is submitted again (:attr:`InFlightAnchors.needs_submission`), so a killed run loses and
duplicates nothing. A run that has not returned ``timeout_s`` after its submission is an
infrastructure failure, never a reward.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from wmrl_envs.scoring.results import ScoredGroup


@dataclass
class InFlightAnchors:
    """One batch's anchor groups, submitted for execution and not yet landed.

    Attributes:
        tag: What the caller knows the batch by (the trainer's step); carried, never read here.
        groups: The anchor groups' code (:class:`~wmrl_envs.scoring.code.CodeGroup`).
        scored: Their samples, world-model scored at submission; the runs fill them in on landing.
        items: ``(group index, sample index)`` of every sample that runs.
        uncorrected: The world model's raw score of a run sample before a neighbour correction.
        timeout_s: Seconds after submission at which a run that has not returned is an
            infrastructure failure (None: wait for the sandbox's own limits).
    """

    tag: Hashable
    groups: list[Any]
    scored: list[ScoredGroup]
    items: list[tuple[int, int]]
    uncorrected: Mapping[tuple[int, int], float]
    timeout_s: float | None = None
    futures: list[Future] | None = field(default=None, repr=False)
    submitted_at: float = field(default=0.0, repr=False)

    @property
    def needs_submission(self) -> bool:
        """Restored from a checkpoint (its runs are not under way here): submit it again."""
        return self.futures is None and bool(self.items)

    def done(self) -> bool:
        """Every run returned, or the batch is past its timeout."""
        if self.futures is None:
            return not self.items
        return all(f.done() for f in self.futures) or self.expired()

    def expired(self) -> bool:
        return self.timeout_s is not None and time.monotonic() - self.submitted_at >= self.timeout_s

    def remaining_s(self) -> float | None:
        """Seconds left before the timeout (None without one)."""
        if self.timeout_s is None:
            return None
        return max(0.0, self.timeout_s - (time.monotonic() - self.submitted_at))

    def __getstate__(self) -> dict[str, Any]:
        # Futures and the monotonic clock mean nothing in another process: the record is submitted again.
        return {**self.__dict__, "futures": None, "submitted_at": 0.0}
