"""The registered reading of issue 47's confirmation (``bench.async_anchors_confirm``): the rule's
one-sided bounds and verdicts, on made-up runs, and the committed reading from the committed archive."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import async_anchors_confirm as confirm
from bench.archive import read_runs
from bench.async_anchors import LANDING, SKIPPED

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def runs(speedups, over_bound, held_0, held_8, skip=True) -> list[dict]:
    out = []
    for i, seed in enumerate(confirm.SEEDS):
        wall_8 = 100.0
        out.append({"seed": seed, "max_staleness": 0, "landing": LANDING, "train_wall_s": wall_8 * speedups[i],
                    "cpu_bound_wall_s": 50.0, "heldout_trained": held_0[i], "machine": {"dirty": False}})
        out.append({"seed": seed, "max_staleness": confirm.BOUND, "landing": LANDING + (SKIPPED if skip else ""),
                    "train_wall_s": wall_8, "cpu_bound_wall_s": wall_8 / over_bound[i],
                    "heldout_trained": held_8[i], "machine": {"dirty": False}})
    return out


def test_one_sided_bounds_are_the_mean_less_and_plus_t_times_the_standard_error():
    mean, lower, upper = confirm.one_sided([1.0, 2.0, 3.0])
    # t(0.95, 2 df) = 2.920; the SE is 1/sqrt(3).
    assert mean == 2.0 and lower == pytest.approx(2.0 - 2.920 / 3**0.5, abs=1e-3) and upper == pytest.approx(4.0 - lower)


def test_the_rule_holds_on_a_clear_speedup_and_misses_on_a_marginal_one_or_a_lost_score():
    held = [0.6, 0.7, 0.65, 0.62, 0.68, 0.66]
    clear = confirm.reading(runs([1.7, 1.6, 1.8, 1.65, 1.75, 1.7], [1.2] * 6, held, held))
    assert clear["speed_holds"] and clear["score_holds"] and clear["holds"]
    marginal = confirm.reading(runs([1.2, 1.5, 1.3, 1.25, 1.4, 1.35], [1.2, 1.3, 1.1, 1.2, 1.25, 1.15], held, held))
    assert marginal["speedup"][0] > 1.3 and not marginal["speed_holds"] and not marginal["holds"]
    # The wall within 10% of the bound is the other way to pass the speed line.
    at_bound = confirm.reading(runs([1.2] * 6, [1.05, 1.06, 1.04, 1.05, 1.07, 1.05], held, held))
    assert at_bound["speed_holds"]
    lost = confirm.reading(runs([1.7] * 6, [1.1] * 6, held, [h - 0.1 for h in held]))
    assert lost["speed_holds"] and not lost["score_holds"] and "Missed" in confirm.markdown(lost)


def test_a_run_that_did_not_skip_or_a_missing_one_is_refused():
    held = [0.6] * 6
    with pytest.raises(SystemExit, match="did not skip"):
        confirm.reading(runs([1.5] * 6, [1.1] * 6, held, held, skip=False))
    with pytest.raises(SystemExit, match="incomplete"):
        confirm.reading(runs([1.5] * 6, [1.1] * 6, held, held)[:-1])


def test_the_committed_reading_regenerates_from_the_committed_archive():
    read = confirm.reading(list(read_runs(RESULTS / confirm.NAME).values()))
    assert confirm.markdown(read) == (RESULTS / f"{confirm.NAME}_reading.md").read_text()
