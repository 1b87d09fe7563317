"""Leaderboard: position score (MLE-Dojo), medals and above-median (MLE-bench), CSV I/O."""

import math

import numpy as np
import pandas as pd
import pytest

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading import Leaderboard, medal_ranks

# Best-first: 0.9, 0.8, 0.8, 0.7 (given out of order on purpose).
HIGHER = Leaderboard([0.8, 0.7, 0.9, 0.8], higher_is_better=True)
# Best-first: 0.1, 0.2, 0.2, 0.3
LOWER = Leaderboard([0.2, 0.3, 0.1, 0.2], higher_is_better=False)


def test_scores_are_held_best_first_in_the_metric_direction():
    assert HIGHER.scores.tolist() == [0.9, 0.8, 0.8, 0.7]
    assert LOWER.scores.tolist() == [0.1, 0.2, 0.2, 0.3]
    assert len(HIGHER) == HIGHER.n == 4


@pytest.mark.parametrize(
    ("score", "position", "position_score"),
    [
        (0.95, 1, 1.0),   # better than all
        (0.9, 1, 1.0),    # ties the best
        (0.85, 2, 0.75),
        (0.8, 2, 0.75),   # ties take the better place
        (0.75, 4, 0.25),
        (0.7, 4, 0.25),   # ties the worst
        (0.6, 5, 0.0),    # worse than all
    ],
)
def test_position_higher_is_better(score, position, position_score):
    assert HIGHER.position(score) == position
    assert HIGHER.position_score(score) == position_score


@pytest.mark.parametrize(
    ("score", "position", "position_score"),
    [(0.05, 1, 1.0), (0.1, 1, 1.0), (0.15, 2, 0.75), (0.2, 2, 0.75), (0.25, 4, 0.25), (0.3, 4, 0.25), (0.4, 5, 0.0)],
)
def test_position_lower_is_better(score, position, position_score):
    assert LOWER.position(score) == position
    assert LOWER.position_score(score) == position_score


@pytest.mark.parametrize("higher", [True, False])
def test_single_entry_board(higher):
    board = Leaderboard([0.5], higher_is_better=higher)
    better, worse = (0.6, 0.4) if higher else (0.4, 0.6)
    assert board.position_score(0.5) == 1.0
    assert board.position_score(better) == 1.0
    assert board.position(worse) == 2
    assert board.position_score(worse) == 0.0


@pytest.mark.parametrize("missing", [None, float("nan")])
def test_missing_score_scores_zero_and_wins_nothing(missing):
    assert HIGHER.position(missing) == 5
    assert HIGHER.position_score(missing) == 0.0
    assert HIGHER.medal(missing) is None
    assert HIGHER.above_median(missing) is False


def test_position_score_matches_the_formula_on_a_tied_board():
    board = Leaderboard([3, 3, 3, 1, 1], higher_is_better=True)
    assert [board.position(s) for s in (4, 3, 2, 1, 0)] == [1, 1, 4, 4, 6]
    assert board.position_score(2) == pytest.approx((5 - 4 + 1) / 5)


@pytest.mark.parametrize(
    ("n", "ranks"),
    [(1, (1, 0, 0)), (4, (1, 0, 1)), (10, (1, 2, 4)), (50, (5, 10, 20)), (99, (9, 19, 39)),
     (100, (10, 20, 40)), (150, (10, 30, 60)), (249, (10, 49, 99)), (250, (10, 50, 100)),
     (500, (11, 50, 100)), (999, (11, 50, 100)), (1000, (12, 50, 100)), (2000, (14, 100, 200))],
)
def test_medal_ranks(n, ranks):
    assert medal_ranks(n) == ranks


@pytest.mark.parametrize("n", [10, 50, 150, 500, 2000])
@pytest.mark.parametrize("higher", [True, False])
def test_medals_at_threshold_boundaries(n, higher):
    # Distinct integer scores: the entry at rank r scores n - r + 1 (higher) or r (lower).
    scores = np.arange(1, n + 1, dtype=float)
    board = Leaderboard(scores, higher_is_better=higher)

    def at_rank(r):
        return float(n - r + 1) if higher else float(r)

    def just_worse_than_rank(r):
        return at_rank(r) - 0.5 if higher else at_rank(r) + 0.5

    gold, silver, bronze = medal_ranks(n)
    assert board.medal(at_rank(1)) == "gold"
    assert board.medal(at_rank(gold)) == "gold"
    assert board.medal(just_worse_than_rank(gold)) == "silver"
    assert board.medal(at_rank(silver)) == "silver"
    assert board.medal(just_worse_than_rank(silver)) == "bronze"
    assert board.medal(at_rank(bronze)) == "bronze"
    assert board.medal(just_worse_than_rank(bronze)) is None
    assert board.medal(at_rank(n)) is None


def test_a_medal_whose_rank_threshold_is_zero_cannot_be_won():
    board = Leaderboard([4, 3, 2, 1], higher_is_better=True)  # ranks (1, 0, 1)
    assert board.medal(4) == "gold"
    assert board.medal(3.5) is None
    assert board.medal(3) is None


@pytest.mark.parametrize(
    ("scores", "higher", "median", "strictly_better", "not_better"),
    [
        ([1, 2, 3, 4, 5], True, 3.0, 3.01, 3.0),
        ([1, 2, 3, 4], True, 2.5, 2.6, 2.5),
        ([1, 2, 3, 4, 5], False, 3.0, 2.99, 3.0),
    ],
)
def test_above_median_is_strict(scores, higher, median, strictly_better, not_better):
    board = Leaderboard(scores, higher_is_better=higher)
    assert board.median == median
    assert board.above_median(strictly_better) is True
    assert board.above_median(not_better) is False


def test_report():
    assert HIGHER.report(0.85) == {
        "position": 2, "position_score": 0.75, "medal": None, "above_median": True, "n": 4,
    }
    assert HIGHER.report(0.9)["medal"] == "gold"


def test_invalid_boards_raise_task_format_error():
    with pytest.raises(TaskFormatError, match="empty"):
        Leaderboard([], higher_is_better=True)
    with pytest.raises(TaskFormatError, match="non-finite"):
        Leaderboard([0.5, math.inf], higher_is_better=True)
    with pytest.raises(TaskFormatError, match="non-finite"):
        Leaderboard([0.5, math.nan], higher_is_better=True)


def test_csv_round_trip_writes_rank_score_best_first(tmp_path):
    path = tmp_path / "leaderboard.csv"
    LOWER.to_csv(path)
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["rank", "score"]
    assert frame["rank"].tolist() == [1, 2, 3, 4]
    # Scores written as text and parsed back: compared as floats, not bit for bit.
    assert frame["score"].tolist() == pytest.approx([0.1, 0.2, 0.2, 0.3], rel=1e-12)
    assert Leaderboard.from_csv(path, higher_is_better=False).scores.tolist() == pytest.approx(
        LOWER.scores.tolist(), rel=1e-12)


def test_from_csv_never_trusts_row_order(tmp_path):
    # A file sorted the wrong way for the metric: the direction comes from the metric.
    path = tmp_path / "public_leaderboard.csv"
    path.write_text("rank,score\n1,0.1\n2,0.5\n3,0.9\n")
    board = Leaderboard.from_csv(path, higher_is_better=True)
    assert board.scores.tolist() == [0.9, 0.5, 0.1]
    assert board.position(0.6) == 2


def test_from_csv_reads_mle_bench_style_boards(tmp_path):
    path = tmp_path / "leaderboard.csv"
    path.write_text(
        "teamId,teamName,score,submissionDate\n"
        "7,alpha,0.91,2020-01-01\n8,beta,0.95,2020-01-02\n9,gamma,0.80,2020-01-03\n"
    )
    board = Leaderboard.from_csv(path, higher_is_better=True)
    assert board.scores.tolist() == [0.95, 0.91, 0.80]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("rank,points\n1,0.5\n", "no 'score' column"),
        ("rank,score\n", "no entries"),
        ("", "empty"),
        ("rank,score\n1,0.5\n2,\n", r"1 row\(s\) with an empty score but other fields filled \(data rows \[2\]"),
        ("rank,score\n,\n,\n", "no entries"),
        ("rank,score\n1,0.5\n2,inf\n", "non-finite"),
        ("rank,score\n1,0.5\n2,abc\n", "non-numeric"),
    ],
)
def test_from_csv_rejects_broken_boards(tmp_path, content, fragment):
    path = tmp_path / "leaderboard.csv"
    path.write_text(content)
    with pytest.raises(TaskFormatError, match=fragment):
        Leaderboard.from_csv(path, higher_is_better=True)


def test_from_csv_drops_and_counts_wholly_blank_rows(tmp_path):
    path = tmp_path / "leaderboard.csv"
    path.write_text("teamId,score\n1,0.9\n,\n2,0.7\n,\n")
    board = Leaderboard.from_csv(path, higher_is_better=True)
    assert board.scores.tolist() == [0.9, 0.7] and board.blank_rows == 2


def test_from_csv_missing_file(tmp_path):
    with pytest.raises(TaskFormatError, match="not found"):
        Leaderboard.from_csv(tmp_path / "nope.csv", higher_is_better=True)
