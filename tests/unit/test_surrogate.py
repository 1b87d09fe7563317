"""The surrogate world model: static code features, the shipped artefact and its contract."""

from __future__ import annotations

import importlib.util
import math

import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, SolutionChoices, render_script
from wmrl_envs.analysis.code_features import (
    FEATURE_NAMES,
    SCRIPT_FEATURES,
    analyse_script,
    feature_vector,
    script_features,
)
from wmrl_envs.errors import ConfigError, MissingExtraError
from wmrl_envs.tasks import list_tasks
from wmrl_envs.world_models import Prediction, make_world_model
from wmrl_envs.world_models import surrogate as surrogate_lib
from wmrl_envs.world_models.build.corpus import BROKEN_MUTATIONS, mutate
from wmrl_envs.world_models.surrogate import SurrogateConfig, SurrogateWorldModel

# Written the way an LLM agent writes, not by the grammar.
HAND_WRITTEN = """\
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression  # imported, never used
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
X = train.drop(columns=["id", "target"]).fillna(0)
y = train["target"]
X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0)
model = RandomForestClassifier(n_estimators=400, max_depth=8, random_state=0)
model.fit(X_tr, y_tr)
print("validation auc", roc_auc_score(y_va, model.predict_proba(X_va)[:, 1]))
model.fit(X, y)
proba = model.predict_proba(test[X.columns].fillna(0))[:, 1]
pd.DataFrame({"id": test["id"], "target": proba}).to_csv("submission.csv", index=False)
"""


# ----------------------------------------------------------------------------- code features


def test_features_of_a_hand_written_script():
    f = script_features(HAND_WRITTEN)
    assert f["syntax_ok"] == 1.0 and f["n_imports"] == 5.0
    # Families come from what is called, not what is imported.
    assert f["family_random_forest"] == 1.0 and f["family_linear"] == 0.0 and f["n_model_families"] == 1.0
    assert f["hp_n_estimators"] == pytest.approx(math.log1p(400)) and f["hp_max_depth"] == pytest.approx(math.log1p(8))
    assert f["validation_holdout"] == 1.0 and f["validation_cv"] == 0.0
    assert f["writes_submission"] == 1.0 and f["writes_index"] == 0.0
    assert f["reads_train"] == f["reads_test"] == 1.0
    assert f["imputer"] == 1.0 and f["predict_proba"] == 1.0 and f["random_state"] == 1.0
    assert f["undefined_names"] == 0.0 and f["while_true"] == 0.0 and f["network"] == 0.0
    assert set(f) == set(SCRIPT_FEATURES)


def test_a_syntax_error_keeps_only_text_features():
    broken = HAND_WRITTEN.replace("random_state=0)\nmodel.fit", "random_state=0\nmodel.fit", 1)
    analysis = analyse_script(broken)
    assert analysis.tree is None
    f = analysis.features
    assert f["syntax_ok"] == 0.0 and f["family_random_forest"] == 0.0 and f["writes_submission"] == 0.0
    assert f["mentions_submission"] == 1.0 and f["n_imports"] == 5.0 and f["log_chars"] > 0


def test_constant_flags_select_one_branch():
    script = """\
import pandas as pd
from sklearn.model_selection import KFold, cross_val_score, train_test_split
MODE = "cv"
USE_LOG = False
train = pd.read_csv("data/train.csv")
if MODE == "holdout":
    parts = train_test_split(train)
else:
    scores = cross_val_score(None, train, train, cv=KFold(3))
target = np.log1p(train["y"]) if USE_LOG else train["y"]
"""
    f = script_features(script)
    assert f["validation_cv"] == 1.0 and f["validation_holdout"] == 0.0
    assert f["log_target"] == 0.0


def test_suspicious_patterns_are_flagged():
    f = script_features("import time\nimport requests\nwhile True:\n    time.sleep(1)\nprint(blend)\n")
    assert f["while_true"] == 1.0 and f["sleep"] == 1.0 and f["network"] == 1.0
    assert f["undefined_names"] == 1.0
    assert script_features("while True:\n    break\n")["while_true"] == 0.0


def test_writing_the_index_is_flagged():
    f = script_features(HAND_WRITTEN.replace('.to_csv("submission.csv", index=False)', '.to_csv("submission.csv")'))
    assert f["writes_submission"] == 1.0 and f["writes_index"] == 1.0


# ----------------------------------------------------------------------------- shipped artefact


@pytest.fixture(scope="module")
def model() -> SurrogateWorldModel:
    return SurrogateWorldModel.load()


@pytest.fixture(scope="module")
def heldout_tasks():
    tasks = list_tasks(suite="mle", split="heldout")
    # A few task types; the surrogate never trained on any held-out task.
    return [next(t for t in tasks if t.spec.task_type == kind) for kind in ("binary", "multiclass", "regression")]


def _script(task, name: str, seed: int = 0) -> str:
    return render_script(task.spec, REFERENCE_SOLUTIONS[name], seed)


def test_make_world_model_builds_the_surrogate():
    model = make_world_model("surrogate")
    assert isinstance(model, SurrogateWorldModel) and model.name == "surrogate"


def test_shipped_artefact_predicts_in_unit_interval_deterministically(model, heldout_tasks):
    assert model.manifest["corpus"]["sha256"] and model.manifest["train_tasks"]
    assert not set(model.manifest["train_tasks"]) & {t.id for t in list_tasks(suite="mle", split="heldout")}
    tasks = [t for t in heldout_tasks for _ in REFERENCE_SOLUTIONS]
    scripts = [_script(t, name, seed=3) for t in heldout_tasks for name in REFERENCE_SOLUTIONS]
    first = model.predict(tasks, scripts)
    assert len(first) == len(scripts) and all(isinstance(p, Prediction) for p in first)
    assert all(p.parsed and 0.0 <= p.score <= 1.0 and p.uncertainty >= 0.0 and p.cost_s > 0 for p in first)
    assert [p.score for p in model.predict(tasks, scripts)] == [p.score for p in first]


def test_broken_scripts_predict_lower_than_a_strong_reference(model, heldout_tasks):
    strong, broken = [], []
    for task in heldout_tasks:
        strong.append(model.predict([task], [_script(task, "hist_gb")])[0].score)
        variants = [mutate(_script(task, "hist_gb", seed=5), m, task.spec, seed=5) for m in BROKEN_MUTATIONS]
        broken.extend(p.score for p in model.predict([task] * len(variants), variants))
    assert sum(broken) / len(broken) < sum(strong) / len(strong)


def test_a_script_that_does_not_parse_is_a_proved_syntax_error(model, heldout_tasks):
    task = heldout_tasks[0]
    bad = mutate(_script(task, "hist_gb"), "syntax_error", task.spec, seed=0)
    prediction = model.predict([task], [bad])[0]
    assert prediction.score == 0.0 and prediction.parsed and prediction.proved
    assert prediction.status == "syntax_error" and prediction.exception == "SyntaxError"
    assert prediction.message.startswith("SyntaxError: ")
    # Without the prover the score-only model still gives the script nothing.
    unproved = SurrogateWorldModel(prove=False).predict([task], [bad])[0]
    assert unproved.score == 0.0 and not unproved.proved and "does not parse" in unproved.error


def test_empty_batch_and_mismatched_lengths(model, heldout_tasks):
    assert model.predict([], []) == []
    with pytest.raises(ConfigError, match="2 tasks for 1 scripts"):
        model.predict(heldout_tasks[:2], ["pass\n"])


def test_static_head_is_a_real_fallback(heldout_tasks):
    model = SurrogateWorldModel.load(embed=False)
    assert not model.embed
    scores = [p.score for p in model.predict(heldout_tasks, [_script(t, "linear") for t in heldout_tasks])]
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_missing_embedding_package_names_the_llm_extra(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == surrogate_lib.EMBEDDING_PACKAGE else find_spec(name, *a))
    with pytest.raises(MissingExtraError, match=r"embedding head \(embed=True\) needs the llm extra"):
        SurrogateWorldModel.load(embed=True)
    # The shipped default head is the one cross-validation chose, and it needs no embedding package.
    model = SurrogateWorldModel.load()
    assert model.manifest["default_head"] == model.manifest["head_choice"]["chosen"] == "static"
    assert not model.embed


# ----------------------------------------------------------------------------- fitting


def test_fit_save_load_round_trip(tmp_path):
    tasks = list_tasks(suite="mle", split="train")[:2]
    rows = [(t, SolutionChoices(model=m, capacity=c)) for t in tasks for m in ("constant", "linear", "hist_gb")
            for c in ("low", "high")]
    scores = [0.1 if c.model == "constant" else 0.5 if c.model == "linear" else 0.9 for _, c in rows]
    scripts = [render_script(t.spec, c) for t, c in rows]
    config = SurrogateConfig(n_members=2, max_iter=20, min_samples_leaf=2)
    fitted = SurrogateWorldModel.fit([t for t, _ in rows], scripts, scores, embed=False, config=config)
    path = fitted.save(tmp_path / "surrogate.joblib")
    loaded = SurrogateWorldModel.load(path)
    assert loaded.manifest["n_rows"] == len(rows) and loaded.manifest["embedding"] is None
    assert loaded.manifest["default_head"] == "static" and not loaded.embed
    with pytest.raises(ConfigError, match="default_head"):
        SurrogateWorldModel.fit([t for t, _ in rows], scripts, scores, embed=False, config=config,
                                default_head="embed")
    row_tasks = [t for t, _ in rows]
    assert [p.score for p in loaded.predict(row_tasks, scripts)] == [p.score for p in fitted.predict(row_tasks, scripts)]


def test_fit_refuses_heldout_tasks(heldout_tasks):
    task = heldout_tasks[0]
    with pytest.raises(ConfigError, match="never train on held-out"):
        SurrogateWorldModel.fit([task], [_script(task, "linear")], [0.5], embed=False)


def test_feature_vector_covers_every_feature(heldout_tasks):
    vector = feature_vector(heldout_tasks[0], analyse_script(HAND_WRITTEN))
    assert len(vector) == len(FEATURE_NAMES) and all(math.isfinite(v) for v in vector)
