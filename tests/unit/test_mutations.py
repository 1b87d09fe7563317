"""Mutation operators: the table's claims, deterministic edits that compile, the legacy six unchanged.

Whether each operator causes the outcome it claims is checked by execution in
``bench/mutation_check.py`` (a few minutes of sandbox runs), not here.
"""

from __future__ import annotations

import ast
import hashlib
import random

import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, SLOTS, SolutionChoices, render_script
from wmrl_envs import mutations
from wmrl_envs.errors import ConfigError
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.mutations import LEGACY_MUTATIONS, MUTATIONS, OPERATORS, MutationNotApplicable, mutate
from wmrl_envs.outcome import FAILURES, IMPORT_ERROR, RUNTIME_ERROR, SYNTAX_ERROR
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.build import corpus

# Every prediction kind, from both suites (DSBench has no class-probability task).
TASKS = ("titanic-survival", "breast-cancer-diagnosis", "wine-cultivar", "used-car-prices",
         "penguin-species", "two-class-simulated", "boston-house-values")

# sha256 of corpus rows' scripts (CorpusItem.script) as the corpus's own mutate wrote them before the
# operators moved to wmrl_envs.world_models.mutations: (task, choices, seed, mutation) -> digest.
# Both variants of wrong_columns and exception are in; all 1,355 rows of the shipped CSVs matched.
LEGACY_DIGESTS = {
    ("baseball-salaries", '{"capacity":"high","categorical":"ordinal","impute":"mean","model":"linear","scale":"none",'
     '"target_transform":"none","text":"drop","validation":"holdout"}', 743, "syntax_error"):
        "7dac44a1aa95aaa82b4e7480cd64d366dfb58676491b95298e6880c62996be94",
    ("italy-power-demand", '{"capacity":"low","categorical":"drop","impute":"median","model":"extra_trees",'
     '"scale":"none","target_transform":"log1p","text":"drop","validation":"none"}', 128, "syntax_error"):
        "524a84418b548281762c5fa8470d07bc380e974f68ba0b7bd8f6a313aaa9685b",
    ("auto-fuel-economy", '{"capacity":"low","categorical":"ordinal","impute":"mean","model":"mlp","scale":"none",'
     '"target_transform":"log1p","text":"tfidf_word","validation":"none"}', 968, "wrong_column"):
        "d89cceb8ec391dca4ca5fb694e50d205c1a257bb8daf62d5d5d3a5056a674b8f",
    ("basic-motions-activity", '{"capacity":"low","categorical":"drop","impute":"mean","model":"linear",'
     '"scale":"standard","target_transform":"log1p","text":"tfidf_char","validation":"cv3"}', 346, "wrong_column"):
        "6550c6ff2bc0cbaba2606532c2451ed3d40c5f8e6d7bf50fbf61bb5606f548f5",
    ("biopsy-malignancy", '{"capacity":"low","categorical":"ordinal","impute":"mean","model":"extra_trees",'
     '"scale":"standard","target_transform":"log1p","text":"drop","validation":"holdout"}', 790, "no_submission"):
        "2f3e6bb4729345b0cc1397ed219994a70bfa00a68010b588724c2a259e32cd7c",
    ("basic-motions-activity", '{"capacity":"low","categorical":"ordinal","impute":"mean","model":"extra_trees",'
     '"scale":"none","target_transform":"none","text":"drop","validation":"holdout"}', 365, "no_submission"):
        "5999dab3439fd9ab410ed1e072a3e8c6a1f2cd6edb0b6f3fe33e6c80d406b1cb",
    ("alzheimers-biomarkers", '{"capacity":"low","categorical":"ordinal","impute":"median","model":"extra_trees",'
     '"scale":"none","target_transform":"log1p","text":"drop","validation":"holdout"}', 678, "wrong_columns"):
        "ef81f943efb155a7452a32f596f047093051bb83df5c5cba345e640e447e6aa1",
    ("baseball-salaries", '{"capacity":"high","categorical":"drop","impute":"median","model":"hist_gb",'
     '"scale":"standard","target_transform":"none","text":"drop","validation":"none"}', 788, "wrong_columns"):
        "40595753d779fd504089c1056ec85629e2f2bf64f67a7429d18c4a24610a2768",
    ("biomass-heating-value", '{"capacity":"low","categorical":"drop","impute":"mean","model":"hist_gb","scale":"none",'
     '"target_transform":"log1p","text":"drop","validation":"none"}', 806, "exception"):
        "250cc58bd7fc94ba33ae5c2aa1b838c5237b9fa27890c83b1ba8098824d97ff4",
    ("biomass-heating-value", '{"capacity":"medium","categorical":"ordinal","impute":"mean","model":"linear",'
     '"scale":"none","target_transform":"none","text":"tfidf_char","validation":"holdout"}', 436, "exception"):
        "e0041c1dc06069c975ccb2b3a0cedac02229b0203ce315f5e82711637ba1c32e",
    ("auto-fuel-economy", '{"capacity":"low","categorical":"drop","impute":"median","model":"tree","scale":"standard",'
     '"target_transform":"log1p","text":"drop","validation":"none"}', 912, "infinite_loop"):
        "2c40c4709a7e38c65fb254d643da40dd4271d2732d09ceeb657877cb6aff1a9d",
    ("resume-callbacks", '{"capacity":"medium","categorical":"drop","impute":"median","model":"linear",'
     '"scale":"standard","target_transform":"none","text":"drop","validation":"none"}', 392, "infinite_loop"):
        "94240bdb58cc9a18ee05317a2b80779de7e8ed08da8fde051beb64cef35852cf",
}


def render(spec, choices, seed):
    return render_script(spec, SolutionChoices(**choices), seed)


def grammar_scripts(task_id: str) -> list[tuple[str, int]]:
    """The reference solutions and two random grammar points of a task, with their render seeds."""
    spec = get_task(task_id).spec
    rng = random.Random(task_id)
    points = [*REFERENCE_SOLUTIONS.values(),
              *(SolutionChoices(**{s: rng.choice(o) for s, o in SLOTS.items()}) for _ in range(2))]
    return [(render_script(spec, choices, seed), seed) for seed, choices in enumerate(points)]


def test_every_operator_has_a_complete_claim():
    assert MUTATIONS == tuple(OPERATORS) and MUTATIONS[:len(LEGACY_MUTATIONS)] == LEGACY_MUTATIONS
    for op in OPERATORS.values():
        assert op.status in FAILURES and op.mistake and "\n" not in op.mistake
        raises = op.status in (SYNTAX_ERROR, IMPORT_ERROR, RUNTIME_ERROR)
        assert bool(op.exceptions) == raises, op.name
    # The corpus keeps its public names, drawing broken variants from the legacy six.
    assert corpus.BROKEN_MUTATIONS == LEGACY_MUTATIONS and corpus.MUTATIONS == ("none", *LEGACY_MUTATIONS)
    assert corpus.mutate is mutate


def test_module_docstring_tables_every_claim():
    lines = [line for line in mutations.__doc__.splitlines() if line.strip()]
    rows = {line.split()[0]: line for line in lines if line.split()[0] in OPERATORS}
    assert set(rows) == set(OPERATORS)
    for name, op in OPERATORS.items():
        row = rows[name]
        assert f" {op.status} " in row and row.rstrip().endswith("yes" if op.provable else "no"), name
        assert all(e in row for e in op.exceptions), name


@pytest.mark.parametrize("name", MUTATIONS)
def test_operator_edits_deterministically_or_says_it_does_not_apply(name):
    applied = 0
    for task_id in TASKS:
        spec = get_task(task_id).spec
        for script, seed in grammar_scripts(task_id):
            try:
                broken = mutate(script, name, spec, seed)
            except MutationNotApplicable:
                continue
            applied += 1
            assert broken != script and broken == mutate(script, name, spec, seed)
            if name == "syntax_error":
                with pytest.raises(SyntaxError):
                    ast.parse(broken)
            else:
                compile(broken, f"<{name}>", "exec")
    assert applied, f"{name} applies to none of {TASKS}"


@pytest.mark.parametrize(("name", "task_id"), [
    ("label_codes", "used-car-prices"),  # regression: no class labels
    ("label_codes", "breast-cancer-diagnosis"),  # probabilities, not labels
    ("label_codes", "gunpoint-motion"),  # labels 1 and 2 include the code 1
    ("proba_matrix_column", "boston-house-values"),
    ("proba_matrix_column", "wine-cultivar"),  # several probability columns are the right shape
    ("single_output_multi_target", "titanic-survival"),
    ("missing_class_columns", "two-class-simulated"),
    ("lowercase_headers", "titanic-survival"),  # 'id' and 'survived' are lower case already
    ("too_few_rows", "basic-motions-activity"),  # 40 test rows: head(100) keeps them all
])
def test_operators_refuse_tasks_where_the_mistake_would_not_fail(name, task_id):
    spec = get_task(task_id).spec
    with pytest.raises(MutationNotApplicable):
        mutate(render_script(spec, REFERENCE_SOLUTIONS["linear"], 0), name, spec, 0)


def test_unencoded_strings_needs_string_features_and_a_real_model():
    spec = get_task("titanic-survival").spec
    with pytest.raises(MutationNotApplicable, match="constant model"):
        mutate(render_script(spec, REFERENCE_SOLUTIONS["constant"], 0), "unencoded_strings", spec, 0)
    numeric = get_task("boston-house-values").spec
    with pytest.raises(MutationNotApplicable, match="all numeric"):
        mutate(render_script(numeric, REFERENCE_SOLUTIONS["linear"], 0), "unencoded_strings", numeric, 0)


def test_mutate_rejects_unknown_names_and_foreign_scripts():
    spec = get_task("titanic-survival").spec
    assert mutate("print(1)\n", "none", spec, 0) == "print(1)\n"
    with pytest.raises(ConfigError, match="unknown mutation"):
        mutate("print(1)\n", "typo", spec, 0)
    assert mutate("print(1)\n", "syntax_error", spec, 0) == "print(1\n"  # any call will do
    for name in MUTATIONS[1:]:
        with pytest.raises(MutationNotApplicable):
            mutate("print(1)\n", name, spec, 0)


def test_variants_depend_on_the_seed():
    spec = get_task("titanic-survival").spec
    script = render_script(spec, REFERENCE_SOLUTIONS["linear"], 0)
    for name in ("missing_module", "wrong_import_source", "missing_input_file", "misspelled_kwarg",
                 "missing_attribute", "undefined_name"):
        assert len({mutate(script, name, spec, seed) for seed in range(12)}) > 1, name


@pytest.mark.parametrize("key", LEGACY_DIGESTS)
def test_legacy_mutations_are_byte_identical_to_the_shipped_corpus(key):
    task_id, choices, seed, name = key
    script = corpus.CorpusItem(task_id, "train", choices, seed, name).script(get_task(task_id).spec, render)
    assert hashlib.sha256(script.encode()).hexdigest() == LEGACY_DIGESTS[key]


def test_prediction_kinds_are_all_covered():
    assert {get_metric(get_task(t).spec.metric).prediction for t in TASKS} == {
        "label", "probability", "class_probabilities", "value"}
    assert {get_task(t).spec.suite for t in TASKS} == {"mle", "dsbench"}
