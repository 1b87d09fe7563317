"""The task registry with broken folders and missing packages, and the ``lite`` selection.

One folder under ``WMRL_TASKS_DIR`` that does not load, or a built-in suite whose optional data
package is missing, must block only itself: everything else is listed and looked up, and the
failures are reported (``wmrl tasks list`` on stderr and in ``--json``; a lookup that misses).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import pandas as pd
import pytest
import yaml

from trainers.cli import main
from trainers.evaluate import EvalConfig, select_tasks
from wmrl_envs.errors import ConfigError, MissingExtraError, TaskNotFoundError
from wmrl_envs.tasks import get_task, list_tasks, scan_tasks, suite_def, suite_selection


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def mlebench_competition(folder: Path, overlay: dict | None) -> Path:
    """An MLE-bench prepared competition (binary, AUC) with its repository's leaderboard.csv."""
    public, private = folder / "prepared" / "public", folder / "prepared" / "private"
    write_csv(public / "sample_submission.csv", pd.DataFrame({"id": [1, 2, 3], "target": [0.5] * 3}))
    (public / "description.md").write_text("# Competition\n")
    write_csv(private / "test.csv", pd.DataFrame({"id": [1, 2, 3], "target": [0, 1, 1]}))
    write_csv(folder / "leaderboard.csv", pd.DataFrame({"teamId": [1, 2], "score": [0.9, 0.7]}))
    if overlay is not None:
        (folder / "wmrl.yaml").write_text(yaml.safe_dump(overlay))
    return folder


@pytest.fixture
def tasks_dir(tmp_path, monkeypatch) -> Path:
    """A WMRL_TASKS_DIR with one good competition and one that lacks its wmrl.yaml."""
    mlebench_competition(tmp_path / "good-comp", {"metric": "roc_auc", "task_type": "binary"})
    mlebench_competition(tmp_path / "bad-comp", None)
    monkeypatch.setenv("WMRL_TASKS_DIR", str(tmp_path))
    return tmp_path


def test_one_bad_folder_blocks_neither_listing_nor_lookups(tasks_dir):
    assert get_task("titanic-survival").spec.suite == "mle"
    assert get_task("good-comp").layout == "mlebench"
    ids = {t.id for t in list_tasks()}
    assert {"good-comp", "titanic-survival"} <= ids and "bad-comp" not in ids
    [failure] = scan_tasks().failures
    assert failure.path == str(tasks_dir / "bad-comp") and "metric" in failure.error


def test_a_missing_id_mentions_the_folders_that_did_not_load(tasks_dir):
    with pytest.raises(TaskNotFoundError, match=r"(?s)no task with id 'bad-comp'.*1 task folder.*bad-comp"):
        get_task("bad-comp")


def test_cli_list_reports_failures_after_the_table_and_in_json(tasks_dir, capsys):
    assert main(["tasks", "list", "--suite", "mlebench"]) == 0
    out, err = capsys.readouterr()
    assert "good-comp" in out and "bad-comp" not in out
    assert str(tasks_dir / "bad-comp") in err and "metric" in err
    assert main(["tasks", "list", "--suite", "mlebench", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in rows if "id" in r] == ["good-comp"]
    [failed] = [r for r in rows if "load_error" in r]
    assert failed["path"] == str(tasks_dir / "bad-comp") and "metric" in failed["load_error"]
    assert main(["tasks", "list", "--suite", "mlebench", "--strict"]) == 2


def test_cli_show_of_a_builtin_task_ignores_other_broken_folders(tasks_dir, capsys):
    assert main(["tasks", "show", "titanic-survival"]) == 0
    assert "titanic-survival" in capsys.readouterr().out


def test_a_missing_optional_package_blocks_only_its_suite(monkeypatch):
    real = suite_def.package_version

    def without_sktime(name: str) -> str:
        if name == "sktime":
            raise PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(suite_def, "package_version", without_sktime)
    assert get_task("titanic-survival").spec.suite == "mle"
    assert list_tasks(suite="mle")
    with pytest.raises(MissingExtraError, match=r"needs the dsbench extra: pip install 'wmrl\[dsbench\]' \(sktime"):
        list_tasks(suite="dsbench")  # what the DSBench env, the trainer and `wmrl eval` ask for
    [failure] = scan_tasks(suite="dsbench").failures
    assert failure.source == "built-in suite dsbench"
    assert "sktime is not installed" in failure.error and "pip install 'wmrl[dsbench]'" in failure.error
    with pytest.raises(TaskNotFoundError, match="sktime"):
        get_task("marriage-rating")  # a DSBench-suite task


# --- the lite selection ----------------------------------------------------------------------------------


def test_lite_selection_is_small_diverse_and_keeps_each_split():
    lite = list_tasks(suite="mle", selection="lite")
    train = [t for t in lite if t.spec.split == "train"]
    heldout = [t for t in lite if t.spec.split == "heldout"]
    assert (len(train), len(heldout)) == (12, 6)
    assert {t.id for t in lite} == {i for ids in suite_selection("mle", "lite").values() for i in ids}
    assert len({t.spec.metric for t in train}) >= 10 and len({t.spec.metric for t in heldout}) == 6
    assert len({t.spec.task_type for t in lite}) >= 5


def test_cli_lists_and_eval_selects_the_lite_tasks(capsys):
    assert main(["tasks", "list", "--split", "lite", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 18
    heldout = {r["id"] for r in rows if r["split"] == "heldout"}
    assert {t.id for t in select_tasks("wmrl/MLEDojo-v0", "mle", "lite", None)} == heldout
    assert EvalConfig(split="lite").split == "lite"
    with pytest.raises(ConfigError, match="lite"):
        select_tasks("wmrl/MLEDojo-v0", "mle", "lite", ["credit-scoring"])  # a train task, not in lite's held-out
