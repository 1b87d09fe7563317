"""Task folders: every layout, every corrupt-folder kind, the registry and the built-in suite.

The built-in suite is read from the default cache (``$WMRL_HOME/tasks/mle``, built on first use
like a user would get it); the determinism test regenerates the whole suite once per session
into a temporary ``WMRL_HOME`` and compares every file with ``assets/suites/mle.lock.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib.metadata import version as package_version
from pathlib import Path

import pandas as pd
import pytest
import yaml

from wmrl_envs.errors import TaskFormatError, TaskNotFoundError
from wmrl_envs.grading import task_leaderboards, task_reward
from wmrl_envs.tasks import get_task, list_tasks, load_task
from wmrl_envs.tasks.build.description import clean_rd_doc
from wmrl_envs.tasks.build.lock import compare_with_lock, read_lock
from wmrl_envs.tasks.build.suites import build_suite
from wmrl_envs.tasks.builtin import ensure_suite, suite_is_current
from wmrl_envs.tasks.cli import add_tasks_parser
from wmrl_envs.tasks.layout import TaskLayout
from wmrl_envs.tasks.loader import (
    BUILTIN_LAYOUTS,
    discover_tasks,
    layouts,
    register_layout,
    unregister_layout,
)
from wmrl_envs.tasks.suite_def import DATA_PACKAGES, SUITE_MARKER, TASK_MARKER, load_suite_def

IDS = [10, 11, 12, 13]
LABELS = ["no", "yes", "yes", "no"]


# --- fixtures: one small task per layout ----------------------------------------------------------


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def leaderboard_frame() -> pd.DataFrame:
    return pd.DataFrame({"rank": [1, 2, 3], "score": [0.9, 0.7, 0.5]})


def make_native(root: Path, task_id: str = "toy", **spec_overrides) -> Path:
    """A complete native task: binary labels graded by accuracy."""
    spec = {"id": task_id, "name": "Toy", "suite": "user", "env_id": "wmrl/MLEDojo-v0", "split": "train",
            "metric": "accuracy", "task_type": "binary", "id_column": "id", "target_columns": ["label"],
            "classes": ["no", "yes"], **spec_overrides}
    root.mkdir(parents=True)
    (root / "task.yaml").write_text(yaml.safe_dump(spec))
    (root / "description.md").write_text("# Toy\n")
    write_csv(root / "public" / "train.csv", pd.DataFrame({"id": [1, 2], "x": [0.1, 0.2], "label": ["no", "yes"]}))
    write_csv(root / "public" / "test.csv", pd.DataFrame({"id": IDS, "x": [0.3, 0.4, 0.5, 0.6]}))
    write_csv(root / "public" / "sample_submission.csv", pd.DataFrame({"id": IDS, "label": ["no"] * 4}))
    write_csv(root / "private" / "answers.csv", pd.DataFrame({"id": IDS, "label": LABELS}))
    write_csv(root / "leaderboard.csv", leaderboard_frame())
    return root


def make_mledojo(root: Path, overlay: dict | None = None) -> Path:
    """An MLE-Dojo prepared folder: binary task graded by AUC on P(yes)."""
    public, private = root / "data" / "public", root / "data" / "private"
    public.mkdir(parents=True)
    (public / "description.txt").write_text("Predict the label.\n")
    write_csv(public / "train.csv", pd.DataFrame({"id": [1, 2], "x": [0.1, 0.2], "label": ["no", "yes"]}))
    write_csv(public / "test.csv", pd.DataFrame({"id": IDS, "x": [0.3, 0.4, 0.5, 0.6]}))
    write_csv(public / "sample_submission.csv", pd.DataFrame({"id": IDS, "label": [0.5] * 4}))
    write_csv(private / "test_answer.csv", pd.DataFrame({"id": IDS, "label": LABELS}))
    write_csv(private / "public_leaderboard.csv", pd.DataFrame({"rank": [1, 2], "score": [0.9, 0.6]}))
    write_csv(private / "private_leaderboard.csv", pd.DataFrame({"rank": [1, 2, 3, 4], "score": [0.95, 0.8, 0.7, 0.6]}))
    if overlay is not None:
        (root / "wmrl.yaml").write_text(yaml.safe_dump(overlay))
    return root


def make_mlebench(root: Path, overlay: dict | None = None) -> Path:
    """An MLE-bench prepared competition: three classes graded by multiclass log loss."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True)
    (public / "description.md").write_text("# Competition\n")
    write_csv(public / "test.csv", pd.DataFrame({"image_id": ["a", "b", "c"]}))
    write_csv(public / "sample_submission.csv",
              pd.DataFrame({"image_id": ["a", "b", "c"], "cat": [1 / 3] * 3, "dog": [1 / 3] * 3, "emu": [1 / 3] * 3}))
    write_csv(private / "test.csv", pd.DataFrame({"image_id": ["a", "b", "c"], "animal": ["cat", "emu", "dog"]}))
    # MLE-bench boards come from Kaggle: many columns, one of them ``score``, in any order.
    write_csv(root / "leaderboard.csv", pd.DataFrame({"scoreNullable": [0.2, 0.5, 0.9], "teamId": [1, 2, 3],
                                                      "score": [0.2, 0.5, 0.9]}))
    if overlay is not None:
        (root / "wmrl.yaml").write_text(yaml.safe_dump(overlay))
    return root


# --- layouts ------------------------------------------------------------------------------------


def test_native_layout_loads(tmp_path):
    task = load_task(make_native(tmp_path / "toy"))
    assert task.layout == "native" and task.id == "toy"
    assert task.sample_submission_path == task.public_dir / "sample_submission.csv"
    assert list(task.answers()["label"]) == LABELS
    assert task_leaderboards(task)[0].n == 3
    assert task_reward(task, 0.9)[0] == 1.0 and task_reward(task, 0.1)[0] == 0.0
    assert task.description.startswith("# Toy")


def test_native_leaderboard_pointer_resolves_in_leaderboards_dir(tmp_path, monkeypatch):
    root = make_native(tmp_path / "toy", meta={"leaderboard": "user/toy.csv"})
    (root / "leaderboard.csv").unlink()
    boards = tmp_path / "boards"
    write_csv(boards / "user" / "toy.csv", leaderboard_frame())
    monkeypatch.setenv("WMRL_LEADERBOARDS_DIR", str(boards))
    assert load_task(root).leaderboard_path == boards / "user" / "toy.csv"


def test_native_overrides_take_precedence(tmp_path):
    task = load_task(make_native(tmp_path / "toy"), split="heldout")
    assert task.spec.is_heldout


def test_mledojo_layout_with_overlay(tmp_path):
    task = load_task(make_mledojo(tmp_path / "dojo-comp", {"metric": "roc_auc", "task_type": "binary",
                                                           "split": "train"}))
    spec = task.spec
    assert task.layout == "mledojo" and spec.id == "dojo-comp" and spec.suite == "mledojo"
    assert spec.id_column == "id" and spec.target_columns == ("label",) and spec.answer_columns == ("label",)
    assert spec.classes == ("no", "yes")  # inferred from the answers, sorted
    assert [p.name for p in task.leaderboard_paths] == ["private_leaderboard.csv", "public_leaderboard.csv"]
    # MLE-Dojo averages the position score over its private and public boards.
    reward, report = task_reward(task, 0.8)
    assert reward == report["position_score"] == pytest.approx(((4 - 2 + 1) / 4 + (2 - 2 + 1) / 2) / 2)
    assert report["position"] == 2 and report["n"] == 4  # the details come from the primary (private) board
    assert task.description_path.name == "description.txt"


def test_mledojo_without_overlay_says_what_to_add(tmp_path):
    root = make_mledojo(tmp_path / "comp")
    with pytest.raises(TaskFormatError, match=r"(?s)wmrl\.yaml.*metric:.*task_type:"):
        load_task(root)
    assert load_task(root, metric="log_loss", task_type="binary").spec.metric == "log_loss"


def test_mlebench_layout_with_overlay(tmp_path):
    task = load_task(make_mlebench(tmp_path / "zoo", {"metric": "multiclass_log_loss", "task_type": "multiclass"}))
    spec = task.spec
    assert task.layout == "mlebench" and spec.split == "heldout"  # foreign tasks default to held-out
    assert spec.id_column == "image_id" and spec.target_columns == ("cat", "dog", "emu")
    assert spec.answer_columns == ("animal",) and spec.classes == ("cat", "dog", "emu")
    assert task.answers_path.name == "test.csv" and task_leaderboards(task)[0].n == 3
    from wmrl_envs.grading import grade, perfect_submission

    answers = task.answers()
    assert grade(perfect_submission(answers, spec), answers, spec) == pytest.approx(0.0, abs=1e-9)


def test_discover_tasks_finds_every_layout_and_skips_other_folders(tmp_path):
    make_native(tmp_path / "a")
    make_mledojo(tmp_path / "b", {"metric": "roc_auc", "task_type": "binary"})
    make_mlebench(tmp_path / "c", {"metric": "multiclass_log_loss", "task_type": "multiclass"})
    (tmp_path / "notes").mkdir()
    assert [t.layout for t in discover_tasks(tmp_path)] == ["native", "mledojo", "mlebench"]
    assert [t.id for t in discover_tasks(tmp_path / "a")] == ["toy"]  # a root that is itself a task


def test_builtin_layouts_are_registered_explicitly_in_detection_order():
    assert [type(layout) for layout in layouts()][:len(BUILTIN_LAYOUTS)] == list(BUILTIN_LAYOUTS)
    assert [layout.name for layout in layouts()] == ["native", "mledojo", "mlebench", "dsbench"]


def test_layouts_are_pluggable(tmp_path):
    class MarkerLayout(TaskLayout):
        name = "marker-test"
        summary = "a MARKER file"

        def detect(self, path: Path) -> bool:
            return (path / "MARKER").is_file()

        def load(self, path, overrides, require_leaderboard):
            return load_task(path / "inner", **overrides)

    root = tmp_path / "plugged"
    make_native(root / "inner")
    (root / "MARKER").write_text("")
    register_layout(MarkerLayout(), first=True)
    try:
        assert layouts()[0].name == "marker-test"
        assert load_task(root).id == "toy"
    finally:
        unregister_layout("marker-test")
    assert "marker-test" not in [lay.name for lay in layouts()]


# --- corrupt folders: each names the missing or bad piece ---------------------------------------------


def _drop(*relative: str):
    def corrupt(root: Path) -> None:
        for path in (root / r for r in relative):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()

    return corrupt


def _rewrite_yaml(**changes):
    def corrupt(root: Path) -> None:
        spec = yaml.safe_load((root / "task.yaml").read_text())
        spec.update(changes)
        (root / "task.yaml").write_text(yaml.safe_dump(spec))

    return corrupt


def _write(relative: str, text: str):
    def corrupt(root: Path) -> None:
        (root / relative).write_text(text)

    return corrupt


NATIVE_CORRUPTIONS = {
    "missing task.yaml": (_drop("task.yaml"), r"missing task\.yaml"),
    "unparseable yaml": (_write("task.yaml", "id: [unclosed\n"), r"task\.yaml is not valid YAML"),
    "yaml not a mapping": (_write("task.yaml", "- a\n- b\n"), r"expected a mapping"),
    "missing description": (_drop("description.md"), r"missing description\.md"),
    "missing public": (_drop("public"), r"missing public/ folder"),
    "missing test file": (_drop("public/test.csv"), r"missing public/test\.csv"),
    "missing sample submission": (_drop("public/sample_submission.csv"), r"missing public/sample_submission\.csv"),
    "missing answers": (_drop("private/answers.csv"), r"missing private/answers\.csv"),
    "missing leaderboard": (_drop("leaderboard.csv"), r"missing leaderboard"),
    "leaderboard without score": (_write("leaderboard.csv", "rank,points\n1,3\n"), r"no 'score' column"),
    "missing field": (lambda root: (root / "task.yaml").write_text("id: toy\n"), r"missing required field"),
    "unknown field": (_rewrite_yaml(colour="red"), r"unknown field\(s\) \['colour'\]"),
    "bad split": (_rewrite_yaml(split="validation"), r"split must be one of"),
    "bad task type": (_rewrite_yaml(task_type="clustering"), r"task_type must be one of"),
    "unknown metric": (_rewrite_yaml(metric="f2"), r"unknown metric 'f2'"),
    "metric does not fit type": (_rewrite_yaml(metric="rmse"), r"does not fit the classification"),
    "bad limits": (_rewrite_yaml(limits={"wall_s": -1}), r"bad limits block"),
    "target columns not a list": (_rewrite_yaml(target_columns="label"), r"target_columns must be a list"),
    "sample submission columns": (_write("public/sample_submission.csv", "id,prediction\n10,no\n"),
                                  r"sample submission columns"),
    "labels in test file": (_write("public/test.csv", "id,x,label\n10,0.3,no\n"), r"labels must stay private"),
    "answers lack a column": (_write("private/answers.csv", "id,answer\n10,no\n"), r"answers lack column"),
}


@pytest.mark.parametrize("kind", sorted(NATIVE_CORRUPTIONS))
def test_corrupt_native_folder_names_the_piece(tmp_path, kind):
    corrupt, message = NATIVE_CORRUPTIONS[kind]
    root = make_native(tmp_path / "toy")
    corrupt(root)
    with pytest.raises(TaskFormatError, match=message):
        load_task(root)


FOREIGN_CORRUPTIONS = {
    "mledojo missing answers": (make_mledojo, ["data/private/test_answer.csv"], r"missing answers"),
    "mledojo missing leaderboards": (make_mledojo, ["data/private/private_leaderboard.csv",
                                                    "data/private/public_leaderboard.csv"], r"missing leaderboard"),
    "mledojo missing description": (make_mledojo, ["data/public/description.txt"], r"missing description"),
    "mledojo missing sample submission": (make_mledojo, ["data/public/sample_submission.csv"],
                                          r"missing sample_submission\.csv"),
    "mlebench missing leaderboard": (make_mlebench, ["leaderboard.csv"], r"missing leaderboard"),
    "mlebench missing answers": (make_mlebench, ["prepared/private/test.csv"], r"missing answers"),
    "mlebench missing public": (make_mlebench, ["prepared/public"], r"missing prepared/public/ folder"),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN_CORRUPTIONS))
def test_corrupt_foreign_folder_names_the_piece(tmp_path, kind):
    make, removed, message = FOREIGN_CORRUPTIONS[kind]
    overlay = ({"metric": "roc_auc", "task_type": "binary"} if make is make_mledojo
               else {"metric": "multiclass_log_loss", "task_type": "multiclass"})
    root = make(tmp_path / "comp", overlay)
    _drop(*removed)(root)
    with pytest.raises(TaskFormatError, match=message):
        load_task(root)


def test_overlay_with_unknown_key_and_not_a_task(tmp_path):
    root = make_mledojo(tmp_path / "comp", {"metric": "roc_auc", "task_type": "binary", "colour": "red"})
    with pytest.raises(TaskFormatError, match=r"unknown key\(s\) \['colour'\]"):
        load_task(root)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskFormatError, match=r"not a task folder \(missing task\.yaml\)"):
        load_task(tmp_path / "empty")


def test_missing_leaderboard_is_allowed_while_building(tmp_path):
    root = make_native(tmp_path / "toy")
    (root / "leaderboard.csv").unlink()
    task = load_task(root, require_leaderboard=False)
    assert task.leaderboard_path is None
    with pytest.raises(TaskFormatError, match="has no leaderboard"):
        task_leaderboards(task)
    with pytest.raises(TaskFormatError, match="has no leaderboard"):
        task_reward(task, 0.5)


# --- the built-in suite and the registry ---------------------------------------------------------


@pytest.fixture(scope="session")
def fresh_suite(tmp_path_factory):
    """The mle suite generated from scratch into a temporary WMRL_HOME (once per session)."""
    home = tmp_path_factory.mktemp("wmrl_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WMRL_HOME", str(home))
        entries = build_suite("mle", force=True, progress=False)
    return home, entries


def lock_packages_differ() -> list[str]:
    """Data packages whose installed version differs from the one the lock was written with."""
    locked = read_lock("mle")["packages"]
    return [f"{p} {locked.get(p)} -> {package_version(p)}" for p in DATA_PACKAGES if locked.get(p) != package_version(p)]


def test_suite_is_deterministic_and_matches_the_lock(fresh_suite):
    changed = lock_packages_differ()
    if changed:
        pytest.skip(f"the lock was written with other data package versions ({', '.join(changed)})")
    _, entries = fresh_suite
    assert compare_with_lock("mle", entries) == []


def test_suite_rebuilds_only_stale_tasks_atomically(fresh_suite, monkeypatch):
    home, _ = fresh_suite
    monkeypatch.setenv("WMRL_HOME", str(home))
    root = home / "tasks" / "mle"
    assert suite_is_current("mle")
    # A crash mid-build leaves only a temporary folder, which the next build removes.
    (root / ".tmp-credit-scoring-999").mkdir()
    marker = json.loads((root / "credit-scoring" / TASK_MARKER).read_text())
    (root / "credit-scoring" / TASK_MARKER).write_text(json.dumps({**marker, "digest": "stale"}))
    (root / SUITE_MARKER).write_text("{}")
    untouched = (root / "titanic-survival" / "task.yaml").stat().st_mtime_ns
    assert not suite_is_current("mle")
    ensure_suite("mle")
    assert suite_is_current("mle") and not (root / ".tmp-credit-scoring-999").exists()
    assert json.loads((root / "credit-scoring" / TASK_MARKER).read_text())["digest"] == marker["digest"]
    assert (root / "titanic-survival" / "task.yaml").stat().st_mtime_ns == untouched


def test_suite_counts_and_filters():
    tasks = list_tasks(suite="mle")
    train, heldout = list_tasks(suite="mle", split="train"), list_tasks(suite="mle", split="heldout")
    assert len(tasks) >= 40 and len(train) >= 28 and len(heldout) >= 12
    assert len(train) + len(heldout) == len(tasks)
    assert {t.spec.env_id for t in tasks} == {"wmrl/MLEDojo-v0"}
    assert len(list_tasks(env_id="wmrl/MLEDojo-v0", suite="mle")) == len(tasks)
    assert list_tasks(env_id="wmrl/Other-v0") == []
    types = {t.spec.task_type for t in tasks}
    assert {"binary", "multiclass", "regression", "image-multiclass"} <= types
    assert sum(t.spec.task_type.startswith("text") for t in tasks) >= 3
    assert {t.spec.task_type.split("-")[-1] for t in heldout} >= {"binary", "multiclass", "regression"}


def test_loading_a_current_suite_never_imports_the_generator():
    ensure_suite("mle")  # the cache is current, as it is for a user after the first run
    code = ("import sys; from wmrl_envs.grading import task_reward; from wmrl_envs.tasks import get_task; "
            "task_reward(get_task('credit-scoring'), 0.8); print([m for m in sys.modules if '.tasks.build' in m])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert result.stdout.strip() == "[]"


def test_suite_file_reserves_dsbench_datasets():
    sources = [t.source for t in load_suite_def("mle").tasks]
    assert not any(s.startswith(("sktime", "statsmodels")) for s in sources)


def test_user_tasks_shadow_builtins(tmp_path, monkeypatch):
    builtin = get_task("credit-scoring")
    make_native(tmp_path / "mine", task_id="credit-scoring", suite="mle")
    make_native(tmp_path / "extra", task_id="my-extra-task", suite="mle")
    monkeypatch.setenv("WMRL_TASKS_DIR", str(tmp_path))
    shadow = get_task("credit-scoring")
    assert shadow.root == tmp_path / "mine" and shadow.root != builtin.root
    ids = [t.id for t in list_tasks(suite="mle")]
    assert ids.count("credit-scoring") == 1 and "my-extra-task" in ids


def test_unknown_task_lists_close_matches():
    with pytest.raises(TaskNotFoundError, match="did you mean credit-scoring"):
        get_task("credit-scorin")


def test_cli_list_json_and_show(capsys):
    parser = argparse.ArgumentParser(prog="wmrl")
    add_tasks_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["tasks", "list", "--suite", "mle", "--split", "heldout", "--json"])
    assert args.func(args) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) >= 12 and all(r["split"] == "heldout" for r in rows)
    required = {"id", "env", "split", "metric", "leaderboard_size", "task_type", "n_train", "n_test"}
    assert all(required <= set(r) and r["leaderboard_size"] >= 50 for r in rows)
    args = parser.parse_args(["tasks", "show", "titanic-survival"])
    assert args.func(args) == 0
    assert "## Submission format" in capsys.readouterr().out


def test_rd_doc_cleaning_drops_r_sections_and_removed_columns():
    raw = ("x| R Documentation  \n---|---  \n  \n## Wages\n\n### Description\n\nWorker wages.\n\n"
           "### Usage\n\n    Wage\n\n### Format\n\nA data frame.\n\n`age`\n\n    \n\nAge of worker\n\n"
           "`logwage`\n\n    \n\nLog of wage\n\n### Source\n\nA survey.\n\n### Examples\n\n    lm(wage ~ age)\n")
    doc = clean_rd_doc(raw, ["age", "logwage", "wage"], dropped=["logwage"])
    assert doc.title == "Wages" and doc.columns == {"age": "Age of worker"}
    assert doc.text == "Worker wages.\n\nOriginal source: A survey."
