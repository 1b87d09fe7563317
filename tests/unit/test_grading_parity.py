"""Grading parity with MLE-bench, MLE-Dojo and DSBench, each peer's folder built in ``tmp_path``.

Every test builds a folder in the peer's real layout (MLE-bench's ``<competition>/prepared/{public,
private}`` with ``leaderboard.csv`` beside it, MLE-Dojo's ``data/{public,private}``, DSBench's
``data_resplit``, ``task``, ``answers`` and ``save_performance``), loads it with the two-line
``wmrl.yaml`` a user would write, and compares our numbers with what the peer's grader computes:
scikit-learn called the way the peer calls it. Scores are compared up to ``SCORE_RTOL``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import cohen_kappa_score, log_loss

from wmrl_envs.errors import InvalidSubmissionError, TaskFormatError
from wmrl_envs.grading import best_possible, grade, task_leaderboards, task_reward
from wmrl_envs.grading.conventions import conventions
from wmrl_envs.tasks import get_task, load_task
from wmrl_envs.tasks.build.lock import SCORE_RTOL
from wmrl_envs.tasks.cli import task_summary

AUTHORS = ("EAP", "HPL", "MWS")
TWO_LINES = {"metric": "multiclass_log_loss", "task_type": "multiclass"}


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def kaggle_board(scores) -> pd.DataFrame:
    """A leaderboard as MLE-bench ships it: Kaggle's export, best first, many columns."""
    n = len(scores)
    return pd.DataFrame({"scoreNullable": scores, "teamId": range(1, n + 1), "hasTeamName": True,
                         "submissionDate": "2019-07-01", "score": scores, "hasScore": True})


def mlebench_competition(root: Path, competition: str, answers: pd.DataFrame, sample: pd.DataFrame,
                         overlay: dict | None, board: pd.DataFrame | None = None) -> Path:
    """``<root>/<competition>``: MLE-bench's prepared data plus its repository's leaderboard.csv."""
    folder = root / competition
    public, private = folder / "prepared" / "public", folder / "prepared" / "private"
    write_csv(public / "sample_submission.csv", sample)
    write_csv(public / "test.csv", sample[[sample.columns[0]]])
    (public / "description.md").write_text(f"# {competition}\n")
    write_csv(private / "test.csv", answers)
    write_csv(folder / "leaderboard.csv", kaggle_board([0.9, 0.5, 0.3]) if board is None else board)
    if overlay is not None:
        (folder / "wmrl.yaml").write_text(yaml.safe_dump(overlay))
    return folder


def mledojo_competition(root: Path, competition: str, answers: pd.DataFrame, sample: pd.DataFrame,
                        overlay: dict, board: pd.DataFrame) -> Path:
    """``<root>/<competition>``: MLE-Dojo's ``data/public`` and ``data/private`` with its boards."""
    folder = root / competition
    public, private = folder / "data" / "public", folder / "data" / "private"
    write_csv(public / "sample_submission.csv", sample)
    (public / "description.txt").write_text(f"{competition}\n")
    write_csv(private / "test_answer.csv", answers)
    write_csv(private / "private_leaderboard.csv", board)
    (folder / "wmrl.yaml").write_text(yaml.safe_dump(overlay))
    return folder


# --- 1. one-hot answers --------------------------------------------------------------------------


def spooky(root: Path, overlay: dict | None = TWO_LINES) -> Path:
    """spooky-author-identification: answers stored one-hot (``id,EAP,HPL,MWS``), as MLE-bench prepares them."""
    ids = [f"id{i:05d}" for i in range(6)]
    authors = ["EAP", "HPL", "MWS", "EAP", "MWS", "HPL"]
    answers = pd.DataFrame({"id": ids, **{a: [int(x == a) for x in authors] for a in AUTHORS}})
    sample = pd.DataFrame({"id": ids, **{a: [1 / 3] * 6 for a in AUTHORS}})
    return mlebench_competition(root, "spooky-author-identification", answers, sample, overlay,
                                kaggle_board([0.16, 0.3, 0.45, 0.7]))


def test_one_hot_answers_load_with_two_lines_and_grade_like_scikit_learn(tmp_path):
    task = load_task(spooky(tmp_path))
    assert task.spec.answer_columns == AUTHORS and task.spec.classes == AUTHORS
    answers = task.answers()
    assert best_possible(answers, task.spec) == pytest.approx(0.0, abs=1e-9)
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3), len(answers))
    submission = pd.DataFrame({"id": answers["id"], **dict(zip(AUTHORS, probabilities.T))})
    # MLE-bench's grader: scikit-learn's log_loss on the one-hot answers, rows matched by id.
    expected = log_loss(answers[list(AUTHORS)].to_numpy(), probabilities)
    assert grade(submission.iloc[::-1], answers, task.spec) == pytest.approx(expected, rel=SCORE_RTOL)


def test_one_hot_answers_named_in_the_overlay_in_any_order_match_by_name(tmp_path):
    task = load_task(spooky(tmp_path, {**TWO_LINES, "answer_columns": ["MWS", "EAP", "HPL"]}))
    answers = task.answers()
    assert best_possible(answers, task.spec) == pytest.approx(0.0, abs=1e-9)
    confident = pd.DataFrame({"id": answers["id"], **{a: answers[a] * 0.9 + 0.1 / 3 for a in AUTHORS}})
    expected = log_loss(answers[list(AUTHORS)].to_numpy(), confident[list(AUTHORS)].to_numpy())
    assert grade(confident, answers, task.spec) == pytest.approx(expected, rel=SCORE_RTOL)


def test_one_hot_answers_with_two_ones_in_a_row_are_a_task_error(tmp_path):
    folder = spooky(tmp_path)
    answers = pd.read_csv(folder / "prepared" / "private" / "test.csv")
    answers.loc[2, "EAP"] = 1
    write_csv(folder / "prepared" / "private" / "test.csv", answers)
    task = load_task(folder)
    with pytest.raises(TaskFormatError, match=r"one-hot.*1 row\(s\)"):
        best_possible(task.answers(), task.spec)


# --- 2. QWK's class set ------------------------------------------------------------------------------


def aptos(root: Path, layout: str, overlay_extra: dict | None = None) -> Path:
    """aptos2019-blindness-detection-like: ratings on a 1-6 scale, the test split lacks 4 and 6."""
    answers = pd.DataFrame({"id_code": ["a", "b", "c", "d"], "diagnosis": [1, 2, 3, 5]})
    sample = pd.DataFrame({"id_code": ["a", "b", "c", "d"], "diagnosis": [1, 1, 1, 1]})
    overlay = {"metric": "qwk", "task_type": "multiclass", **(overlay_extra or {})}
    if layout == "mlebench":
        return mlebench_competition(root, "aptos", answers, sample, overlay)
    if layout == "mledojo":
        return mledojo_competition(root, "aptos", answers, sample, overlay,
                                   pd.DataFrame({"rank": [1, 2], "score": [0.9, 0.5]}))
    write_csv(root / "data_resplit" / "aptos" / "train.csv", pd.DataFrame({"id_code": list("vwxyz"),
                                                                           "diagnosis": [1, 2, 2, 3, 5]}))
    write_csv(root / "data_resplit" / "aptos" / "test.csv", answers[["id_code"]])
    write_csv(root / "data_resplit" / "aptos" / "sample_submission.csv", sample)
    write_csv(root / "answers" / "aptos" / "test_answer.csv", answers)
    (root / "task").mkdir()
    (root / "task" / "aptos.txt").write_text("Rate the images.\n")
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"tasks": {"aptos": overlay}}))
    return root / "data_resplit" / "aptos"


PREDICTED = pd.DataFrame({"id_code": ["d", "c", "b", "a"], "diagnosis": [5, 6, 2, 1]})


@pytest.mark.parametrize("layout", ["mlebench", "mledojo", "dsbench"])
def test_qwk_of_a_foreign_task_uses_the_ratings_present_like_its_grader(tmp_path, layout):
    task = load_task(aptos(tmp_path, layout))
    # The peers' graders call cohen_kappa_score(y_pred, y_true, weights="quadratic"), no labels.
    expected = cohen_kappa_score([1, 2, 6, 5], [1, 2, 3, 5], weights="quadratic")
    assert expected == pytest.approx(0.75)
    assert grade(PREDICTED, task.answers(), task.spec) == pytest.approx(expected, rel=SCORE_RTOL)
    with pytest.raises(InvalidSubmissionError, match="non-numeric"):
        grade(PREDICTED.assign(diagnosis=["5", "x", "2", "1"]), task.answers(), task.spec)


def test_qwk_scale_declared_in_the_overlay_weighs_every_rating_and_rejects_others(tmp_path):
    task = load_task(aptos(tmp_path, "mlebench", {"classes": [1, 2, 3, 4, 5, 6]}))
    expected = cohen_kappa_score([1, 2, 3, 5], [1, 2, 6, 5], labels=[1, 2, 3, 4, 5, 6], weights="quadratic")
    assert grade(PREDICTED, task.answers(), task.spec) == pytest.approx(expected, rel=SCORE_RTOL)
    with pytest.raises(InvalidSubmissionError, match="unknown class label"):
        grade(PREDICTED.assign(diagnosis=[5, 7, 2, 1]), task.answers(), task.spec)


# --- 3. log-loss clipping ---------------------------------------------------------------------------


def dogs_vs_cats(root: Path, meta: dict | None = None) -> Path:
    answers = pd.DataFrame({"id": [1, 2], "label": [1, 0]})
    sample = pd.DataFrame({"id": [1, 2], "label": [0.5, 0.5]})
    overlay = {"metric": "log_loss", "task_type": "binary", **({"meta": meta} if meta else {})}
    return mlebench_competition(root, "dogs-vs-cats-redux-kernels-edition", answers, sample, overlay,
                                kaggle_board([0.03, 0.2, 0.69]))


CERTAIN_MISTAKE = pd.DataFrame({"id": [1, 2], "label": [0.0, 0.0]})


def test_log_loss_clips_at_machine_epsilon_like_current_scikit_learn(tmp_path):
    task = load_task(dogs_vs_cats(tmp_path))
    assert conventions(task.spec).log_loss_eps == np.finfo(np.float64).eps
    assert task_summary(task)["grading_conventions"]["log_loss_eps"] == np.finfo(np.float64).eps
    expected = log_loss([1, 0], [0.0, 0.0])  # scikit-learn >= 1.5, what MLE-bench runs
    assert expected == pytest.approx(18.0218, abs=1e-4)
    assert grade(CERTAIN_MISTAKE, task.answers(), task.spec) == pytest.approx(expected, rel=SCORE_RTOL)


def test_a_task_may_record_kaggles_older_clipping(tmp_path):
    task = load_task(dogs_vs_cats(tmp_path, {"log_loss_eps": 1e-15}))
    assert grade(CERTAIN_MISTAKE, task.answers(), task.spec) == pytest.approx(-math.log(1e-15) / 2, rel=SCORE_RTOL)
    with pytest.raises(TaskFormatError, match="log_loss_eps"):
        load_task(dogs_vs_cats(tmp_path / "bad", {"log_loss_eps": 2}))


def test_builtin_tasks_keep_the_clipping_they_were_generated_and_ranked_with():
    # Their recorded references (the lock) and leaderboards were computed at 1e-15.
    for task_id in ("employee-attrition", "medicare-mortality"):
        assert conventions(get_task(task_id).spec).log_loss_eps == 1e-15


# --- 4. rounding before medals ------------------------------------------------------------------------

# A board of 10: gold at rank 1, silver at rank 2 (MLE-bench's thresholds for N < 100).
CLOSE_BOARD = [0.86364, 0.86362, 0.8636, 0.86, 0.85, 0.84, 0.83, 0.82, 0.81, 0.8]
JUST_BELOW_GOLD = 0.8636362  # 0.86364 once rounded to 5 decimals


def test_mlebench_tasks_round_to_five_decimals_before_ranking(tmp_path):
    answers = pd.DataFrame({"id": [1, 2], "label": [0, 1]})
    sample = pd.DataFrame({"id": [1, 2], "label": [0, 0]})
    task = load_task(mlebench_competition(tmp_path, "close", answers, sample,
                                          {"metric": "accuracy", "task_type": "binary"}, kaggle_board(CLOSE_BOARD)))
    reward, details = task_reward(task, JUST_BELOW_GOLD)
    assert details["medal"] == "gold" and details["position"] == 1 and reward == 1.0
    assert details["ranked_score"] == 0.86364


def test_other_layouts_rank_the_raw_score(tmp_path):
    answers = pd.DataFrame({"id": [1, 2], "label": [0, 1]})
    sample = pd.DataFrame({"id": [1, 2], "label": [0, 0]})
    overlay = {"metric": "accuracy", "task_type": "binary"}
    board = pd.DataFrame({"rank": range(1, 11), "score": CLOSE_BOARD})
    task = load_task(mledojo_competition(tmp_path, "close", answers, sample, overlay, board))
    _, details = task_reward(task, JUST_BELOW_GOLD)
    assert details["medal"] == "silver" and details["ranked_score"] == JUST_BELOW_GOLD


# --- 5. DSBench's baseline b ---------------------------------------------------------------------------

BIKE_IDS = [f"2012-12-{d:02d} 0{h}:00:00" for d in (20, 21) for h in (0, 1, 2)]
BIKE_COUNTS = [12.0, 5.0, 3.0, 40.0, 22.0, 9.0]


def bike_sharing(root: Path, baseline: str | None) -> Path:
    """DSBench's data_modeling folder for bike-sharing-demand (RMSLE), with DSBench's recorded baseline."""
    name = "bike-sharing-demand"
    write_csv(root / "data_resplit" / name / "train.csv",
              pd.DataFrame({"datetime": [f"2011-01-01 0{h}:00:00" for h in range(6)], "temp": [9.8] * 6,
                            "count": [16.0, 40.0, 32.0, 13.0, 1.0, 2.0]}))
    write_csv(root / "data_resplit" / name / "test.csv", pd.DataFrame({"datetime": BIKE_IDS, "temp": [10.7] * 6}))
    write_csv(root / "data_resplit" / name / "sampleSubmission.csv", pd.DataFrame({"datetime": BIKE_IDS, "count": 0}))
    write_csv(root / "answers" / name / "test_answer.csv", pd.DataFrame({"datetime": BIKE_IDS, "count": BIKE_COUNTS}))
    (root / "task").mkdir(parents=True, exist_ok=True)
    (root / "task" / f"{name}.txt").write_text("Forecast hourly bike rentals. Metric: RMSLE.\n")
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"tasks": {name: {"metric": "rmsle", "task_type": "regression"}}}))
    if baseline is not None:
        result = root / "save_performance" / "baseline" / name / "result.txt"
        result.parent.mkdir(parents=True)
        result.write_text(baseline)
    return root / "data_resplit" / name


def test_dsbench_tasks_use_dsbench_baseline_file_when_present(tmp_path):
    task = load_task(bike_sharing(tmp_path, "1.4509213\n"))
    meta = task.spec.meta
    assert meta["rpg_baseline"] == pytest.approx(1.4509213, rel=SCORE_RTOL)
    assert "save_performance/baseline/bike-sharing-demand/result.txt" in meta["rpg_baseline_source"]
    rpg, details = task_reward(task, 0.5)
    g, b = meta["rpg_perfect"], 1.4509213
    assert rpg == pytest.approx((0.5 - b) / (g - b), rel=SCORE_RTOL)
    assert details["rpg_baseline"] == meta["rpg_baseline"]
    assert details["rpg_baseline_source"] == meta["rpg_baseline_source"]


def test_dsbench_tasks_without_the_file_say_they_use_our_baseline(tmp_path):
    task = load_task(bike_sharing(tmp_path, None))
    assert "WMRL" in task.spec.meta["rpg_baseline_source"] and "mean of train" in task.spec.meta["rpg_baseline_source"]
    assert task_reward(task, 0.5)[1]["rpg_baseline_source"] == task.spec.meta["rpg_baseline_source"]


def test_a_broken_dsbench_baseline_file_is_a_task_error(tmp_path):
    with pytest.raises(TaskFormatError, match=r"result\.txt.*number"):
        load_task(bike_sharing(tmp_path, "nan"))


# --- 7. the missing MLE-bench leaderboard, and overlays that need more than two lines ---------------------


def test_missing_mlebench_leaderboard_says_where_mlebench_keeps_it(tmp_path):
    folder = dogs_vs_cats(tmp_path)
    (folder / "leaderboard.csv").unlink()
    where = r"mlebench/competitions/dogs-vs-cats-redux-kernels-edition/leaderboard\.csv(.|\n)*Git LFS"
    with pytest.raises(TaskFormatError, match=where):
        load_task(folder)


def test_a_git_lfs_pointer_instead_of_the_leaderboard_says_to_pull_it(tmp_path):
    folder = dogs_vs_cats(tmp_path)
    (folder / "leaderboard.csv").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab12\nsize 12\n")
    with pytest.raises(TaskFormatError, match="git lfs pull"):
        load_task(folder)


def test_the_loader_lists_everything_still_missing_at_once(tmp_path):
    folder = spooky(tmp_path, overlay=None)
    (folder / "prepared" / "public" / "sample_submission.csv").rename(folder / "prepared" / "public" / "example.csv")
    private = folder / "prepared" / "private"
    (private / "test.csv").rename(private / "labels.csv")
    write_csv(private / "extra.csv", pd.DataFrame({"id": [1]}))  # two CSVs, neither a usual answers name
    with pytest.raises(TaskFormatError) as info:
        load_task(folder)
    message = str(info.value)
    for piece in ("metric", "task_type", "sample_submission", "set answers in wmrl.yaml"):
        assert piece in message


# --- leaderboards with blank rows ------------------------------------------------------------------------


def test_blank_leaderboard_rows_are_dropped_and_counted(tmp_path):
    folder = dogs_vs_cats(tmp_path)
    with (folder / "leaderboard.csv").open("a") as fh:
        fh.write(",,,,,\n,,,,,\n")
    task = load_task(folder)
    board = task_leaderboards(task)[0]
    assert board.n == 3 and board.blank_rows == 2
    assert task_summary(task)["leaderboard_blank_rows"] == 2


def test_an_empty_score_in_a_filled_row_fails_when_the_task_loads(tmp_path):
    folder = dogs_vs_cats(tmp_path)
    with (folder / "leaderboard.csv").open("a") as fh:
        fh.write(",99,True,2019-07-02,,False\n")
    with pytest.raises(TaskFormatError, match=r"leaderboard\.csv.*1 row\(s\) with an empty score"):
        load_task(folder)
