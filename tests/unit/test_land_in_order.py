"""Landing asynchronous anchor batches in order, within a staleness bound (``land_in_order``)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from wmrl_envs.scoring import land_in_order


@dataclass
class Batch:
    step: int
    groups: list[str]


class Sandbox:
    """Lands a batch as a blocking ``core.land`` does, and records which batches it was asked for."""

    def __init__(self) -> None:
        self.landed_steps: list[int] = []

    def __call__(self, batch: Batch) -> list[str]:
        self.landed_steps.append(batch.step)
        return batch.groups


def test_a_batch_younger_than_the_bound_never_lands():
    # Landing on arrival would make the step a batch trains at depend on the machine's timing.
    sandbox = Sandbox()
    in_flight = deque([Batch(1, ["a"]), Batch(2, ["b", "c"])])
    landing = land_in_order(in_flight, sandbox, step=2, max_staleness=2)
    assert sandbox.landed_steps == [] and landing.trained == [] and landing.dropped == [] and len(in_flight) == 2
    assert landing.metrics()["anchors/in_flight"] == 2 and math.isnan(landing.metrics()["anchors/staleness_mean"])


def test_a_batch_at_the_bound_is_waited_for_and_trains():
    sandbox = Sandbox()
    in_flight = deque([Batch(1, ["a"]), Batch(2, ["b"])])
    landing = land_in_order(in_flight, sandbox, step=3, max_staleness=2)
    assert sandbox.landed_steps == [1]  # the batch 2 steps old is waited for; the younger one is left alone
    assert [(b.step, age) for b, _, age in landing.trained] == [(1, 2)] and landing.dropped == []
    assert landing.metrics()["anchors/staleness_max"] == 2 and landing.metrics()["anchors/in_flight"] == 1


def test_every_batch_trains_at_exactly_the_bound_over_a_run():
    sandbox, in_flight, ages = Sandbox(), deque(), []
    for step in range(6):
        in_flight.append(Batch(step, [f"g{step}"]))
        landing = land_in_order(in_flight, sandbox, step=step, max_staleness=2, wait=step == 5)
        ages += [(b.step, age) for b, _, age in landing.trained]
    assert ages == [(0, 2), (1, 2), (2, 2), (3, 2), (4, 1), (5, 0)]  # the last step lands the rest
    assert sandbox.landed_steps == [0, 1, 2, 3, 4, 5] and not in_flight


def test_a_batch_older_than_the_bound_calibrates_and_is_dropped():
    in_flight = deque([Batch(0, ["a"]), Batch(2, ["b", "c"]), Batch(3, ["d"])])
    landing = land_in_order(in_flight, Sandbox(), step=3, max_staleness=1)
    assert [b.step for b, _ in landing.dropped] == [0]
    assert [(b.step, age) for b, _, age in landing.trained] == [(2, 1)]
    assert [b.step for b, _ in landing.landed] == [0, 2]
    metrics = landing.metrics()
    assert metrics.pop("anchors/wait_s") >= 0
    assert metrics == {"anchors/in_flight": 1.0, "anchors/landed": 3.0, "anchors/staleness_mean": 1.0,
                       "anchors/staleness_max": 1.0, "anchors/dropped_stale": 1.0}


def test_waiting_lands_everything():
    in_flight = deque([Batch(4, ["a"]), Batch(5, ["b"])])
    landing = land_in_order(in_flight, Sandbox(), step=5, max_staleness=0, wait=True)
    assert [(b.step, age) for b, _, age in landing.trained] == [(5, 0)] and not in_flight
    assert [b.step for b, _ in landing.dropped] == [4]
