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
    done: bool


def land(batch: Batch, wait: bool) -> list[str] | None:
    return batch.groups if batch.done or wait else None


def test_a_batch_lands_only_after_every_older_one():
    in_flight = deque([Batch(0, ["a"], done=False), Batch(1, ["b", "c"], done=True)])
    landing = land_in_order(in_flight, land, step=2, max_staleness=4)
    assert landing.trained == [] and landing.dropped == [] and len(in_flight) == 2
    assert landing.metrics()["anchors/in_flight"] == 2 and math.isnan(landing.metrics()["anchors/staleness_mean"])


def test_a_batch_at_the_bound_is_waited_for_and_trains():
    waited = []

    def recording(batch: Batch, wait: bool) -> list[str] | None:
        waited.append((batch.step, wait))
        return land(batch, wait)

    in_flight = deque([Batch(1, ["a"], done=False), Batch(2, ["b"], done=False)])
    landing = land_in_order(in_flight, recording, step=3, max_staleness=2)
    assert waited == [(1, True), (2, False)]  # the batch 2 steps old is waited for; the younger one is not
    assert [(b.step, age) for b, _, age in landing.trained] == [(1, 2)] and landing.dropped == []
    assert landing.metrics()["anchors/staleness_max"] == 2 and landing.metrics()["anchors/in_flight"] == 1


def test_a_batch_older_than_the_bound_calibrates_and_is_dropped():
    in_flight = deque([Batch(0, ["a"], True), Batch(2, ["b", "c"], True), Batch(3, ["d"], False)])
    landing = land_in_order(in_flight, land, step=3, max_staleness=2)
    assert [b.step for b, _ in landing.dropped] == [0]
    assert [(b.step, age) for b, _, age in landing.trained] == [(2, 1)]
    assert [b.step for b, _ in landing.landed] == [0, 2]
    metrics = landing.metrics()
    assert metrics.pop("anchors/wait_s") >= 0
    assert metrics == {"anchors/in_flight": 1.0, "anchors/landed": 3.0, "anchors/staleness_mean": 1.0,
                       "anchors/staleness_max": 1.0, "anchors/dropped_stale": 1.0}


def test_waiting_lands_everything():
    in_flight = deque([Batch(4, ["a"], False), Batch(5, ["b"], False)])
    landing = land_in_order(in_flight, land, step=5, max_staleness=0, wait=True)
    assert [(b.step, age) for b, _, age in landing.trained] == [(5, 0)] and not in_flight
    assert [b.step for b, _ in landing.dropped] == [4]
