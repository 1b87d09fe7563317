"""The execution-cost model (wmrl_envs/world_models/execution_cost.py) and its fit
(wmrl_envs/world_models/build/execution_cost.py): a price for a script before it runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wmrl_envs.analysis.code_features import FEATURE_NAMES
from wmrl_envs.errors import ConfigError
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.build.execution_cost import ALPHAS, fit_cost_model, task_folds
from wmrl_envs.world_models.execution_cost import ExecutionCostModel, feature_rows

FEATURES = ("log_rows", "family_random_forest", "n_loops")


def synthetic_runs(n_tasks: int = 12, per_task: int = 10, seed: int = 0):
    """Runs whose log CPU is 0.5 log rows + 1.2 (a forest) + noise, on tasks of different sizes."""
    rng = np.random.default_rng(seed)
    tasks = [f"t{t}" for t in range(n_tasks) for _ in range(per_task)]
    log_rows = np.repeat(rng.uniform(5, 12, n_tasks), per_task)
    forest = rng.integers(0, 2, len(tasks)).astype(float)
    loops = rng.integers(0, 3, len(tasks)).astype(float)
    log_cpu = -4.0 + 0.5 * log_rows + 1.2 * forest + 0.05 * rng.standard_normal(len(tasks))
    return np.column_stack([log_rows, forest, loops]), np.exp(log_cpu), tasks


def test_the_fit_recovers_a_log_linear_price_and_measures_it_on_unseen_tasks():
    x, cpu, tasks = synthetic_runs()
    model = fit_cost_model(x, cpu, tasks, FEATURES)
    assert model.measured["alpha"] in ALPHAS and model.measured["rows"] == len(cpu)
    assert model.measured["cv_spearman"] > 0.95 and model.measured["cv_group_spearman"] > 0.9
    assert model.residual_sd < 0.2
    fresh, fresh_cpu, _ = synthetic_runs(seed=1)
    assert np.allclose(model.predict_log(fresh), np.log(fresh_cpu), atol=0.3)
    # A forest costs about e^1.2 times the same script without one.
    no_forest, forest = np.array([[8.0, 0.0, 1.0]]), np.array([[8.0, 1.0, 1.0]])
    assert model.predict_log(forest)[0] - model.predict_log(no_forest)[0] == pytest.approx(1.2, abs=0.15)


def test_the_folds_keep_each_task_whole_and_bad_runs_are_refused():
    folds = task_folds(["a", "a", "b", "c", "c", "d", "e", "f"])
    assert folds[0] == folds[1] and folds[3] == folds[4] and len(set(folds)) == 5
    with pytest.raises(ConfigError, match="at least 5 tasks"):
        task_folds(["a", "b"])
    x, cpu, tasks = synthetic_runs()
    with pytest.raises(ConfigError, match="> 0"):
        fit_cost_model(x, np.where(np.arange(len(cpu)) == 3, 0.0, cpu), tasks, FEATURES)
    with pytest.raises(ConfigError, match="one feature row"):
        fit_cost_model(x[:, :2], cpu, tasks, FEATURES)


def test_a_model_survives_a_round_trip_and_a_bad_file_is_a_typed_error(tmp_path):
    x, cpu, tasks = synthetic_runs()
    model = fit_cost_model(x, cpu, tasks, FEATURES)
    again = ExecutionCostModel.load(model.save(tmp_path / "cost.json"))
    assert np.array_equal(again.predict_log(x), model.predict_log(x)) and again.measured == model.measured
    with pytest.raises(ConfigError, match="build_execution_cost"):
        ExecutionCostModel.load(tmp_path / "missing.json")
    data = json.loads((tmp_path / "cost.json").read_text())
    (tmp_path / "old.json").write_text(json.dumps({**data, "format": 0}))
    with pytest.raises(ConfigError, match="format"):
        ExecutionCostModel.load(tmp_path / "old.json")
    with pytest.raises(ConfigError, match="lacks"):
        ExecutionCostModel(features=("no_such_feature",), mean=(0.0,), scale=(1.0,), weights=(0.0,), intercept=0.0)
    with pytest.raises(ConfigError, match="one length"):
        ExecutionCostModel(features=FEATURES, mean=(0.0,), scale=(1.0,), weights=(0.0,), intercept=0.0)


FOREST_ON_TEXT = """\
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.feature_extraction.text import TfidfVectorizer
from scipy.sparse import hstack

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
text = TfidfVectorizer(ngram_range=(1, 2), analyzer="char_wb").fit(train["text"])
model = RandomForestRegressor(n_estimators=500, random_state=0).fit(text.transform(train["text"]), train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict(text.transform(test["text"]))}).to_csv(
    "submission.csv", index=False)
"""
CONSTANT = """\
import pandas as pd

test = pd.read_csv("data/test.csv")
pd.DataFrame({"id": test["id"], "dead": 0.5}).to_csv("submission.csv", index=False)
"""


def test_the_shipped_model_is_measured_and_prices_a_large_forest_above_a_constant():
    model = ExecutionCostModel.load()
    m = model.measured
    assert set(model.features) <= set(FEATURE_NAMES)
    assert m["rows"] >= 500 and m["tasks"] >= 20 and m["cv_spearman"] is not None
    text_task, small_task = get_task("trump-tweet-source"), get_task("car-crash-fatality")
    forest, constant = model.predict([text_task, small_task], [FOREST_ON_TEXT, CONSTANT])
    assert forest > 2 * constant > 0
    rows = feature_rows([small_task], [CONSTANT])
    assert rows.shape == (1, len(FEATURE_NAMES))
    assert np.array_equal(model.predict([small_task], [CONSTANT]), model.predict([small_task], [CONSTANT]))
