"""``wmrl grade``: one submission against a task's private answers, like ``mlebench grade-sample``.

Built-in tasks, an MLE-bench competition and a DSBench task under ``WMRL_TASKS_DIR`` (folders
built in ``tmp_path``); exit 0 for a valid submission, 1 for an invalid one, 2 for a usage or
configuration error.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml

from trainers.cli import main
from wmrl_envs.grading import grade, read_submission, task_reward
from wmrl_envs.tasks import get_task
from wmrl_envs.tasks.build.lock import SCORE_RTOL

KEYS = {"valid", "error", "raw_score", "position_score", "medal", "above_median", "rpg", "non_finite"}


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["grade", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def tasks_dir(tmp_path, monkeypatch) -> Path:
    """An MLE-bench competition (accuracy) and a DSBench root (RMSE) under WMRL_TASKS_DIR."""
    comp = tmp_path / "tasks" / "tabular-comp"
    write_csv(comp / "prepared" / "public" / "sample_submission.csv", pd.DataFrame({"id": [1, 2, 3, 4], "y": "a"}))
    (comp / "prepared" / "public" / "description.md").write_text("# Tabular\n")
    write_csv(comp / "prepared" / "private" / "test.csv", pd.DataFrame({"id": [1, 2, 3, 4], "y": ["a", "b", "b", "a"]}))
    write_csv(comp / "leaderboard.csv", pd.DataFrame({"teamId": range(10), "score": [0.9 - i / 20 for i in range(10)]}))
    (comp / "wmrl.yaml").write_text(yaml.safe_dump({"metric": "accuracy", "task_type": "binary"}))

    dsbench = tmp_path / "tasks" / "dsbench"
    write_csv(dsbench / "data_resplit" / "prices" / "train.csv",
              pd.DataFrame({"Id": [1, 2, 3], "Price": [1.0, 2.0, 3.0]}))
    write_csv(dsbench / "data_resplit" / "prices" / "test.csv", pd.DataFrame({"Id": [4, 5]}))
    write_csv(dsbench / "data_resplit" / "prices" / "sample_submission.csv", pd.DataFrame({"Id": [4, 5], "Price": 0.0}))
    write_csv(dsbench / "answers" / "prices" / "test_answer.csv", pd.DataFrame({"Id": [4, 5], "Price": [1.0, 3.0]}))
    (dsbench / "task").mkdir()
    (dsbench / "task" / "prices.txt").write_text("Predict Price.\n")
    overlay = {"tasks": {"prices": {"metric": "rmse", "task_type": "regression"}}}
    (dsbench / "wmrl.yaml").write_text(yaml.safe_dump(overlay))
    monkeypatch.setenv("WMRL_TASKS_DIR", os.pathsep.join([str(tmp_path / "tasks"), str(dsbench)]))
    return tmp_path


def test_a_builtin_task_grades_its_sample_submission(capsys):
    task = get_task("titanic-survival")
    code, report = run_json(capsys, "--task", "titanic-survival", str(task.sample_submission_path))
    assert code == 0 and set(report) == KEYS
    raw = grade(read_submission(task.sample_submission_path), task.answers(), task.spec)
    reward, details = task_reward(task, raw)
    assert report["valid"] is True and report["error"] is None and report["rpg"] is None
    assert report["raw_score"] == pytest.approx(raw, rel=SCORE_RTOL)
    assert report["position_score"] == pytest.approx(reward, rel=SCORE_RTOL)
    assert (report["medal"], report["above_median"]) == (details["medal"], details["above_median"])


def test_an_overflowing_metric_still_prints_valid_json_with_the_reason(tmp_path, capsys):
    # Every prediction 1e308: RMSE squares it past float64, so the raw score is inf and the reward 0.
    task = get_task("biomass-heating-value")
    submission = tmp_path / "huge.csv"
    answers = pd.read_csv(task.answers_path)
    answers.assign(**dict.fromkeys(task.spec.answer_columns, 1e308)).to_csv(submission, index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["grade", "--task", task.id, str(submission), "--json"])

    def not_json(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    report = json.loads(capsys.readouterr().out, parse_constant=not_json)
    assert code == 0 and set(report) == KEYS and report["valid"] is True and report["position_score"] == 0.0
    assert report["raw_score"] is None
    assert report["non_finite"] == {"raw_score": "inf after a floating-point overflow in the metric; "
                                                 "JSON has no such number"}
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []


def test_a_foreign_task_is_named_by_its_folder_and_an_invalid_submission_exits_1(tasks_dir, capsys):
    good = tasks_dir / "good.csv"
    write_csv(good, pd.DataFrame({"id": [4, 3, 2, 1], "y": ["a", "b", "b", "a"]}))
    code, report = run_json(capsys, "--task", "tabular-comp", str(good))
    assert code == 0 and report["raw_score"] == 1.0 and report["medal"] == "gold" and report["position_score"] == 1.0

    bad = tasks_dir / "bad.csv"
    write_csv(bad, pd.DataFrame({"id": [1, 2, 3], "y": ["a", "b", "b"]}))
    code, report = run_json(capsys, "--task", "tabular-comp", str(bad))
    assert code == 1 and report["valid"] is False and "wrong row count" in report["error"]
    assert report["raw_score"] is None and report["medal"] is None and report["position_score"] == 0.0

    assert main(["grade", "--task", "tabular-comp", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "valid" in out and "wrong row count" in out


def test_a_dsbench_task_reports_rpg_and_no_leaderboard_fields(tasks_dir, capsys):
    submission = tasks_dir / "prices.csv"
    write_csv(submission, pd.DataFrame({"Id": [4, 5], "Price": [1.5, 2.5]}))
    code, report = run_json(capsys, "--task", "prices", str(submission))
    assert code == 0 and report["raw_score"] == pytest.approx(0.5, rel=SCORE_RTOL)
    assert report["position_score"] is None and report["medal"] is None and report["above_median"] is None
    # g = 0 (the answers themselves), b = 1 (the train mean, 2.0, against [1, 3]).
    assert report["rpg"] == pytest.approx(0.5, rel=SCORE_RTOL)
    assert main(["grade", "--task", "prices", str(submission)]) == 0
    assert "mean of train" in capsys.readouterr().out  # which b the RPG used


def test_usage_and_configuration_errors_exit_2(tasks_dir, capsys):
    assert main(["grade", "--task", "no-such-task", str(tasks_dir / "x.csv")]) == 2
    assert "no task with id 'no-such-task'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["grade", str(tasks_dir / "x.csv")])  # --task is required
    assert info.value.code == 2
