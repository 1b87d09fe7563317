"""The surrogate's corpus: planning, deterministic mutations, resumable builds, the shipped CSV."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, SLOTS, SolutionChoices, render_script
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.tasks import get_task, list_tasks
from wmrl_envs.world_models.build import corpus as corpus_lib
from wmrl_envs.world_models.build.corpus import BROKEN_MUTATIONS, CorpusItem, mutate, plan_corpus

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "world_models" / "corpus.csv"
REFERENCES = [c.to_dict() for c in REFERENCE_SOLUTIONS.values()]


def render(spec, choices, seed):
    return render_script(spec, SolutionChoices(**choices), seed)


@pytest.fixture(scope="module")
def task():
    # The smallest train task keeps the sandboxed runs below quick.
    return min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))


def test_plan_is_deterministic_with_references_and_broken_variants():
    tasks = list_tasks(suite="mle", split="train")[:3]
    plan = plan_corpus(tasks, SLOTS, REFERENCES, per_task=13, seed=1)
    assert plan == plan_corpus(tasks, SLOTS, REFERENCES, per_task=13, seed=1)
    assert plan != plan_corpus(tasks, SLOTS, REFERENCES, per_task=13, seed=2)
    assert len(plan) == 3 * 13 and len({item.key for item in plan}) == len(plan)
    for t in tasks:
        items = [i for i in plan if i.task_id == t.id]
        assert [json.loads(i.choices) for i in items[: len(REFERENCES)]] == REFERENCES
        assert sum(i.mutation != "none" for i in items) == 2  # round(13 * 0.15)
        assert {i.split for i in items} == {t.spec.split}
    with pytest.raises(ConfigError, match="leaves no room"):
        plan_corpus(tasks, SLOTS, REFERENCES, per_task=4)


@pytest.mark.parametrize("mutation", BROKEN_MUTATIONS)
def test_mutations_are_deterministic_and_change_the_script(task, mutation):
    script = render_script(task.spec, REFERENCE_SOLUTIONS["linear"], seed=4)
    broken = mutate(script, mutation, task.spec, seed=4)
    assert broken != script and broken == mutate(script, mutation, task.spec, seed=4)
    if mutation == "syntax_error":
        with pytest.raises(SyntaxError):
            ast.parse(broken)
    else:
        ast.parse(broken)


def test_mutate_rejects_unknown_mutations_and_foreign_scripts(task):
    assert mutate("print(1)\n", "none", task.spec, 0) == "print(1)\n"
    with pytest.raises(ConfigError, match="unknown mutation"):
        mutate("print(1)\n", "typo", task.spec, 0)
    with pytest.raises(ConfigError, match="to_csv"):
        mutate("print(1)\n", "no_submission", task.spec, 0)


@pytest.fixture
def execute():
    """The build's executor, as scripts/build_world_model.py gives it: every script runs."""
    scorer = CodeScorer(workers=2, prove=False)
    yield scorer.execute
    scorer.close()


def test_build_executes_records_and_resumes(task, tmp_path, execute):
    path = tmp_path / "corpus.csv"
    plan = [CorpusItem(task.id, task.spec.split, corpus_lib.choices_json(REFERENCE_SOLUTIONS["constant"].to_dict()), 0),
            CorpusItem(task.id, task.spec.split, corpus_lib.choices_json(REFERENCES[0]), 0, "syntax_error")]
    stats = corpus_lib.build_corpus(plan, {task.id: task}, render, path, execute, workers=2, progress=False)
    assert (stats.written, stats.skipped, stats.infra_failures) == (2, 0, 0)
    frame = corpus_lib.read_corpus(path).set_index("mutation")
    assert frame.loc["none", "valid"] == 1 and 0.0 <= frame.loc["none", "real_score"] <= 1.0
    assert frame.loc["syntax_error", "valid"] == 0 and frame.loc["syntax_error", "real_score"] == 0.0
    again = corpus_lib.build_corpus(plan, {task.id: task}, render, path, execute, progress=False)
    assert (again.written, again.skipped) == (0, 2) and len(corpus_lib.read_corpus(path)) == 2
    # Dropping a task's rows makes the next build execute them again; other tasks' rows stay as written.
    other = path.read_text().splitlines()[1].replace(task.id, "another-task", 1)
    path.write_text(path.read_text() + other + "\n")
    assert corpus_lib.drop_tasks(path, [task.id]) == 2
    assert path.read_text().splitlines()[1:] == [other]
    assert corpus_lib.build_corpus(plan, {task.id: task}, render, path, execute, progress=False).written == 2


def test_read_corpus_of_a_missing_file_is_empty(tmp_path):
    frame = corpus_lib.read_corpus(tmp_path / "absent.csv")
    assert frame.empty and tuple(frame.columns) == corpus_lib.COLUMNS


def test_shipped_corpus_is_split_clean_and_has_failures():
    frame = corpus_lib.read_corpus(SHIPPED)
    assert tuple(frame.columns) == corpus_lib.COLUMNS + corpus_lib.OUTCOME_COLUMNS
    # Every run's outcome is recorded, except reruns that no longer ended as the row says.
    assert (frame["outcome"] != "").mean() > 0.97
    assert (frame.loc[frame["valid"] == 1, "outcome"] == "valid").all()
    for task_id, split in frame[["task_id", "split"]].drop_duplicates().itertuples(index=False):
        assert get_task(task_id).spec.split == split
    assert {"train", "heldout"} <= set(frame["split"])
    assert frame["real_score"].between(0, 1).all()
    assert (frame.loc[frame["valid"] == 0, "real_score"] == 0).all()
    broken = frame[frame["mutation"] != "none"]
    assert 0.1 <= len(broken) / len(frame) <= 0.2
    assert (broken.loc[broken["mutation"] == "syntax_error", "valid"] == 0).all()


def test_the_outcome_corpus_holds_every_operator_executed_on_both_splits():
    from wmrl_envs.mutations import OPERATORS

    frame = corpus_lib.read_corpus(SHIPPED.with_name("outcome_corpus.csv"))
    assert set(frame["mutation"]) == set(OPERATORS) and {"train", "heldout"} <= set(frame["split"])
    assert (frame["outcome"] != "").all() and (frame["outcome"] != "valid").mean() > 0.95
    raised = frame["outcome"].isin(["runtime_error", "import_error", "syntax_error"])
    assert (frame.loc[raised, "exception"] != "").mean() > 0.95
