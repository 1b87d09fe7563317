"""DSBench relative performance gap."""

import math

import pandas as pd
import pytest

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading import best_possible, grade, mean_rpg, relative_performance_gap
from wmrl_envs.task_spec import TaskSpec


@pytest.mark.parametrize(
    ("p", "g", "b", "higher", "expected"),
    [
        (1.0, 1.0, 0.5, True, 1.0),     # the answers themselves
        (0.5, 1.0, 0.5, True, 0.0),     # the baseline
        (0.75, 1.0, 0.5, True, 0.5),
        (0.3, 1.0, 0.5, True, 0.0),     # worse than the baseline clips to 0
        (0.0, 0.0, 10.0, False, 1.0),   # lower is better: p = g
        (10.0, 0.0, 10.0, False, 0.0),  # p = b
        (2.5, 0.0, 10.0, False, 0.75),
        (12.0, 0.0, 10.0, False, 0.0),  # worse than the baseline
    ],
)
def test_rpg(p, g, b, higher, expected):
    assert relative_performance_gap(p, g, b, higher) == pytest.approx(expected)


@pytest.mark.parametrize("p", [None, math.nan])
def test_missing_score_gives_zero(p):
    assert relative_performance_gap(p, 1.0, 0.5) == 0.0


@pytest.mark.parametrize(
    ("g", "b", "higher"),
    [(0.5, 0.5, True), (0.5, 0.5, False), (0.4, 0.5, True), (0.6, 0.5, False), (math.nan, 0.5, True)],
)
def test_degenerate_or_inverted_gap_is_a_task_error(g, b, higher):
    with pytest.raises(TaskFormatError, match="RPG"):
        relative_performance_gap(0.5, g, b, higher)


def test_mean_rpg_counts_missing_tasks_as_zero():
    assert mean_rpg([1.0, 0.5, None, math.nan]) == pytest.approx(0.375)
    with pytest.raises(ValueError, match="at least one"):
        mean_rpg([])


def test_rpg_from_grader_scores_on_a_lower_is_better_metric():
    spec = TaskSpec(id="t", name="t", suite="dsbench", env_id="x", split="heldout", metric="rmse",
                    task_type="regression")
    answers = pd.DataFrame({"id": [1, 2, 3, 4], "target": [1.0, 2.0, 3.0, 6.0]})
    g = best_possible(answers, spec)
    b = grade(answers.assign(target=answers["target"].mean()), answers, spec)  # predict the mean
    p = grade(answers.assign(target=[1.0, 2.0, 3.0, 4.0]), answers, spec)
    assert g == 0.0
    assert b == pytest.approx(math.sqrt((4 + 1 + 0 + 9) / 4))  # mean is 3
    assert relative_performance_gap(g, g, b, higher_is_better=False) == 1.0
    assert relative_performance_gap(b, g, b, higher_is_better=False) == 0.0
    assert relative_performance_gap(p, g, b, higher_is_better=False) == pytest.approx(1 - 1.0 / b)
