"""The solution grammar: every option renders compilable code, and rendered scripts really run."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, SLOTS, SolutionChoices, render_script
from wmrl_envs.errors import ConfigError
from wmrl_envs.grading import get_metric, grade, validate_submission
from wmrl_envs.task_spec import TaskSpec


def make_spec(metric: str, task_type: str, **kwargs) -> TaskSpec:
    return TaskSpec(id=f"fake-{metric}", name="fake", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                    metric=metric, task_type=task_type, **kwargs)


SPECS = {
    # Probability of the positive class, in a column named apart from the answers' label column.
    "binary_roc_auc": make_spec("roc_auc", "binary", classes=("no", "yes"), target_columns=("p_yes",),
                                answer_columns=("label",)),
    "multiclass_log_loss": make_spec("multiclass_log_loss", "multiclass", classes=("a", "b", "c"),
                                     target_columns=("a", "b", "c"), answer_columns=("label",)),
    "multiclass_accuracy": make_spec("accuracy", "text-multiclass", classes=(1, 2, 3)),
    "regression_rmse": make_spec("rmse", "regression"),
    # Classes declared as text while train.csv holds integers: scripts must match them anyway.
    "multiclass_log_loss_int_labels": make_spec("multiclass_log_loss", "multiclass", classes=("1", "2", "3"),
                                                target_columns=("1", "2", "3"), answer_columns=("label",)),
}


def one_option_changed() -> list[SolutionChoices]:
    """The defaults, then every other option of every slot changed alone."""
    default = SolutionChoices()
    variants = [default]
    for slot, options in SLOTS.items():
        variants += [SolutionChoices(**{**default.to_dict(), slot: o}) for o in options if o != getattr(default, slot)]
    return variants


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_option_renders_compilable_code_that_writes_a_submission(name: str) -> None:
    spec = SPECS[name]
    for choices in one_option_changed() + list(REFERENCE_SOLUTIONS.values()):
        script = render_script(spec, choices, seed=3)
        compile(script, f"<{name}: {choices.describe()}>", "exec")
        assert 'submission.to_csv("submission.csv", index=False)' in script
        assert "SEED = 3" in script


def test_classification_without_classes_is_rejected() -> None:
    with pytest.raises(ConfigError, match="classes"):
        render_script(make_spec("accuracy", "multiclass"), SolutionChoices())


def test_choices_reject_unknown_options() -> None:
    with pytest.raises(ConfigError, match="model"):
        SolutionChoices(model="xgboost")
    assert SolutionChoices.from_indices([0] * len(SLOTS)).model == SLOTS["model"][0]


# --------------------------------------------------------------------------- real runs


def synthetic_task(spec: TaskSpec, n_train: int = 160, n_test: int = 60) -> tuple[pd.DataFrame, ...]:
    """(train, test, answers) with numeric, missing and categorical inputs and a learnable target."""
    rng = np.random.default_rng(0)
    n = n_train + n_test
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], size=n)
    signal = 2 * x1 - x2 + (colour == "red")
    label_column = spec.answer_columns[0]
    if spec.classes is None:  # regression, positive so log1p targets make sense too
        target = np.exp(0.5 * signal) + rng.uniform(0, 0.1, n)
    else:
        cut = np.quantile(signal, np.linspace(0, 1, len(spec.classes) + 1)[1:-1])
        target = np.array(spec.classes, dtype=object)[np.searchsorted(cut, signal)]
        if all(str(c).isdigit() for c in spec.classes):  # as pandas would read them back
            target = target.astype(int)
    x1[rng.random(n) < 0.1] = np.nan  # the imputer has work to do
    frame = pd.DataFrame({"id": np.arange(1000, 1000 + n), "x1": x1, "x2": x2, "colour": colour, label_column: target})
    train, test = frame.iloc[:n_train], frame.iloc[n_train:]
    return train, test.drop(columns=[label_column]), test[["id", label_column]]


@pytest.mark.parametrize(("solution", "name"), [
    ("linear", "binary_roc_auc"),
    ("hist_gb", "multiclass_log_loss"),
    ("hist_gb", "regression_rmse"),
    ("hist_gb", "multiclass_log_loss_int_labels"),
])
def test_rendered_script_runs_and_writes_a_valid_submission(tmp_path: Path, solution: str, name: str) -> None:
    spec = SPECS[name]
    train, test, answers = synthetic_task(spec)
    (tmp_path / "data").mkdir()
    train.to_csv(tmp_path / "data" / "train.csv", index=False)
    test.to_csv(tmp_path / "data" / "test.csv", index=False)
    (tmp_path / "solution.py").write_text(render_script(spec, REFERENCE_SOLUTIONS[solution]))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "solution.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert "validation" in run.stdout  # both reference solutions validate on a holdout

    submission = pd.read_csv(tmp_path / "submission.csv")
    assert list(submission.columns) == [spec.id_column, *spec.target_columns]
    assert submission[spec.id_column].tolist() == test["id"].tolist()
    validate_submission(submission, answers, spec)
    score = grade(submission, answers, spec)
    # The target is learnable: each solution must beat a blind guess clearly.
    blind = {"roc_auc": 0.5, "multiclass_log_loss": np.log(3), "rmse": None}[spec.metric]  # uniform guesses
    if blind is None:  # rmse of predicting the mean
        blind = float(answers[spec.answer_columns[0]].std())
    assert get_metric(spec.metric).is_better(score, blind), (score, blind)
