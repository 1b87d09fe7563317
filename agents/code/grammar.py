"""A grammar of ML solution scripts: discrete choices in, a complete readable script out.

A solution is a :class:`SolutionChoices` (one value per :data:`SLOTS` entry). Rendering it
for a task gives a standalone Python script that reads ``data/train.csv`` and
``data/test.csv``, builds a scikit-learn pipeline, prints a validation score when asked to,
and writes ``submission.csv`` in the task's format. The grammar policy learns a distribution
over these choices; the reference solutions, the world-model corpus and the examples in the
docs all come from the same renderer, so every script the project writes itself is readable.

The rendered script decides column roles at run time (numeric, categorical, free text), so
one grammar serves tabular, text and pixel tasks.
"""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass
from typing import Any

from wmrl_envs.errors import ConfigError
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.task_spec import TaskSpec

#: Every slot of the grammar and its choices, in the order a policy decides them.
SLOTS: dict[str, tuple[str, ...]] = {
    "model": ("constant", "linear", "knn", "tree", "random_forest", "extra_trees", "hist_gb", "mlp"),
    "capacity": ("low", "medium", "high"),
    "categorical": ("drop", "onehot", "ordinal"),
    "text": ("drop", "tfidf_word", "tfidf_char"),
    "impute": ("median", "mean"),
    "scale": ("none", "standard"),
    "target_transform": ("none", "log1p"),
    "validation": ("none", "holdout", "cv3"),
}


@dataclass(frozen=True)
class SolutionChoices:
    """One point of the grammar. Each field takes a value from :data:`SLOTS`."""

    model: str = "hist_gb"
    capacity: str = "medium"
    categorical: str = "ordinal"
    text: str = "tfidf_word"
    impute: str = "median"
    scale: str = "standard"
    target_transform: str = "none"
    validation: str = "holdout"

    def __post_init__(self) -> None:
        for slot, options in SLOTS.items():
            value = getattr(self, slot)
            if value not in options:
                raise ConfigError(f"{slot}={value!r} is not one of {options}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_indices(cls, indices: dict[str, int] | list[int]) -> SolutionChoices:
        """Build choices from per-slot option indices (in :data:`SLOTS` order for a list)."""
        if isinstance(indices, dict):
            return cls(**{slot: SLOTS[slot][int(i)] for slot, i in indices.items()})
        return cls(**{slot: SLOTS[slot][int(i)] for slot, i in zip(SLOTS, indices)})

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.to_dict().items())


# Hyperparameters per model family and capacity. Classifier and regressor share the
# structure; ``{kind}`` becomes ``Classifier`` or ``Regressor``.
_MODELS: dict[str, dict[str, str]] = {
    "constant": {
        "low": "DummyClassifier(strategy='prior') if CLASSIFY else DummyRegressor(strategy='median')",
        "medium": "DummyClassifier(strategy='prior') if CLASSIFY else DummyRegressor(strategy='mean')",
        "high": "DummyClassifier(strategy='prior') if CLASSIFY else DummyRegressor(strategy='mean')",
    },
    "linear": {
        "low": "LogisticRegression(C=0.1, max_iter=300) if CLASSIFY else Ridge(alpha=10.0)",
        "medium": "LogisticRegression(C=1.0, max_iter=500) if CLASSIFY else Ridge(alpha=1.0)",
        "high": "LogisticRegression(C=10.0, max_iter=1000) if CLASSIFY else Ridge(alpha=0.1)",
    },
    "knn": {
        "low": "KNeighbors{kind}(n_neighbors=50)",
        "medium": "KNeighbors{kind}(n_neighbors=15)",
        "high": "KNeighbors{kind}(n_neighbors=5)",
    },
    "tree": {
        "low": "DecisionTree{kind}(max_depth=3, random_state=SEED)",
        "medium": "DecisionTree{kind}(max_depth=6, min_samples_leaf=5, random_state=SEED)",
        "high": "DecisionTree{kind}(max_depth=12, min_samples_leaf=2, random_state=SEED)",
    },
    "random_forest": {
        "low": "RandomForest{kind}(n_estimators=50, max_depth=6, random_state=SEED)",
        "medium": "RandomForest{kind}(n_estimators=150, min_samples_leaf=2, random_state=SEED)",
        "high": "RandomForest{kind}(n_estimators=300, random_state=SEED)",
    },
    "extra_trees": {
        "low": "ExtraTrees{kind}(n_estimators=50, max_depth=8, random_state=SEED)",
        "medium": "ExtraTrees{kind}(n_estimators=150, min_samples_leaf=2, random_state=SEED)",
        "high": "ExtraTrees{kind}(n_estimators=300, random_state=SEED)",
    },
    "hist_gb": {
        "low": "HistGradientBoosting{kind}(max_iter=100, learning_rate=0.1, max_depth=3, random_state=SEED)",
        "medium": "HistGradientBoosting{kind}(max_iter=300, learning_rate=0.05, random_state=SEED)",
        "high": "HistGradientBoosting{kind}(max_iter=800, learning_rate=0.03, max_leaf_nodes=63, "
        "early_stopping=True, random_state=SEED)",
    },
    "mlp": {
        "low": "MLP{kind}(hidden_layer_sizes=(32,), max_iter=200, early_stopping=True, random_state=SEED)",
        "medium": "MLP{kind}(hidden_layer_sizes=(128,), max_iter=300, early_stopping=True, random_state=SEED)",
        "high": "MLP{kind}(hidden_layer_sizes=(256, 128), alpha=1e-3, max_iter=400, early_stopping=True, "
        "random_state=SEED)",
    },
}

# Models that cannot take sparse input: the column transformer then outputs dense arrays
# and the text vectoriser is kept small.
_DENSE_ONLY = {"hist_gb"}

# The validation metric, as a sklearn expression of (y_true, pred) in submission format.
_VALIDATION_EXPR: dict[str, str] = {
    "accuracy": "accuracy_score(y_true, pred)",
    "balanced_accuracy": "balanced_accuracy_score(y_true, pred)",
    "macro_f1": "f1_score(y_true, pred, average='macro')",
    "roc_auc": "roc_auc_score(y_true == CLASSES[1], pred)",
    "log_loss": "-np.mean(np.log(np.clip(np.where(y_true == CLASSES[1], pred, 1 - pred), 1e-15, 1)))",
    "multiclass_log_loss": "-np.mean(np.log(np.clip(pred[np.arange(len(pred)), [CLASSES.index(v) for v in y_true]], "
    "1e-15, 1)))",
    "rmse": "mean_squared_error(y_true, pred) ** 0.5",
    "rmsle": "mean_squared_log_error(y_true, np.clip(pred, 0, None)) ** 0.5",
    "mae": "mean_absolute_error(y_true, pred)",
    "r2": "r2_score(y_true, pred)",
    "qwk": "cohen_kappa_score(y_true, pred, weights='quadratic')",
    "mape": "mean_absolute_percentage_error(y_true, pred)",
    "median_ae": "median_absolute_error(y_true, pred)",
}


def _literal(value: Any) -> str:
    """A Python literal for a label value (labels may be str, int or float)."""
    return repr(value.item() if hasattr(value, "item") else value)


def render_script(spec: TaskSpec, choices: SolutionChoices, seed: int = 0) -> str:
    """Render a complete solution script for ``spec`` following ``choices``."""
    metric = get_metric(spec.metric)
    prediction = metric.prediction
    classify = prediction != "value"
    if classify and not spec.classes:
        raise ConfigError(f"task {spec.id}: a classification metric needs spec.classes to render a solution")
    kind = "Classifier" if classify else "Regressor"
    model_expr = _MODELS[choices.model][choices.capacity].format(kind=kind)
    dense = choices.model in _DENSE_ONLY
    log_target = choices.target_transform == "log1p" and not classify
    classes = "[" + ", ".join(_literal(c) for c in spec.classes) + "]" if classify else "None"
    max_features = {"low": 2000, "medium": 5000, "high": 20000}[choices.capacity]
    if dense:  # dense TF-IDF matrices make histogram boosting crawl: keep them narrow
        max_features = 200
    analyzer = "analyzer='char_wb', ngram_range=(2, 4)" if choices.text == "tfidf_char" else "ngram_range=(1, 2)"
    validation_expr = _VALIDATION_EXPR.get(spec.metric)
    if validation_expr is None:
        validation_expr = "accuracy_score(y_true, pred)" if prediction == "label" else "r2_score(y_true, pred)"

    header = f'''\
        """Solution for task {spec.id} ({spec.task_type}, metric {spec.metric}).

        Choices: {choices.describe()}
        """
        import numpy as np
        import pandas as pd
        from sklearn.compose import ColumnTransformer
        from sklearn.dummy import DummyClassifier, DummyRegressor
        from sklearn.ensemble import (ExtraTreesClassifier, ExtraTreesRegressor, HistGradientBoostingClassifier,
                                      HistGradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor)
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression, Ridge
        from sklearn.metrics import (accuracy_score, balanced_accuracy_score, cohen_kappa_score, f1_score,
                                     mean_absolute_error, mean_absolute_percentage_error, mean_squared_error,
                                     mean_squared_log_error, median_absolute_error, r2_score, roc_auc_score)
        from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
        from sklearn.neural_network import MLPClassifier, MLPRegressor
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        SEED = {seed}
        ID = {spec.id_column!r}
        LABEL = {spec.answer_columns[0]!r}
        SUBMISSION_COLUMNS = {list(spec.target_columns)!r}
        PREDICTION = {prediction!r}
        CLASSES = {classes}
        CLASSIFY = {classify}
        LOG_TARGET = {log_target}
        VALIDATION = {choices.validation!r}

        train = pd.read_csv("data/train.csv")
        test = pd.read_csv("data/test.csv")
        y = train[LABEL]
        X = train.drop(columns=[ID, LABEL])


        def as_label(value):
            """Labels as text, so that '1', 1 and 1.0 name the same class."""
            return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


        if CLASSIFY:
            y = y.map(as_label)
            CLASSES = [as_label(c) for c in CLASSES]
        X_test = test[X.columns].copy()


        def column_roles(frame):
            """Split columns into numeric, categorical and free text (long strings)."""
            numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
            other = [c for c in frame.columns if c not in numeric]
            text = [c for c in other if frame[c].astype(str).str.len().mean() > 30]
            return numeric, [c for c in other if c not in text], text


        numeric_cols, categorical_cols, text_cols = column_roles(X)
        for frame in (X, X_test):
            # A missing category is a category of its own, and missing text is empty: pandas 3
            # keeps NaN through astype(str), and most models reject the NaN an encoder passes on.
            frame[categorical_cols] = frame[categorical_cols].fillna("__missing__").astype(str)
            frame[text_cols] = frame[text_cols].fillna("").astype(str)
        '''

    scaler = ", StandardScaler()" if choices.scale == "standard" else ""
    steps = [f'''\
        parts = []
        if numeric_cols:
            parts.append(("num", make_pipeline(SimpleImputer(strategy={choices.impute!r}){scaler}), numeric_cols))
        ''']
    if choices.categorical == "onehot":
        steps.append(f'''\
        if categorical_cols:
            parts.append(("cat", OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=5,
                                               max_categories=30, sparse_output={not dense}), categorical_cols))
        ''')
    elif choices.categorical == "ordinal":
        steps.append('''\
        if categorical_cols:
            parts.append(("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), categorical_cols))
        ''')
    if choices.text != "drop":
        steps.append(f'''\
        for i, col in enumerate(text_cols):
            parts.append((f"text{{i}}", TfidfVectorizer({analyzer}, max_features={max_features}, sublinear_tf=True), col))
        ''')
    steps.append(f'''\
        if not parts:  # nothing usable: fall back to a constant feature so the pipeline still fits
            X["_bias"], X_test["_bias"] = 0.0, 0.0
            parts.append(("bias", "passthrough", ["_bias"]))


        def make_model():
            features = ColumnTransformer(parts, sparse_threshold={0.0 if dense else 0.3})
            return make_pipeline(features, {model_expr})
        ''')

    body = f'''\


        def fit_predict(X_fit, y_fit, X_new):
            """Fit on (X_fit, y_fit) and predict X_new in the submission format."""
            model = make_model()
            model.fit(X_fit, np.log1p(np.clip(y_fit, 0, None)) if LOG_TARGET else y_fit)
            if PREDICTION == "value":
                pred = model.predict(X_new)
                return np.expm1(pred) if LOG_TARGET else pred
            if PREDICTION == "label":
                return model.predict(X_new)
            fitted = list(model.classes_)
            proba = model.predict_proba(X_new)
            full = np.zeros((len(X_new), len(CLASSES)))
            for j, c in enumerate(CLASSES):
                if c in fitted:
                    full[:, j] = proba[:, fitted.index(c)]
            full[full.sum(axis=1) == 0] = 1.0 / len(CLASSES)
            full /= full.sum(axis=1, keepdims=True)
            return full[:, 1] if PREDICTION == "probability" else full


        def validation_score(y_true, pred):
            return {validation_expr}


        if VALIDATION == "holdout":
            stratify = y if CLASSIFY and y.value_counts().min() >= 2 else None
            X_a, X_b, y_a, y_b = train_test_split(X, y, test_size=0.2, random_state=SEED, stratify=stratify)
            print(f"validation {spec.metric}: {{validation_score(y_b, fit_predict(X_a, y_a, X_b)):.5f}}")
        elif VALIDATION == "cv3":
            folds = (StratifiedKFold if CLASSIFY and y.value_counts().min() >= 3 else KFold)(3, shuffle=True, random_state=SEED)
            scores = [validation_score(y.iloc[b], fit_predict(X.iloc[a], y.iloc[a], X.iloc[b])) for a, b in folds.split(X, y)]
            print(f"validation {spec.metric} (3-fold): {{np.mean(scores):.5f}} +- {{np.std(scores):.5f}}")

        pred = fit_predict(X, y, X_test)
        submission = pd.DataFrame({{ID: test[ID]}})
        if PREDICTION == "class_probabilities":
            for j, col in enumerate(SUBMISSION_COLUMNS):
                submission[col] = pred[:, j]
        else:
            submission[SUBMISSION_COLUMNS[0]] = pred
        submission.to_csv("submission.csv", index=False)
        print(f"wrote submission.csv with {{len(submission)}} rows")
        '''
    script = textwrap.dedent(header) + "".join(textwrap.dedent(s) for s in steps) + textwrap.dedent(body)
    return script


#: Named reference solutions used for smoke evaluations and the docs, weakest first.
REFERENCE_SOLUTIONS: dict[str, SolutionChoices] = {
    "constant": SolutionChoices(model="constant", validation="none", text="drop", categorical="drop"),
    "linear": SolutionChoices(model="linear", categorical="onehot", scale="standard", validation="holdout"),
    "random_forest": SolutionChoices(model="random_forest", capacity="medium", categorical="ordinal"),
    "hist_gb": SolutionChoices(model="hist_gb", capacity="medium", categorical="ordinal", scale="none"),
}


def render_response(spec: TaskSpec, choices: SolutionChoices, seed: int = 0, analysis: str | None = None) -> str:
    """Wrap a rendered script in the agent response format: analysis, then one fenced block."""
    analysis = analysis or f"Plan for {spec.id}: {choices.describe()}."
    return format_response(analysis, render_script(spec, choices, seed))


def format_response(analysis: str, script: str) -> str:
    """The agent response format: a short analysis, then the script in one fenced block."""
    return f"{analysis}\n\n```python\n{script}```\n"


def reference_responder(name: str):
    """A responder (task, k, seed) -> k responses that always answers with one reference solution."""
    if name not in REFERENCE_SOLUTIONS:
        raise ConfigError(f"unknown reference solution {name!r}; known: {sorted(REFERENCE_SOLUTIONS)}")
    choices = REFERENCE_SOLUTIONS[name]

    def respond(task, k: int, seed: int) -> list[str]:
        return [render_response(task.spec, choices, seed=seed + i, analysis=f"Reference solution '{name}'.")
                for i in range(k)]

    return respond
