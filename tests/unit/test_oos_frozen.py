"""The frozen out-of-sample sets of issue 44 (``bench/oos``, ``bench/oos_v2``) and issue 49's confirmation
tasks (``bench/confirmation_tasks``): their files are as frozen, their tasks regenerate byte for byte, and they
share no task, dataset or seed-and-dataset with the built-in suites, the corpora, the screen or each other."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.oos import SETS, FrozenSet, load_definition
from bench.oos.execute_scripts import read_header
from bench.oos_screen import TASKS_FILE as SCREEN_TASKS
from wmrl_envs.grading import grade_file, submission_cap, task_leaderboards, task_reward
from wmrl_envs.paths import assets_dir
from wmrl_envs.tasks import list_tasks
from wmrl_envs.tasks.suite_def import builtin_suites, load_suite_def

# Each set's smallest held-out task: regenerating it checks the generator and the data packages.
SMALL_TASK = {"v1": "home-heating-system", "v2": "british-election-vote", "confirmation": "smoking-weight-change"}
every_set = pytest.mark.parametrize("frozen", list(SETS.values()), ids=list(SETS))


@every_set
def test_every_frozen_file_matches_its_manifest_digest(frozen: FrozenSet):
    recorded = frozen.read_manifest()["frozen_files"]
    current = frozen.frozen_digests()
    changed = sorted(path for path in set(recorded) | set(current) if recorded.get(path) != current.get(path))
    assert not changed, (f"frozen out-of-sample files were changed, added or removed: {changed}. They must not "
                         f"change after the freeze ({frozen.folder.name}/README.md).")


@every_set
def test_counts_and_every_script_has_its_outcome(frozen: FrozenSet):
    tasks = frozen.definition().tasks
    assert len(tasks) >= 6
    assert {t.task_type for t in tasks} >= {"binary", "multiclass", "regression"}
    boards = pd.read_csv(frozen.leaderboards_file).groupby("task_id").size()
    assert set(boards.index) == {t.id for t in tasks}
    assert boards.min() >= 50, boards.to_dict()
    recorded = frozen.read_manifest()["tasks"]
    assert {tid: entry["leaderboard"]["entries"] for tid, entry in recorded.items()} == boards.to_dict()

    if not frozen.has_scripts:  # a set of tasks only (confirmation): no scripts, so no outcomes either
        assert not frozen.script_paths() and not frozen.outcomes_file.exists()
        return
    scripts = frozen.script_paths()
    new_ids = {t.id for t in tasks}
    assert len(scripts) >= 40
    assert 2 * sum(p.parent.name in new_ids for p in scripts) >= len(scripts)
    intended = [read_header(p)[1] for p in scripts]
    failing_or_wrong = sum(i != "valid" for i in intended) / len(intended)
    assert 0.3 <= failing_or_wrong <= 0.5

    outcomes = pd.read_csv(frozen.outcomes_file)
    ran = set(zip(outcomes.task_id, outcomes.script))
    assert ran == {(p.parent.name, p.stem) for p in scripts}
    assert not outcomes["infra_failure"].any()
    assert set(outcomes.loc[outcomes.valid, "status"]) == {"valid"}


@every_set
def test_nothing_is_shared_with_the_suites_the_world_model_corpora_or_another_set(frozen: FrozenSet, monkeypatch):
    definition = frozen.definition()
    assert definition.suite not in builtin_suites()
    others = [t for other in SETS.values() if other != frozen for t in other.definition().tasks]
    assert not {t.source for t in definition.tasks} & {t.source for t in others}
    assert not {t.id for t in definition.tasks} & {t.id for t in others}
    suites = [load_suite_def(name) for name in builtin_suites()]
    suite_tasks = [t for s in suites for t in s.tasks]
    used_sources = {ref for t in suite_tasks for ref in (t.source, t.test_source) if ref}
    oos_ids = {t.id for t in definition.tasks}
    assert not {t.source for t in definition.tasks} & used_sources
    assert not oos_ids & {t.id for t in suite_tasks}
    monkeypatch.delenv("WMRL_TASKS_DIR", raising=False)  # a user's own folders may hold anything
    assert not oos_ids & {t.id for t in list_tasks()}
    corpus_ids = set()
    for corpus in sorted((assets_dir() / "world_models").glob("*.csv")):
        corpus_ids |= set(pd.read_csv(corpus, usecols=["task_id"])["task_id"])
    assert corpus_ids and not oos_ids & corpus_ids
    # Scripts on built-in tasks go on held-out tasks only.
    heldout = {t.id for t in suite_tasks if t.split == "heldout"}
    folders = ({p.name for p in frozen.scripts_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}
               if frozen.has_scripts else set())
    assert folders <= oos_ids | heldout, sorted(folders - oos_ids - heldout)


@every_set
def test_a_task_regenerates_byte_for_byte_and_loads_in_the_mlebench_layout(frozen: FrozenSet, tmp_path):
    # materialise() raises when a generated file's sha256 differs from the manifest.
    small = SMALL_TASK[frozen.name]
    task = frozen.materialise(tmp_path, only=[small])[small]
    assert (task.layout, task.spec.suite, task.spec.split) == ("mlebench", frozen.definition().suite, "heldout")
    assert task_leaderboards(task)[0].n >= 50
    raw = grade_file(task.sample_submission_path, task.answers(), task.spec,
                     max_bytes=submission_cap(task.sample_submission_path))
    reward, details = task_reward(task, raw)
    assert 0.0 <= reward <= 1.0 and details["n"] >= 50


# ------------------------------------------------------------------ issue 49's confirmation tasks
CONFIRMATION = SETS["confirmation"]


def test_the_confirmation_has_eight_heldout_and_four_training_tasks_of_every_type():
    tasks = {t.id: t for t in CONFIRMATION.definition().tasks}
    split = CONFIRMATION.split_ids()
    assert (len(split["train"]), len(split["heldout"])) == (4, 8) and len(tasks) == 12
    heldout = [tasks[i] for i in split["heldout"]]
    assert {t.task_type for t in heldout} >= {"binary", "multiclass", "regression"}
    assert len({t.metric for t in heldout}) >= 6
    assert sum(t.task_type.startswith("text") for t in heldout) <= 1
    # Training tasks execute fast: small tables, few columns, no text.
    recorded = CONFIRMATION.read_manifest()["tasks"]
    for tid in split["train"]:
        assert not tasks[tid].text_columns and not tasks[tid].task_type.startswith("text")
        assert recorded[tid]["n_train"] + recorded[tid]["n_test"] <= 3100 and recorded[tid]["n_features"] <= 10
    # One seed each, 4901-4912, which no other set and no suite uses.
    assert sorted(t.seed for t in tasks.values()) == list(range(4901, 4913))
    others = [t for other in SETS.values() if other != CONFIRMATION for t in other.definition().tasks]
    others += [t for name in builtin_suites() for t in load_suite_def(name).tasks]
    others += list(load_definition(SCREEN_TASKS).tasks)
    assert not {t.seed for t in tasks.values()} & {t.seed for t in others}
    # Nor does the training screen (bench/oos_screen), whose tasks are not a frozen set.
    screen = load_definition(SCREEN_TASKS).tasks
    assert not {t.source for t in tasks.values()} & {t.source for t in screen}
    assert not set(tasks) & {t.id for t in screen}


def test_a_confirmation_training_task_regenerates_with_its_split(tmp_path):
    task = CONFIRMATION.materialise(tmp_path, only=["first-year-gpa"])["first-year-gpa"]
    assert (task.layout, task.spec.suite, task.spec.split) == ("mlebench", "confirmation", "train")
    assert task_leaderboards(task)[0].n >= 50
