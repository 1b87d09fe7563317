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
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from wmrl_envs.scoring.results import ScoredGroup


@dataclass
class InFlightAnchors:
    """One batch's anchor groups, submitted for execution and not yet landed (an evaluation's
    real runs travel in the same record: :meth:`~wmrl_envs.scoring.code.CodeScorer.execute_submitting`).

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


class StepBatch(Protocol):
    """A batch in flight as a trainer holds it: the step it was generated at."""

    step: int


@dataclass
class Landing:
    """What landed at one step (:func:`land_in_order`), each batch with its landed groups.

    Attributes:
        trained: Batches at most ``max_staleness`` steps old, with their groups and age: they train.
        dropped: Batches that landed older than that (they still calibrated on landing).
        in_flight: How many batches are still under way after this step.
        wait_s: Seconds the step waited for batches at the bound.
    """

    trained: list[tuple[Any, Sequence[Any], int]] = field(default_factory=list)
    dropped: list[tuple[Any, Sequence[Any]]] = field(default_factory=list)
    in_flight: int = 0
    wait_s: float = 0.0

    @property
    def landed(self) -> list[tuple[Any, Sequence[Any]]]:
        """Every batch that landed at this step, oldest first."""
        return sorted([(batch, groups) for batch, groups, _ in self.trained] + self.dropped,
                      key=lambda pair: pair[0].step)

    def metrics(self) -> dict[str, float]:
        """``anchors/*``: batches in flight; groups landed and dropped as too stale; the trained
        groups' staleness; the seconds the step waited for the sandbox."""
        ages = [age for _, groups, age in self.trained for _ in groups]
        return {"anchors/in_flight": float(self.in_flight),
                "anchors/landed": float(sum(len(groups) for _, groups in self.landed)),
                "anchors/staleness_mean": float(sum(ages) / len(ages)) if ages else float("nan"),
                "anchors/staleness_max": float(max(ages)) if ages else float("nan"),
                "anchors/dropped_stale": float(sum(len(groups) for _, groups in self.dropped)),
                "anchors/wait_s": self.wait_s}


def land_in_order(in_flight: deque, land: Callable[[Any], Sequence[Any]], step: int,
                  max_staleness: int, wait: bool = False) -> Landing:
    """Land a trainer's batches in flight, oldest first, at step ``step``.

    A batch lands when it is ``max_staleness`` steps old, never earlier, and the step waits for it
    if its runs are still under way: so its anchors train exactly that late, whatever the
    sandbox's speed, and a run is reproducible (a batch that landed as soon as its runs returned
    would train at a step that depends on the machine's timing). A sandbox slower than training
    slows the steps down instead of wasting its runs (what the bounded staleness of asynchronous
    RL trainers does: they pause generation). Batches land in submission order, so the calibrator
    learns in that order. A batch older than the bound (one a resumed run submitted again)
    calibrates and is dropped. ``land(batch)`` blocks until the batch's runs returned (or timed
    out) and returns its landed groups; ``wait`` lands every batch now (a run's last step). Landed
    batches leave ``in_flight``.
    """
    landing = Landing()
    while in_flight:
        oldest: StepBatch = in_flight[0]
        age = step - oldest.step
        if not wait and age < max_staleness:
            break
        started = time.perf_counter()
        groups = land(oldest)
        landing.wait_s += time.perf_counter() - started
        in_flight.popleft()
        if age <= max_staleness:
            landing.trained.append((oldest, groups, age))
        else:
            landing.dropped.append((oldest, groups))
    landing.in_flight = len(in_flight)
    return landing
