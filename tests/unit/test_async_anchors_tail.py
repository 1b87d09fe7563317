"""The tail reading of the asynchronous-anchors bench (``bench.async_anchors.tail_readings``): how much
of a run's wall its last step holds, and the critical path a late slow anchor sets."""

from __future__ import annotations

import pytest

from bench.async_anchors import LANDING, SKIPPED, markdown, summarise, tail_readings


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


def test_skipping_runs_are_a_rule_of_their_own_read_against_the_bound_0_runs_beside_them():
    def full(seed, bound, wall, landing=LANDING):
        return {**run(seed, bound, [wall / 4] * 4, cpu_bound=wall / 2), "landing": landing, "job_wall_s": wall,
                "train_cpu_s": wall, "heldout_trained": 0.6, "calibrator_pairs": 10.0, "dropped_stale_groups": 0.0,
                "staleness_samples": {"0": 4}, "cores": 2}
    runs = [full(50, 0, 200.0), full(50, 8, 160.0), full(50, 8, 100.0, LANDING + SKIPPED),
            full(51, 0, 300.0), full(51, 8, 150.0, LANDING + SKIPPED)]
    rows = {(r["landing"], r["max_staleness"]): r for r in summarise(runs)}
    assert set(rows) == {(LANDING, 0), (LANDING, 8), (LANDING + SKIPPED, 8)}
    assert rows[(LANDING + SKIPPED, 8)]["seeds"] == [50, 51]
    assert rows[(LANDING + SKIPPED, 8)]["speedup_vs_synchronous"][0] == pytest.approx((2.0 + 2.0) / 2)
    assert rows[(LANDING, 8)]["speedup_vs_synchronous"][0] == pytest.approx(200.0 / 160.0)
    assert [t["max_staleness"] for t in tail_readings(runs)] == [8]  # the path reads late anchors a skip never runs
    assert "--final-anchors skip" in markdown(summarise(runs), runs, "async_anchors_skip")
