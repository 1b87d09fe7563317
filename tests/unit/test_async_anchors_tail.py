"""The tail reading of the asynchronous-anchors bench (``bench.async_anchors.tail_readings``): how much
of a run's wall its last step holds, and the critical path a late slow anchor sets."""

from __future__ import annotations

import pytest

from bench.async_anchors import LANDING, tail_readings


def run(seed: int, bound: int, steps: list[float], cpu_bound: float) -> dict:
    return {"seed": seed, "max_staleness": bound, "landing": LANDING, "step_wall_s": steps,
            "train_wall_s": sum(steps), "cpu_bound_wall_s": cpu_bound}


def test_a_slow_anchor_in_the_last_steps_sets_the_critical_path():
    # Bound 0: step 2's anchor took 88 s beyond a typical 2 s step. Bound 8: the run reaches step 2 at
    # 4 s and waits for that anchor at its last step.
    synchronous = run(3, 0, [2.0, 2.0, 90.0, 2.0, 2.0], cpu_bound=40.0)
    asynchronous = run(3, 8, [2.0, 2.0, 2.0, 2.0, 88.0], cpu_bound=40.0)
    [tail] = tail_readings([synchronous, asynchronous])
    assert tail["critical_path_s"] == pytest.approx(4.0 + 88.0)
    assert (tail["last_step_s"], tail["slowest_earlier_step_s"]) == (88.0, 2.0)
    assert tail["longest_synchronous_step"] == 2 and tail["longest_synchronous_step_s"] == 90.0
    assert tail["wall_over_attainable"] == pytest.approx(96.0 / 92.0)
    assert tail["best_speedup"] == pytest.approx(98.0 / 92.0)  # the most any schedule could win here


def test_without_slow_anchors_the_cpu_bound_is_what_is_attainable_and_unpaired_runs_are_left_out():
    synchronous = run(5, 0, [3.0] * 6, cpu_bound=12.0)
    asynchronous = run(5, 4, [2.0] * 6, cpu_bound=12.0)
    lone = run(6, 4, [2.0] * 6, cpu_bound=12.0)  # no bound-0 run of its seed beside it
    former = {**run(5, 2, [2.0] * 6, cpu_bound=12.0), "landing": "as ready (before 2026-12-06)"}
    [tail] = tail_readings([synchronous, asynchronous, lone, former])
    assert tail["seed"] == 5 and tail["max_staleness"] == 4
    assert tail["critical_path_s"] == pytest.approx(10.0)  # the last start, no anchor beyond a typical step
    assert tail["wall_over_attainable"] == pytest.approx(1.0) and tail["best_speedup"] == pytest.approx(1.5)
