"""The reference population: diverse solutions whose test scores form the built-in leaderboards.

Built-in leaderboards are generated once, honestly (docs/architecture.md, "Task format"): a
population of genuinely different solutions, from trivial to strong, is fitted on each task's
public ``train.csv`` and graded on its private answers. This is trusted code, so it runs in-process (no sandbox).

The population is a function of the task (:func:`population`): tabular tasks get baselines,
simple models, ensembles and feature-engineering variants; text tasks add bag-of-words and
character n-gram pipelines; image tasks get pixel, pooled-pixel and PCA pipelines. Every
classification solution predicts a class-probability matrix (hard predictions become one-hot
rows), and :func:`to_submission` turns it into the task's submission format.

``scripts/build_leaderboards.py`` runs the population and writes ``leaderboards/<suite>/``.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any

import numpy as np
import pandas as pd
from sklearn import discriminant_analysis as da
from sklearn import ensemble, linear_model, naive_bayes, neighbors, neural_network, svm, tree
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.feature_selection import SelectKBest, f_classif, f_regression
from sklearn.impute import SimpleImputer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    Binarizer,
    FunctionTransformer,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    QuantileTransformer,
    StandardScaler,
)

from wmrl_envs.errors import InvalidSubmissionError
from wmrl_envs.grading import get_metric, grade
from wmrl_envs.grading.grader import label_key
from wmrl_envs.task_spec import Task, TaskSpec
from wmrl_envs.tasks.loader import load_task

SEED = 0
# Kernel methods and sklearn's exact gradient boosting scale badly with rows: they are fitted
# on a seeded subsample of at most this many rows (itself a genuine variant of the solution).
KERNEL_ROWS = 2000
BOOSTING_ROWS = 3000

FitPredict = Callable[["TaskData"], np.ndarray]


# --- the task as the population sees it ---------------------------------------------------------


@dataclass(frozen=True)
class TaskData:
    """A task's public data split into feature kinds, plus what solutions need to know."""

    spec: TaskSpec
    prediction: str
    non_negative: bool
    ordinal: bool
    train: pd.DataFrame
    y: np.ndarray
    test: pd.DataFrame
    test_ids: np.ndarray
    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    text: tuple[str, ...]
    image_side: int | None = None

    @property
    def is_classification(self) -> bool:
        return self.prediction != "value"

    @property
    def n_classes(self) -> int:
        return len(self.spec.classes or ())

    @property
    def tabular(self) -> tuple[str, ...]:
        return self.numeric + self.categorical

    @classmethod
    def from_task(cls, task: Task) -> TaskData:
        spec = task.spec
        metric = get_metric(spec.metric)
        target = spec.answer_columns[0]
        train = pd.read_csv(task.public_dir / "train.csv")
        test = pd.read_csv(task.public_dir / "test.csv")
        y_raw = train.pop(target)
        train = train.drop(columns=[spec.id_column])
        test_ids = test.pop(spec.id_column).to_numpy()
        test = test[train.columns]

        text = tuple(c for c in spec.meta.get("text_columns", ()) if c in train.columns)
        numeric, categorical = [], []
        for col in train.columns:
            if col in text:
                train[col] = train[col].fillna("").astype(str)
                test[col] = test[col].fillna("").astype(str)
            elif pd.api.types.is_numeric_dtype(train[col]):
                numeric.append(col)
                train[col] = train[col].astype(float)
                test[col] = pd.to_numeric(test[col], errors="coerce").astype(float)
            else:
                # Plain object columns with np.nan for missing: what every sklearn encoder accepts.
                categorical.append(col)
                train[col] = train[col].astype(object).where(train[col].notna(), np.nan)
                test[col] = test[col].astype(object).where(test[col].notna(), np.nan)

        if metric.prediction == "value":
            y = y_raw.to_numpy(float)
        else:
            position = {label_key(c): i for i, c in enumerate(spec.classes)}
            y = np.array([position[label_key(v)] for v in y_raw], dtype=int)
        side = math.isqrt(len(numeric)) if spec.task_type.startswith("image") else None
        return cls(spec=spec, prediction=metric.prediction, non_negative=metric.non_negative,
                   ordinal=metric.ordinal, train=train, y=y, test=test, test_ids=test_ids,
                   numeric=tuple(numeric), categorical=tuple(categorical), text=text,
                   image_side=side if side and side * side == len(numeric) else None)


@dataclass(frozen=True)
class Solution:
    """One member of the population: a name, a family and a fit-and-predict function.

    ``fit_predict`` returns regression values, or for classification an ``(n_test, n_classes)``
    probability matrix in class order.
    """

    name: str
    family: str
    fit_predict: FitPredict = field(repr=False)


def to_submission(data: TaskData, output: np.ndarray) -> pd.DataFrame:
    """Turn a solution's output into the task's submission format."""
    spec = data.spec
    out = pd.DataFrame({spec.id_column: data.test_ids})
    if data.prediction == "value":
        values = np.nan_to_num(np.asarray(output, float), nan=float(np.mean(data.y)),
                               posinf=float(np.max(data.y)), neginf=float(np.min(data.y)))
        out[spec.target_columns[0]] = np.clip(values, 0, None) if data.non_negative else values
        return out
    proba = np.clip(np.nan_to_num(np.asarray(output, float)), 0, None)
    totals = proba.sum(axis=1, keepdims=True)
    proba = np.where(totals > 0, proba / np.where(totals > 0, totals, 1), 1 / data.n_classes)
    if data.prediction == "label":
        out[spec.target_columns[0]] = [spec.classes[i] for i in proba.argmax(axis=1)]
    elif data.prediction == "probability":
        out[spec.target_columns[0]] = proba[:, 1]
    else:
        for j, col in enumerate(spec.target_columns):
            out[col] = proba[:, j]
    return out


# --- trivial baselines ------------------------------------------------------------------------


def _prior(data: TaskData) -> np.ndarray:
    return np.bincount(data.y, minlength=data.n_classes) / len(data.y)


def _constant_proba(kind: str, data: TaskData) -> np.ndarray:
    n, k = len(data.test), data.n_classes
    rng = np.random.default_rng(SEED)
    if kind == "majority":
        return np.tile(np.eye(k)[np.argmax(_prior(data))], (n, 1))
    if kind == "prior":
        return np.tile(_prior(data), (n, 1))
    if kind == "uniform":
        return np.full((n, k), 1 / k)
    if kind == "random-label":
        return np.eye(k)[rng.integers(0, k, n)]
    if kind == "prior-sample":
        return np.eye(k)[rng.choice(k, n, p=_prior(data))]
    if kind == "random-proba":
        return rng.dirichlet(np.ones(k), n)
    raise ValueError(kind)


def _constant_value(kind: str, data: TaskData) -> np.ndarray:
    n, y = len(data.test), data.y
    rng = np.random.default_rng(SEED)
    values = {
        "mean": lambda: np.full(n, y.mean()),
        "median": lambda: np.full(n, np.median(y)),
        "midrange": lambda: np.full(n, (y.min() + y.max()) / 2),
        "random-train-value": lambda: rng.choice(y, n),
        "trimmed-mean": lambda: np.full(n, pd.Series(y).clip(*np.quantile(y, [0.1, 0.9])).mean()),
    }
    return values[kind]()


def trivial_solutions(data: TaskData) -> list[Solution]:
    if data.is_classification:
        kinds = ("majority", "prior", "uniform", "random-label", "prior-sample", "random-proba")
        return [Solution(f"trivial/{k}", "trivial", partial(_constant_proba, k)) for k in kinds]
    kinds = ("mean", "median", "midrange", "random-train-value", "trimmed-mean")
    return [Solution(f"trivial/{k}", "trivial", partial(_constant_value, k)) for k in kinds]


# --- fitting estimators -------------------------------------------------------------------------


def _rows(data: TaskData, limit: int | None, fraction: float | None) -> np.ndarray:
    """Seeded subsample of training rows (all rows when no limit applies)."""
    n = len(data.train)
    size = n if fraction is None else max(int(n * fraction), 2 * max(data.n_classes, 1))
    size = min(size, limit or n)
    if size >= n:
        return np.arange(n)
    if data.is_classification:
        # Stratify where every class has two rows, so the subsample still shows all classes.
        counts = np.bincount(data.y)
        strat = data.y if counts[counts > 0].min() >= 2 and size >= data.n_classes else None
        rows, _ = train_test_split(np.arange(n), train_size=size, random_state=SEED, stratify=strat)
        return np.sort(rows)
    return np.sort(np.random.default_rng(SEED).choice(n, size, replace=False))


def _class_matrix(estimator: Any, X: Any, k: int) -> np.ndarray:
    """Predicted probabilities in class order; estimators without probabilities give one-hot rows."""
    classes = np.asarray(estimator.classes_, dtype=int)
    out = np.zeros((X.shape[0], k))
    if hasattr(estimator, "predict_proba"):
        out[:, classes] = estimator.predict_proba(X)
    else:
        out[np.arange(X.shape[0]), np.asarray(estimator.predict(X), dtype=int)] = 1.0
    return out


def _fit_predict(build: Callable[[TaskData], Any], data: TaskData, *, limit: int | None = None,
                 fraction: float | None = None, log_target: bool = False, ordinal_regression: bool = False,
                 view: Callable[[TaskData], TaskData] | None = None) -> np.ndarray:
    if view is not None:
        data = view(data)
    rows = _rows(data, limit, fraction)
    X, y, X_test = data.train.iloc[rows], data.y[rows], data.test
    estimator = build(data)
    if ordinal_regression:
        # Ordinal classes as numbers: regress on the class position, round to the nearest class.
        estimator.fit(X, y.astype(float))
        codes = np.clip(np.rint(estimator.predict(X_test)), 0, data.n_classes - 1).astype(int)
        return np.eye(data.n_classes)[codes]
    if data.is_classification:
        estimator.fit(X, y)
        return _class_matrix(estimator, X_test, data.n_classes)
    if log_target:
        estimator.fit(X, np.log1p(y))
        return np.expm1(estimator.predict(X_test))
    estimator.fit(X, y)
    return estimator.predict(X_test)


def model(name: str, family: str, build: Callable[[TaskData], Any], **options: Any) -> Solution:
    """A solution that fits ``build(data)`` on the training rows and predicts the test rows."""
    return Solution(name, family, partial(_fit_predict, build, **options))


# --- preprocessing ------------------------------------------------------------------------------


def tabular_features(data: TaskData, *, encode: str = "onehot", scale: bool = True, impute: bool = True,
                     indicator: bool = False, numeric_only: bool = False, quantile: bool = False) -> Any:
    """Numeric and categorical columns as a dense matrix (text columns are left out).

    ``encode``: ``onehot`` (rare levels pooled), ``ordinal`` (unknown/missing = -1).
    """
    steps: list[Any] = []
    if impute:
        steps.append(SimpleImputer(strategy="median", add_indicator=indicator, keep_empty_features=True))
    if quantile:
        steps.append(QuantileTransformer(n_quantiles=100, output_distribution="normal", random_state=SEED))
    elif scale:
        steps.append(StandardScaler())
    parts = [("num", make_pipeline(*steps) if steps else "passthrough", list(data.numeric))]
    if data.categorical and not numeric_only:
        if encode == "onehot":
            encoder = make_pipeline(
                SimpleImputer(strategy="constant", fill_value="(missing)"),
                OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=5, max_categories=30,
                              sparse_output=False),
            )
        else:
            encoder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                     encoded_missing_value=-1, max_categories=250)
        parts.append(("cat", encoder, list(data.categorical)))
    return ColumnTransformer(parts, remainder="drop", sparse_threshold=0.0)


def _native_hgb(data: TaskData, **params: Any) -> Any:
    """Histogram gradient boosting with its native categorical splits and missing-value handling."""
    cats = list(data.categorical)
    prep = ColumnTransformer([
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1,
                               max_categories=250), cats),
        ("num", "passthrough", list(data.numeric)),
    ], sparse_threshold=0.0)
    mask = [True] * len(cats) + [False] * len(data.numeric)
    cls = HistGradientBoostingClassifier if data.is_classification else HistGradientBoostingRegressor
    return make_pipeline(prep, cls(categorical_features=mask, random_state=SEED, **params))


def _pipe(features: Callable[[TaskData], Any], estimator: Callable[[], Any], *extra: Callable[[TaskData], Any]
          ) -> Callable[[TaskData], Any]:
    """Compose a feature builder, optional extra steps (each built from the data) and an estimator."""
    return lambda data: make_pipeline(features(data), *(step(data) for step in extra), estimator())


def _select_k(k: int) -> Callable[[TaskData], Any]:
    """Keep the ``k`` features with the best univariate F-score (all of them when there are fewer)."""
    return lambda data: SelectKBest(f_classif if data.is_classification else f_regression, k=k)


def _restrict(data: TaskData, columns: Sequence[str]) -> TaskData:
    """The same task seen through a subset of its feature columns."""
    keep = set(columns)
    cols = [c for c in data.train.columns if c in keep]
    return replace(data, train=data.train[cols], test=data.test[cols],
                   numeric=tuple(c for c in data.numeric if c in keep),
                   categorical=tuple(c for c in data.categorical if c in keep),
                   text=tuple(c for c in data.text if c in keep))


def _tabular_view(data: TaskData) -> TaskData:
    """Numeric and categorical columns only (text columns are another catalog's business)."""
    return _restrict(data, data.tabular)


def _half_view(data: TaskData) -> TaskData:
    """A seeded random half of the tabular columns (a feature-subset variant)."""
    cols = list(data.tabular)
    keep = np.random.default_rng(SEED).choice(len(cols), max(1, len(cols) // 2), replace=False)
    return _restrict(data, [cols[i] for i in sorted(keep)])


def _step(factory: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[TaskData], Any]:
    """A pipeline step that does not depend on the data (a fresh instance per fit)."""
    return lambda data: factory(*args, **kwargs)


def _has_categorical(data: TaskData) -> bool:
    return bool(data.categorical)


def _non_negative_target(data: TaskData) -> bool:
    return not data.is_classification and bool(np.min(data.y) >= 0)


# --- the catalogs -------------------------------------------------------------------------------


def tabular_solutions(data: TaskData) -> list[Solution]:
    """Baseline-to-strong models on numeric and categorical columns, with feature variants."""
    clf = data.is_classification
    onehot = partial(tabular_features, encode="onehot")
    ordinal = partial(tabular_features, encode="ordinal", scale=False)
    raw = partial(tabular_features, encode="ordinal", scale=False, impute=False)  # HGB handles NaN itself
    numeric = partial(tabular_features, numeric_only=True)
    cats = _has_categorical(data)
    tabular = {"view": _tabular_view}

    def add(name: str, family: str, features: Callable[[TaskData], Any], estimator: Callable[[], Any],
            *extra: Callable[[TaskData], Any], when: bool = True, **options: Any) -> None:
        if when:
            out.append(model(name, family, _pipe(features, estimator, *extra), **{**tabular, **options}))

    def scaled_target(estimator: Callable[[], Any]) -> Callable[[], Any]:
        """Kernel and neural regressors need a standardised target."""
        return lambda: TransformedTargetRegressor(regressor=estimator(), transformer=StandardScaler())

    out: list[Solution] = []
    knn = neighbors.KNeighborsClassifier if clf else neighbors.KNeighborsRegressor
    for k in (1, 5, 15, 50):
        add(f"knn/onehot-k{k}", "neighbors", onehot, partial(knn, n_neighbors=k))
    add("knn/unscaled-k15", "neighbors", partial(tabular_features, scale=False), partial(knn, n_neighbors=15))

    dt = tree.DecisionTreeClassifier if clf else tree.DecisionTreeRegressor
    for depth in (1, 2, 3, 5, 8, None):
        add(f"tree/depth-{depth or 'full'}", "tree", ordinal, partial(dt, max_depth=depth, random_state=SEED))
    add("tree/min-leaf-20", "tree", ordinal, partial(dt, min_samples_leaf=20, random_state=SEED))
    add("subset/tree-top3-depth3", "tree", numeric, partial(dt, max_depth=3, random_state=SEED), _select_k(3),
        when=bool(data.numeric))

    rf = ensemble.RandomForestClassifier if clf else ensemble.RandomForestRegressor
    et = ensemble.ExtraTreesClassifier if clf else ensemble.ExtraTreesRegressor
    add("forest/rf-100", "forest", ordinal, partial(rf, n_estimators=100, random_state=SEED))
    add("forest/rf-30", "forest", ordinal, partial(rf, n_estimators=30, random_state=SEED))
    add("forest/rf-depth4", "forest", ordinal, partial(rf, n_estimators=100, max_depth=4, random_state=SEED))
    add("forest/rf-150-leaf3-mf0.3", "forest", ordinal,
        partial(rf, n_estimators=150, min_samples_leaf=3, max_features=0.3, random_state=SEED))
    add("forest/extra-100", "forest", ordinal, partial(et, n_estimators=100, random_state=SEED))
    add("forest/extra-100-leaf5", "forest", ordinal, partial(et, n_estimators=100, min_samples_leaf=5, random_state=SEED))
    add("subset/rf-half-columns", "forest", ordinal, partial(rf, n_estimators=100, random_state=SEED),
        view=lambda data: _half_view(_tabular_view(data)))

    hgb = ensemble.HistGradientBoostingClassifier if clf else ensemble.HistGradientBoostingRegressor
    for lr in (0.03, 0.1, 0.3):
        for depth in (2, None):
            add(f"boosting/hgb-lr{lr}-depth{depth or 'free'}", "boosting", raw,
                partial(hgb, learning_rate=lr, max_depth=depth, random_state=SEED))
    add("boosting/hgb-regularized", "boosting", raw,
        partial(hgb, max_leaf_nodes=15, min_samples_leaf=40, l2_regularization=10.0, random_state=SEED))
    if cats:
        out.append(model("boosting/hgb-native-categorical", "boosting", _native_hgb, **tabular))
    add("subsample/hgb-10pct", "boosting", raw, partial(hgb, random_state=SEED), fraction=0.1)
    gbm = ensemble.GradientBoostingClassifier if clf else ensemble.GradientBoostingRegressor
    add("boosting/gbm-100", "boosting", ordinal, partial(gbm, n_estimators=100, random_state=SEED),
        limit=BOOSTING_ROWS, when=not clf or data.n_classes <= 10)
    ada = ensemble.AdaBoostClassifier if clf else ensemble.AdaBoostRegressor
    add("boosting/adaboost-100", "boosting", ordinal, partial(ada, n_estimators=100, random_state=SEED))

    mlp = neural_network.MLPClassifier if clf else neural_network.MLPRegressor
    mlp_small = partial(mlp, hidden_layer_sizes=(64,), early_stopping=True, max_iter=300, random_state=SEED)
    mlp_large = partial(mlp, hidden_layer_sizes=(128, 64), alpha=1e-3, early_stopping=True, max_iter=300,
                        random_state=SEED)
    add("mlp/64", "neural", onehot, mlp_small if clf else scaled_target(mlp_small))
    add("mlp/128-64", "neural", onehot, mlp_large if clf else scaled_target(mlp_large))

    poly = [_select_k(8), _step(PolynomialFeatures, 2, include_bias=False), _step(StandardScaler)]
    if clf:
        logistic = partial(linear_model.LogisticRegression, max_iter=1000)
        for c in (0.001, 0.01, 0.1, 1.0, 10.0):
            add(f"logistic/C{c:g}", "linear", onehot, partial(logistic, C=c))
        add("logistic/balanced-C1", "linear", onehot, partial(logistic, class_weight="balanced"))
        add("logistic/numeric-only-C1", "linear", numeric, logistic, when=cats and bool(data.numeric))
        add("logistic/quantile-C1", "linear", partial(tabular_features, quantile=True), logistic)
        add("logistic/top5-numeric", "linear", numeric, logistic, _select_k(5), when=bool(data.numeric))
        add("logistic/poly2-top8-C0.1", "linear", numeric, partial(logistic, C=0.1), *poly, when=bool(data.numeric))
        add("linear/lda-shrinkage", "linear", onehot, partial(da.LinearDiscriminantAnalysis, solver="lsqr",
                                                             shrinkage="auto"))
        add("linear/ridge-classifier", "linear", onehot, linear_model.RidgeClassifier)
        add("linear/sgd-modified-huber", "linear", onehot,
            partial(linear_model.SGDClassifier, loss="modified_huber", random_state=SEED))
        add("subsample/logistic-10pct", "linear", onehot, logistic, fraction=0.1)
        add("naive-bayes/gaussian", "naive-bayes", onehot, naive_bayes.GaussianNB)
        add("naive-bayes/gaussian-numeric-only", "naive-bayes", numeric, naive_bayes.GaussianNB,
            when=cats and bool(data.numeric))
        add("forest/rf-balanced", "forest", ordinal,
            partial(rf, n_estimators=100, class_weight="balanced", min_samples_leaf=2, random_state=SEED))
        add("boosting/hgb-balanced", "boosting", raw, partial(hgb, class_weight="balanced", random_state=SEED))
        # Probability estimates from SVC cost an internal cross-validation: only pay for them when needed.
        svc = partial(svm.SVC, probability=data.prediction != "label", random_state=SEED)
        add("svm/rbf-C1", "kernel", onehot, svc, limit=KERNEL_ROWS)
        add("svm/rbf-C10", "kernel", onehot, partial(svc, C=10.0), limit=KERNEL_ROWS)
        if data.ordinal:
            add("ordinal/ridge-rounded", "linear", onehot, linear_model.Ridge, ordinal_regression=True)
            add("ordinal/hgb-rounded", "boosting", raw,
                partial(ensemble.HistGradientBoostingRegressor, random_state=SEED), ordinal_regression=True)
        return out

    add("linear/ols", "linear", onehot, linear_model.LinearRegression)
    add("linear/ols-numeric-only", "linear", numeric, linear_model.LinearRegression, when=cats and bool(data.numeric))
    for alpha in (0.1, 1.0, 10.0, 100.0):
        add(f"linear/ridge-a{alpha:g}", "linear", onehot, partial(linear_model.Ridge, alpha=alpha))
    for alpha in (0.01, 1.0):
        add(f"linear/lasso-a{alpha:g}", "linear", onehot, partial(linear_model.Lasso, alpha=alpha, max_iter=5000))
    add("linear/elasticnet", "linear", onehot, partial(linear_model.ElasticNet, alpha=0.1, max_iter=5000))
    add("linear/huber", "linear", onehot, partial(linear_model.HuberRegressor, max_iter=1000))
    add("linear/quantile-ridge", "linear", partial(tabular_features, quantile=True), linear_model.Ridge)
    add("linear/top5-ols", "linear", numeric, linear_model.LinearRegression, _select_k(5), when=bool(data.numeric))
    add("linear/poly2-top8-ridge", "linear", numeric, linear_model.Ridge, *poly, when=bool(data.numeric))
    add("subsample/ridge-10pct", "linear", onehot, linear_model.Ridge, fraction=0.1)
    positive = _non_negative_target(data)
    add("linear/ridge-log-target", "linear", onehot, linear_model.Ridge, log_target=True, when=positive)
    add("boosting/hgb-log-target", "boosting", raw, partial(hgb, random_state=SEED), log_target=True, when=positive)
    add("boosting/hgb-absolute-error", "boosting", raw, partial(hgb, loss="absolute_error", random_state=SEED))
    add("boosting/hgb-poisson", "boosting", raw, partial(hgb, loss="poisson", random_state=SEED), when=positive)
    for c in (1.0, 10.0):
        add(f"svm/svr-C{c:g}", "kernel", onehot, scaled_target(partial(svm.SVR, C=c)), limit=KERNEL_ROWS)
    return out


def _join_text(columns: Sequence[str]) -> Any:
    """A transformer that joins the text columns of a frame into one document per row."""
    return FunctionTransformer(lambda X: X[list(columns)].agg(" | ".join, axis=1))


def _text_features(vectorizer: Callable[[], Any], per_column: bool = False) -> Callable[[TaskData], Any]:
    """Vectorise the text columns jointly (one document per row) or one vectorizer per column."""
    def build(data: TaskData) -> Any:
        if per_column:
            return ColumnTransformer([(col, vectorizer(), col) for col in data.text])
        return make_pipeline(_join_text(data.text), vectorizer())

    return build


def _text_and_tabular(vectorizer: Callable[[], Any]) -> Callable[[TaskData], Any]:
    """Joint text features side by side with one-hot/scaled tabular features."""
    def build(data: TaskData) -> Any:
        return ColumnTransformer([
            ("text", make_pipeline(_join_text(data.text), vectorizer()), list(data.text)),
            ("tabular", tabular_features(data), list(data.tabular)),
        ])

    return build


def text_solutions(data: TaskData) -> list[Solution]:
    """Bag-of-words and character n-gram pipelines over the text columns."""
    clf = data.is_classification
    vectorizers: dict[str, Callable[[], Any]] = {
        "word": partial(TfidfVectorizer, min_df=2, sublinear_tf=True),
        "word-bigram": partial(TfidfVectorizer, ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=50000),
        "char-2-4": partial(TfidfVectorizer, analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True,
                            max_features=50000),
        "char-1-6": partial(TfidfVectorizer, analyzer="char", ngram_range=(1, 6), min_df=3, sublinear_tf=True,
                            max_features=100000),
        "counts-binary": partial(CountVectorizer, binary=True, min_df=2),
        "word-top500": partial(TfidfVectorizer, max_features=500),
        "word-no-stopwords": partial(TfidfVectorizer, stop_words="english", min_df=2),
    }
    if clf:
        logistic = partial(linear_model.LogisticRegression, max_iter=2000)
        models: dict[str, Callable[[], Any]] = {
            "logistic-C3": partial(logistic, C=3.0),
            "logistic-C0.3": partial(logistic, C=0.3),
            "multinomial-nb": partial(naive_bayes.MultinomialNB, alpha=0.5),
            "sgd-modified-huber": partial(linear_model.SGDClassifier, loss="modified_huber", random_state=SEED),
            "ridge-classifier": linear_model.RidgeClassifier,
        }
    else:
        models = {
            "ridge-a0.3": partial(linear_model.Ridge, alpha=0.3),
            "ridge-a3": partial(linear_model.Ridge, alpha=3.0),
            "ridge-a30": partial(linear_model.Ridge, alpha=30.0),
            "sgd": lambda: TransformedTargetRegressor(
                regressor=linear_model.SGDRegressor(random_state=SEED), transformer=StandardScaler()),
            "linear-svr": lambda: TransformedTargetRegressor(
                regressor=svm.LinearSVR(random_state=SEED, max_iter=5000), transformer=StandardScaler()),
        }
    out = [
        model(f"text/{v}+{m}", "text", _pipe(_text_features(vectorizer), estimator))
        for v, vectorizer in vectorizers.items() for m, estimator in models.items()
    ]

    word = vectorizers["word"]
    knn = neighbors.KNeighborsClassifier if clf else neighbors.KNeighborsRegressor
    dt = tree.DecisionTreeClassifier if clf else tree.DecisionTreeRegressor
    rf = ensemble.RandomForestClassifier if clf else ensemble.RandomForestRegressor
    hgb = ensemble.HistGradientBoostingClassifier if clf else ensemble.HistGradientBoostingRegressor
    svd = _step(TruncatedSVD, 100, random_state=SEED)
    extra: list[tuple[str, Callable[[TaskData], Any], Callable[[], Any], tuple[Callable[[TaskData], Any], ...]]] = [
        ("word+knn-cosine-k5", _text_features(word), partial(knn, n_neighbors=5, metric="cosine"), ()),
        ("word+knn-cosine-k25", _text_features(word), partial(knn, n_neighbors=25, metric="cosine"), ()),
        ("counts+tree-depth20", _text_features(vectorizers["counts-binary"]),
         partial(dt, max_depth=20, random_state=SEED), ()),
        ("counts+rf-100", _text_features(partial(CountVectorizer, binary=True, min_df=5, max_features=2000)),
         partial(rf, n_estimators=100, random_state=SEED), ()),
        ("word-svd100+hgb", _text_features(word), partial(hgb, random_state=SEED), (svd,)),
        ("word-svd100+linear", _text_features(word), models[next(iter(models))], (svd,)),
    ]
    if clf:
        extra += [
            ("word+logistic-C30", _text_features(word), partial(logistic, C=30.0), ()),
            ("word+logistic-balanced", _text_features(word), partial(logistic, C=3.0, class_weight="balanced"), ()),
            ("word+complement-nb", _text_features(word), naive_bayes.ComplementNB, ()),
            ("char-2-4+complement-nb", _text_features(vectorizers["char-2-4"]), naive_bayes.ComplementNB, ()),
            ("word+nearest-centroid", _text_features(word), neighbors.NearestCentroid, ()),
        ]
    else:
        extra += [("word-svd100+knn-k10", _text_features(word), partial(knn, n_neighbors=10), (svd,))]
    if len(data.text) > 1:
        for v in ("word", "char-2-4", "counts-binary"):
            for m in list(models)[:2]:
                extra.append((f"{v}-per-column+{m}", _text_features(vectorizers[v], per_column=True), models[m], ()))
    if data.tabular:
        final = partial(logistic, C=3.0) if clf else partial(linear_model.Ridge, alpha=3.0)
        extra.append(("word+tabular+linear", _text_and_tabular(word), final, ()))
    out += [model(f"text/{name}", "text", _pipe(features, estimator, *steps)) for name, features, estimator, steps in extra]
    return out


def _divide(X: Any, by: float) -> np.ndarray:
    return np.asarray(X, float) / by


def _pool(X: Any, side: int) -> np.ndarray:
    """Average 2x2 pixel blocks: a quarter of the features, more robust to small shifts."""
    images = np.asarray(X, float).reshape(-1, side // 2, 2, side // 2, 2)
    return images.mean(axis=(2, 4)).reshape(len(images), -1)


def image_solutions(data: TaskData) -> list[Solution]:
    """Pixel, pooled-pixel and PCA pipelines for flattened square images."""
    top = float(data.train.to_numpy().max()) or 1.0
    to_unit = partial(_divide, by=top)  # pixel intensities in [0, 1]
    pixels = _step(FunctionTransformer, to_unit)
    scaled = _step(StandardScaler)
    pooled = _step(FunctionTransformer, partial(_pool, side=data.image_side))

    def pca(k: int, whiten: bool = False) -> Callable[[TaskData], Any]:
        return lambda data: make_pipeline(FunctionTransformer(to_unit), PCA(k, whiten=whiten, random_state=SEED))

    knn = neighbors.KNeighborsClassifier
    logistic = partial(linear_model.LogisticRegression, max_iter=300)
    rf = partial(ensemble.RandomForestClassifier, random_state=SEED)
    hgb = partial(ensemble.HistGradientBoostingClassifier, max_iter=100, random_state=SEED)
    mlp = partial(neural_network.MLPClassifier, early_stopping=True, max_iter=200, random_state=SEED)
    svc = partial(svm.SVC, probability=data.prediction != "label", random_state=SEED)
    dt = partial(tree.DecisionTreeClassifier, random_state=SEED)

    specs: list[tuple[str, str, Callable[[TaskData], Any], Callable[[], Any], dict[str, Any]]] = []
    for k in (1, 3, 5, 10):
        specs.append((f"pixels+knn-k{k}", "neighbors", pixels, partial(knn, n_neighbors=k), {}))
    specs += [
        ("pca50+knn-k3", "neighbors", pca(50), partial(knn, n_neighbors=3), {}),
        ("pca16+knn-k5", "neighbors", pca(16), partial(knn, n_neighbors=5), {}),
        ("pooled+knn-k3", "neighbors", pooled, partial(knn, n_neighbors=3), {}),
        ("pixels+nearest-centroid", "neighbors", pixels, neighbors.NearestCentroid, {}),
        ("subsample/pixels+knn-k3-10pct", "neighbors", pixels, partial(knn, n_neighbors=3), {"fraction": 0.1}),
        ("pixels+gaussian-nb", "naive-bayes", pixels, naive_bayes.GaussianNB, {}),
        ("pixels+bernoulli-nb", "naive-bayes", pixels, partial(naive_bayes.BernoulliNB, binarize=0.5), {}),
        ("pixels+multinomial-nb", "naive-bayes", pixels, naive_bayes.MultinomialNB, {}),
        ("pca50+gaussian-nb", "naive-bayes", pca(50), naive_bayes.GaussianNB, {}),
        ("pixels+logistic-C0.01", "linear", scaled, partial(logistic, C=0.01), {}),
        ("pixels+logistic-C0.1", "linear", scaled, partial(logistic, C=0.1), {}),
        ("pixels+logistic-C1", "linear", scaled, partial(logistic, C=1.0), {}),
        ("pca50+logistic", "linear", pca(50), logistic, {}),
        ("pca16+logistic", "linear", pca(16), logistic, {}),
        ("pooled+logistic", "linear", pooled, partial(logistic, C=0.1), {}),
        ("pixels+ridge-classifier", "linear", scaled, linear_model.RidgeClassifier, {}),
        # A few epochs only: on raw pixels SGD converges slowly and the population has a time cap.
        ("pixels+sgd-modified-huber", "linear", scaled,
         partial(linear_model.SGDClassifier, loss="modified_huber", max_iter=15, random_state=SEED), {}),
        ("binary-pixels+perceptron", "linear", _step(Binarizer, threshold=top / 2),
         partial(linear_model.Perceptron, random_state=SEED), {}),
        ("pca50+lda", "linear", pca(50), da.LinearDiscriminantAnalysis, {}),
        ("pca16+qda", "linear", pca(16), partial(da.QuadraticDiscriminantAnalysis, reg_param=0.1), {}),
        ("subsample/logistic-10pct", "linear", scaled, partial(logistic, C=0.1), {"fraction": 0.1}),
    ]
    for depth in (2, 4, 8, None):
        specs.append((f"pixels+tree-depth-{depth or 'full'}", "tree", pixels, partial(dt, max_depth=depth), {}))
    specs += [
        ("pca16+tree-depth8", "tree", pca(16), partial(dt, max_depth=8), {}),
        ("pixels+rf-20", "forest", pixels, partial(rf, n_estimators=20), {}),
        ("pixels+rf-100", "forest", pixels, partial(rf, n_estimators=100), {}),
        ("pixels+rf-100-depth8", "forest", pixels, partial(rf, n_estimators=100, max_depth=8), {}),
        ("pooled+rf-100", "forest", pooled, partial(rf, n_estimators=100), {}),
        ("pixels+extra-100", "forest", pixels, partial(ensemble.ExtraTreesClassifier, n_estimators=100,
                                                       random_state=SEED), {}),
        ("subsample/rf-100-10pct", "forest", pixels, partial(rf, n_estimators=100), {"fraction": 0.1}),
        ("pca50+hgb-lr0.1", "boosting", pca(50), hgb, {}),
        ("pca50+hgb-lr0.3", "boosting", pca(50), partial(hgb, learning_rate=0.3), {}),
        ("pca16+hgb", "boosting", pca(16), hgb, {}),
        ("pca16+adaboost", "boosting", pca(16), partial(ensemble.AdaBoostClassifier, n_estimators=100,
                                                        random_state=SEED), {}),
        ("pca50+svm-rbf-C1", "kernel", pca(50, whiten=True), svc, {"limit": KERNEL_ROWS}),
        ("pca50+svm-rbf-C10", "kernel", pca(50), partial(svc, C=10.0), {"limit": KERNEL_ROWS}),
        ("pixels+svm-rbf-C5", "kernel", pixels, partial(svc, C=5.0), {"limit": KERNEL_ROWS}),
        ("pixels+svm-poly3", "kernel", pixels, partial(svc, kernel="poly", degree=3), {"limit": KERNEL_ROWS}),
        ("pixels+mlp-128", "neural", scaled, partial(mlp, hidden_layer_sizes=(128,)), {}),
        ("pixels+mlp-256-128", "neural", scaled, partial(mlp, hidden_layer_sizes=(256, 128), alpha=1e-3), {}),
        ("pca50+mlp-64", "neural", pca(50), partial(mlp, hidden_layer_sizes=(64,)), {}),
        ("pooled+mlp-64", "neural", pooled, partial(mlp, hidden_layer_sizes=(64,)), {}),
    ]
    return [model(name if name.startswith("subsample/") else f"image/{name}", family, _pipe(features, est), **opts)
            for name, family, features, est, opts in specs]


def population(data: TaskData) -> list[Solution]:
    """Every reference solution that applies to the task (names are unique)."""
    solutions = trivial_solutions(data)
    if data.image_side:
        solutions += image_solutions(data)
    else:
        if data.text:
            solutions += text_solutions(data)
        if data.tabular:
            solutions += tabular_solutions(data)
    names = [s.name for s in solutions]
    if len(names) != len(set(names)):
        raise ValueError(f"task {data.spec.id}: repeated solution names {sorted(n for n in set(names) if names.count(n) > 1)}")
    return solutions


# --- running one solution -----------------------------------------------------------------------


class SolutionTimeout(Exception):
    """A reference solution ran past its time cap."""


@dataclass(frozen=True)
class Outcome:
    """What one reference solution scored on one task, and the CPU seconds it used.

    ``score`` is None when the solution was skipped; ``error`` then says why.
    """

    task_id: str
    solution: str
    family: str
    score: float | None
    seconds: float
    error: str | None = None


@lru_cache(maxsize=4)
def _prepared(task_root: str) -> tuple[TaskData, pd.DataFrame, dict[str, Solution]]:
    """Task data, answers and the population of a task, cached per worker process."""
    task = load_task(task_root, require_leaderboard=False)
    data = TaskData.from_task(task)
    return data, task.answers(), {s.name: s for s in population(data)}


def solution_names(task: Task) -> list[str]:
    """Names of the reference solutions that apply to a task, in catalog order."""
    return list(_prepared(str(task.root))[2])


@contextlib.contextmanager
def _cpu_time_cap(seconds: float) -> Iterator[None]:
    """Raise :class:`SolutionTimeout` in this (main) thread after ``seconds`` of process CPU time.

    CPU time rather than wall time: on a shared machine, a busy neighbour must not decide which
    solutions make it onto a leaderboard. (Workers run one BLAS thread, so CPU time is one core's.)
    """
    def expire(signum: int, frame: Any) -> None:
        raise SolutionTimeout(f"used more than the {seconds:g} s CPU-time cap")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def evaluate_solution(task_root: str, name: str, time_cap_s: float = 30.0) -> Outcome:
    """Fit one reference solution on a task's train set and grade it on the private answers.

    Solutions that fail to fit or run past the CPU-time cap are reported, not raised: a
    leaderboard is built from the ones that finish. Must run in a process's main thread (the cap
    uses ``SIGPROF``). ``Outcome.seconds`` is the CPU time the solution used.
    """
    data, answers, solutions = _prepared(task_root)
    solution = solutions[name]
    start = time.process_time()
    try:
        with warnings.catch_warnings(), _cpu_time_cap(time_cap_s):
            # Convergence and small-sample warnings are expected across a population this wide.
            warnings.simplefilter("ignore")
            submission = to_submission(data, solution.fit_predict(data))
        score = grade(submission, answers, data.spec)
    except (SolutionTimeout, ValueError, ArithmeticError, InvalidSubmissionError) as exc:
        return Outcome(data.spec.id, name, solution.family, None, time.process_time() - start,
                       f"{type(exc).__name__}: {exc}")
    return Outcome(data.spec.id, name, solution.family, score, time.process_time() - start)
