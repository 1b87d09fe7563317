"""The bound-coverage precision reading (bench/bound_coverage.py): groups, not pairs, are the unit."""

from __future__ import annotations

import pytest

from bench.bound_coverage import clusters_of, coverage_precision, rows_of


def test_a_runs_fresh_pairs_group_by_step_and_unbounded_pairs_are_left_out():
    record = {"fresh_pairs": [[0, 0.5, 0.4, 0.2], [0, 0.5, 0.9, 0.2], [1, 0.3, 0.3, None],
                              [2, 0.1, 0.2, 0.05], [2, 0.1, 0.1, float("inf")]]}
    assert clusters_of(record) == [(2, 1), (1, 0)]
    assert clusters_of({}) == []


def test_groups_covered_together_have_a_design_effect_near_their_size():
    # 1000 groups of 4 at coverage 0.9: covered all together, or each pair apart (the binomial's
    # frequencies of 4, 3, 2 and 1 covered of 4).
    together = [(4, 4)] * 900 + [(4, 0)] * 100
    apart = [(4, 4)] * 656 + [(4, 3)] * 292 + [(4, 2)] * 49 + [(4, 1)] * 3
    tied, free = coverage_precision(together), coverage_precision(apart)
    assert tied["coverage"] == 0.9 and free["coverage"] == pytest.approx(0.9, abs=0.001)
    assert tied["design_effect"] == pytest.approx(4.0, rel=0.25)
    assert free["design_effect"] == pytest.approx(1.0, rel=0.25)
    assert tied["interval"][1] - tied["interval"][0] > 1.5 * (free["interval"][1] - free["interval"][0])
    # Groups needed for a half-width of 0.03 scale with the interval's width squared.
    assert tied["groups_for_half_width"] > free["groups_for_half_width"]
    assert tied["contains_nominal"] and free["contains_nominal"]


def test_rows_pool_the_seeds_of_each_corruption_and_schedule():
    runs = {f"r{seed}{variant}": {"key": {"mode": "wmrl", "corruption": "none", "strength": None,
                                          "variant": variant}, "fresh_pairs": [[0, 0.5, 0.5, 0.1]] * 4}
            for seed in range(3) for variant in ("", "anchor_choice=informed")}
    runs["real"] = {"key": {"mode": "real", "corruption": "any"}, "fresh_pairs": [[0, 0.5, 0.0, 0.1]]}
    runs["unbounded"] = {"key": {"mode": "wmrl", "corruption": "swap", "strength": 0.3, "variant": ""},
                         "fresh_pairs": [[0, 0.5, 0.4, None]]}  # no pair carried a bound: no row
    rows = rows_of(runs)
    assert set(rows) == {"none, hash", "none, anchor_choice=informed"}
    assert rows["none, hash"]["pairs"] == 12 and rows["none, hash"]["groups"] == 3
    assert rows["none, hash"]["coverage"] == 1.0
