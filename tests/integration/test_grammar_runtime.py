"""Every preprocessing path of the grammar runs in the real agent runtime on data with missing values.

The scripts run with the agent runtime venv's interpreter (its own pandas and scikit-learn, the
versions agent code gets), on tables whose numeric, categorical and free-text columns all have
missing values: the case where pandas 3's ``astype(str)`` kept NaN and the linear, kNN and MLP
solutions crashed. One interpreter runs all scripts in turn (``runpy``), so scikit-learn is
imported once; each script gets a fresh working directory with the task's files under ``data/``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess

import numpy as np
import pandas as pd

from agents.code.grammar import SLOTS, SolutionChoices, render_script
from wmrl_envs.grading import grade, validate_submission
from wmrl_envs.sandbox.runtime import load_runtime
from wmrl_envs.task_spec import TaskSpec

RUNNER = """
import json, os, runpy, sys, traceback, warnings
warnings.filterwarnings("ignore")
results = {}
for name in sorted(os.listdir(sys.argv[1])):
    os.chdir(os.path.join(sys.argv[1], name))
    try:
        runpy.run_path("solution.py", run_name="__main__")
        results[name] = None
    except BaseException as exc:
        results[name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-400:]
print(json.dumps(results))
"""

SPECS = {
    "binary": TaskSpec(id="nan-binary", name="nan", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                       metric="roc_auc", task_type="binary", classes=("no", "yes"), target_columns=("p_yes",),
                       answer_columns=("label",)),
    "regression": TaskSpec(id="nan-regression", name="nan", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                           metric="rmse", task_type="regression"),
}


def table_with_missing_values(spec: TaskSpec, n_train: int = 200, n_test: int = 80):
    """(train, test, answers): numeric, two categorical and one text column, each with missing values."""
    rng = np.random.default_rng(1)
    n = n_train + n_test
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], size=n).astype(object)
    city = rng.choice(["oslo", "rome", "lima", "kyiv"], size=n).astype(object)
    note = np.array([f"the customer wrote a note about the {c} item and its {w} delivery"
                     for c, w in zip(colour, rng.choice(["slow", "fast"], size=n))], dtype=object)
    signal = 2 * x1 - x2 + (colour == "red")
    for column, share in ((x1, 0.1), (colour, 0.15), (city, 0.3), (note, 0.2)):
        column[rng.random(n) < share] = np.nan
    label = spec.answer_columns[0]
    target = (np.exp(0.5 * signal) if spec.classes is None
              else np.where(signal > np.nanmedian(signal), "yes", "no"))
    frame = pd.DataFrame({"id": np.arange(n), "x1": x1, "x2": x2, "colour": colour, "city": city, "note": note,
                          label: target})
    if spec.classes is None:  # a NaN x1 makes a NaN regression target: keep the target defined
        frame[label] = frame[label].fillna(1.0)
    train, test = frame.iloc[:n_train], frame.iloc[n_train:]
    return train, test.drop(columns=[label]), test[["id", label]]


def solutions() -> list[tuple[str, SolutionChoices]]:
    """Every model family with every categorical encoding; the other slots cycle through their options."""
    out = []
    for i, (model, categorical) in enumerate(itertools.product(SLOTS["model"], SLOTS["categorical"])):
        spec = "binary" if i % 2 == 0 else "regression"
        out.append((spec, SolutionChoices(
            model=model, categorical=categorical, capacity=SLOTS["capacity"][i % 3], text=SLOTS["text"][i % 3],
            impute=SLOTS["impute"][i % 2], scale=SLOTS["scale"][(i // 2) % 2],
            target_transform=SLOTS["target_transform"][(i // 3) % 2], validation=SLOTS["validation"][i % 3])))
    return out


def test_every_preprocessing_path_handles_missing_values_in_the_agent_runtime(tmp_path):
    runtime = load_runtime()  # builds the venv if it is missing (scripts/setup.sh does it ahead)
    tables = {name: table_with_missing_values(spec) for name, spec in SPECS.items()}
    for name, (train, test, _) in tables.items():
        (tmp_path / "data" / name).mkdir(parents=True)
        train.to_csv(tmp_path / "data" / name / "train.csv", index=False)
        test.to_csv(tmp_path / "data" / name / "test.csv", index=False)
    runs = tmp_path / "runs"
    planned = solutions()
    for k, (name, choices) in enumerate(planned):
        work = runs / f"{k:02d}"
        work.mkdir(parents=True)
        (work / "data").symlink_to(tmp_path / "data" / name)
        (work / "solution.py").write_text(render_script(SPECS[name], choices))

    env = {"PATH": os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "HOME": str(tmp_path)}
    done = subprocess.run([str(runtime.python), "-c", RUNNER, str(runs)], capture_output=True, text=True,
                          env=env, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    failed = {planned[int(k)][1].describe(): err for k, err in results.items() if err}
    assert not failed, failed
    for k, (name, _) in enumerate(planned):
        submission = pd.read_csv(runs / f"{k:02d}" / "submission.csv")
        answers = tables[name][2]
        validate_submission(submission, answers, SPECS[name])
        assert np.isfinite(grade(submission, answers, SPECS[name]))
