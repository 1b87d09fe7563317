"""DSBench's real data-modeling layout, built in ``tmp_path``: loading, RPG references and grading.

The fixture mimics DSBench's files: ``data_resplit/<name>/{train.csv, test.csv, <sample
submission>.csv}``, ``task/<name>.txt`` and ``answers/<name>/test_answer.csv``, with a
``wmrl.yaml`` at the root naming each task's metric.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading import grade, task_reward
from wmrl_envs.tasks import list_tasks, load_task
from wmrl_envs.tasks.loader import discover_tasks

HOUSE_IDS = [1461, 1462, 1463, 1464, 1465, 1466]
HOUSE_PRICES = [105.0, 172.0, 190.0, 195.0, 120.0, 160.0]
HOUSE_TRAIN = [100.0, 150.0, 200.0, 250.0, 130.0, 170.0]
CHURN_IDS = ["c07", "c03", "c11", "c05"]
CHURN_LABELS = [1, 0, 0, 1]
OVERLAY = {"defaults": {"split": "heldout"},
           "tasks": {"house-prices": {"metric": "rmse", "task_type": "regression"},
                     "bank churn": {"metric": "roc_auc", "task_type": "binary"}}}


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def make_dsbench_root(root: Path, overlay: dict | None = None) -> Path:
    """Two DSBench tasks: a Kaggle-style regression (``Id``) and a binary task with text ids."""
    data, answers = root / "data_resplit", root / "answers"
    write_csv(data / "house-prices" / "train.csv",
              pd.DataFrame({"Id": range(1, 7), "LotArea": [8, 9, 11, 14, 9, 10], "SalePrice": HOUSE_TRAIN}))
    write_csv(data / "house-prices" / "test.csv", pd.DataFrame({"Id": HOUSE_IDS, "LotArea": [8, 10, 12, 12, 9, 10]}))
    write_csv(data / "house-prices" / "sample_submission.csv", pd.DataFrame({"Id": HOUSE_IDS, "SalePrice": 0.0}))
    write_csv(answers / "house-prices" / "test_answer.csv", pd.DataFrame({"Id": HOUSE_IDS, "SalePrice": HOUSE_PRICES}))

    write_csv(data / "bank churn" / "train.csv",
              pd.DataFrame({"CustomerId": ["c01", "c02", "c04", "c06"], "Age": [30, 50, 41, 62], "Exited": [0, 1, 0, 1]}))
    write_csv(data / "bank churn" / "test.csv", pd.DataFrame({"CustomerId": CHURN_IDS, "Age": [55, 25, 33, 60]}))
    # DSBench's sample submissions do not always carry a standard name.
    write_csv(data / "bank churn" / "gender_submission.csv", pd.DataFrame({"CustomerId": CHURN_IDS, "Exited": 0.5}))
    write_csv(answers / "bank churn" / "test_answer.csv", pd.DataFrame({"CustomerId": CHURN_IDS, "Exited": CHURN_LABELS}))

    (root / "task").mkdir()
    (root / "task" / "house-prices.txt").write_text("Predict SalePrice. Metric: RMSE.\n")
    (root / "task" / "bank churn.txt").write_text("Predict Exited. Metric: AUC.\n")
    (root / "wmrl.yaml").write_text(yaml.safe_dump(OVERLAY if overlay is None else overlay))
    return root


@pytest.fixture
def root(tmp_path) -> Path:
    return make_dsbench_root(tmp_path / "dsbench")


def house(root: Path):
    return load_task(root / "data_resplit" / "house-prices")


# --- loading -------------------------------------------------------------------------------------------


def test_every_task_of_a_root_is_discovered_as_an_rpg_task(root):
    tasks = {t.id: t for t in discover_tasks(root)}
    assert sorted(tasks) == ["bank-churn", "house-prices"]  # ids are the names made filesystem-safe
    for task in tasks.values():
        spec = task.spec
        assert (task.layout, spec.suite, spec.env_id, spec.split) == ("dsbench", "dsbench", "wmrl/DSBench-v0", "heldout")
        assert spec.meta["reward"] == "rpg" and task.leaderboard_path is None
    hp, churn = tasks["house-prices"], tasks["bank-churn"]
    assert (hp.spec.id_column, hp.spec.target_columns, hp.spec.metric) == ("Id", ("SalePrice",), "rmse")
    assert churn.sample_submission_path.name == "gender_submission.csv"
    assert churn.spec.classes == (0, 1) and churn.public_dir == root / "data_resplit" / "bank churn"
    assert hp.description.startswith("Predict SalePrice") and hp.answers_path.parent.name == "house-prices"
    assert (hp.spec.meta["n_train"], hp.spec.meta["n_test"]) == (6, 6)


def test_references_are_the_perfect_score_and_the_train_baseline(root):
    hp = house(root)
    baseline = np.sqrt(np.mean((np.array(HOUSE_PRICES) - np.mean(HOUSE_TRAIN)) ** 2))
    assert hp.spec.meta["rpg_perfect"] == 0.0
    assert hp.spec.meta["rpg_baseline"] == pytest.approx(baseline)
    assert hp.spec.meta["rpg_baseline_name"] == "mean of train"
    churn = load_task(root / "data_resplit" / "bank churn")
    assert (churn.spec.meta["rpg_perfect"], churn.spec.meta["rpg_baseline"]) == (1.0, 0.5)


def test_grading_matches_rows_by_id_so_shuffled_rows_score_the_same(root):
    hp = house(root)
    answers = hp.answers()
    prediction = [110.0, 170.0, 180.0, 200.0, 125.0, 150.0]
    ordered = pd.DataFrame({"Id": HOUSE_IDS, "SalePrice": prediction})
    shuffled = ordered.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert not shuffled["Id"].equals(ordered["Id"])
    raw = grade(ordered, answers, hp.spec)
    assert raw == pytest.approx(np.sqrt(np.mean((np.array(prediction) - HOUSE_PRICES) ** 2)))
    assert grade(shuffled, answers, hp.spec) == raw
    rpg, details = task_reward(hp, raw)
    g, b = hp.spec.meta["rpg_perfect"], hp.spec.meta["rpg_baseline"]
    assert rpg == pytest.approx((raw - b) / (g - b)) and 0 < rpg < 1
    assert details == {"rpg": rpg, "rpg_perfect": g, "rpg_baseline": b,
                       "rpg_baseline_source": "WMRL trivial baseline (mean of train)"}

    churn = load_task(root / "data_resplit" / "bank churn")
    probabilities = pd.DataFrame({"CustomerId": CHURN_IDS, "Exited": [0.9, 0.2, 0.4, 0.7]})
    assert grade(probabilities.iloc[::-1], churn.answers(), churn.spec) == 1.0
    assert task_reward(churn, 1.0)[0] == 1.0


def test_a_per_task_overlay_beside_the_answers_overrides_the_root(root):
    (root / "answers" / "house-prices" / "wmrl.yaml").write_text(yaml.safe_dump(
        {"split": "train", "name": "House prices", "meta": {"rpg_perfect": 0.0, "rpg_baseline": 50.0}}))
    hp = house(root)
    assert (hp.spec.split, hp.spec.name, hp.spec.meta["rpg_baseline"]) == ("train", "House prices", 50.0)
    # Recorded references are used as they are (no baseline is fitted); the row counts come from the files.
    assert hp.spec.meta["rpg_baseline_source"] == "the overlay (meta.rpg_baseline)"
    assert (hp.spec.meta["n_train"], hp.spec.meta["n_test"]) == (6, 6)


def test_tasks_dir_lists_dsbench_tasks_under_their_env(root, monkeypatch):
    monkeypatch.setenv("WMRL_TASKS_DIR", str(root))
    ids = {t.id for t in list_tasks(env_id="wmrl/DSBench-v0", split="heldout")}
    assert {"house-prices", "bank-churn"} <= ids
    assert not {"house-prices", "bank-churn"} & {t.id for t in list_tasks(suite="mle")}


# --- broken roots name the missing piece ----------------------------------------------------------------


def _remove(*relative: str):
    def corrupt(root: Path) -> None:
        for name in relative:
            (root / name).unlink()
    return corrupt


def _write(*files: tuple[str, pd.DataFrame]):
    def corrupt(root: Path) -> None:
        for relative, frame in files:
            write_csv(root / relative, frame)
    return corrupt


def _two_candidate_sample_submissions(root: Path) -> None:
    folder = root / "data_resplit" / "house-prices"
    (folder / "sample_submission.csv").rename(folder / "preds.csv")
    write_csv(folder / "extra.csv", pd.DataFrame({"a": [1]}))


CORRUPTIONS = {
    "answers": (_remove("answers/house-prices/test_answer.csv"), r"missing answers \(answers/house-prices/test_answer"),
    "description": (_remove("task/house-prices.txt"), r"missing description \(task/house-prices\.txt\)"),
    "train": (_remove("data_resplit/house-prices/train.csv"), r"missing data_resplit/house-prices/train\.csv"),
    "test": (_remove("data_resplit/house-prices/test.csv"), r"missing data_resplit/house-prices/test\.csv"),
    "sample submission": (_remove("data_resplit/house-prices/sample_submission.csv"), r"missing sample submission"),
    "ambiguous sample submission": (_two_candidate_sample_submissions,
                                    r"missing sample submission.*set sample_submission in wmrl\.yaml"),
    "target not in train": (_write(("data_resplit/house-prices/train.csv", pd.DataFrame({"Id": [1], "LotArea": [3]}))),
                            r"train data lacks the target column 'SalePrice'"),
    "answers lack the target": (_write(("answers/house-prices/test_answer.csv", pd.DataFrame({"Id": HOUSE_IDS}))),
                                r"cannot tell which answer column"),
    "baseline as good as perfect": (
        _write(("data_resplit/house-prices/train.csv", pd.DataFrame({"Id": [1, 2], "SalePrice": [150.0, 150.0]})),
               ("answers/house-prices/test_answer.csv", pd.DataFrame({"Id": HOUSE_IDS, "SalePrice": 150.0}))),
        r"RPG is undefined"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_broken_root_raises_a_typed_error_naming_the_piece(root, kind):
    corrupt, message = CORRUPTIONS[kind]
    corrupt(root)
    with pytest.raises(TaskFormatError, match=message):
        house(root)


def test_overlay_problems_are_typed_errors(root):
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"tasks": {"bank churn": OVERLAY["tasks"]["bank churn"]}}))
    with pytest.raises(TaskFormatError, match=r"no machine-readable metric or task_type(.|\n)*tasks:\n    house-prices"):
        house(root)
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"tasks": {"house-prices": {"metric": "rmse", "colour": 1}}}))
    with pytest.raises(TaskFormatError, match=r"tasks\.house-prices: unknown key\(s\) \['colour'\]"):
        house(root)
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"house-prices": {"metric": "rmse"}}))
    with pytest.raises(TaskFormatError, match=r"expected a mapping with 'defaults' and/or 'tasks'"):
        house(root)
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"tasks": {"house-prices": {"metric": "rmse",
                                                                               "task_type": "regression",
                                                                               "meta": {"rpg_perfect": 0.0,
                                                                                        "rpg_baseline": "?"}}}}))
    with pytest.raises(TaskFormatError, match=r"rpg_baseline must be numbers"):
        house(root)


def test_an_overlay_can_name_the_sample_submission_relative_to_the_root(root):
    _two_candidate_sample_submissions(root)
    (root / "answers" / "house-prices" / "wmrl.yaml").write_text(
        yaml.safe_dump({"sample_submission": "data_resplit/house-prices/preds.csv"}))
    assert house(root).sample_submission_path == root / "data_resplit" / "house-prices" / "preds.csv"
