"""Solutions written the way people write them, not the way the grammar does.

Every script the grammar renders shares one skeleton: pandas in, a scikit-learn pipeline,
``DataFrame.to_csv`` out. A world model that learned how scripts end only from that skeleton
reads any other idiom as a failure: a correct script that uses the ``csv`` module looked like
an invalid submission to it. The styles here are the common other ways a person solves a task
(the standard library alone, numpy algebra, a pandas group-by, a quick scikit-learn notebook),
each valid on every built-in task; the world-model corpus executes them and their mutants so
that the status head learns the outcome, not the idiom.

A style is rendered from the task spec and a seed (the seed picks names, a model and small
settings, so no two renders of a style read the same). :func:`render_solution` renders either
a grammar point or a style from a corpus row's choices.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Callable, Mapping

from agents.code.grammar import SolutionChoices, render_script
from wmrl_envs.errors import ConfigError
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.task_spec import TaskSpec

#: The corpus choices key that names a style instead of a grammar point.
STYLE_KEY = "style"


def _settings(spec: TaskSpec) -> str:
    """The constants every style starts from: the task's columns and what to predict."""
    prediction = get_metric(spec.metric).prediction
    classes = [str(c) for c in spec.classes] if prediction != "value" else None
    return textwrap.dedent(f'''\
        ID = {spec.id_column!r}
        LABEL = {spec.answer_columns[0]!r}
        OUTPUT_COLUMNS = {list(spec.target_columns)!r}
        PREDICTION = {prediction!r}
        CLASSES = {classes!r}
        ''')


#: How the pandas styles name a class: '1', 1 and 1.0 alike (read_csv gives ints or floats).
_PANDAS_LABEL = "lambda v: str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)"


def _stdlib_prior(spec: TaskSpec, rng: random.Random) -> str:
    rows, out = rng.choice([("rows", "out"), ("records", "handle"), ("data", "f")])
    return _settings(spec) + textwrap.dedent(f'''\
        import csv
        from collections import Counter


        def as_label(text):
            """'1', '1.0' and 1 name the same class."""
            try:
                number = float(text)
            except ValueError:
                return text
            return str(int(number)) if number.is_integer() else text


        with open("data/train.csv", newline="") as {out}:
            {rows} = list(csv.DictReader({out}))
        with open("data/test.csv", newline="") as {out}:
            test_ids = [row[ID] for row in csv.DictReader({out})]

        if PREDICTION == "value":
            targets = [float(row[LABEL]) for row in {rows} if row[LABEL] != ""]
            prediction = [sum(targets) / len(targets)]
        else:
            counts = Counter(as_label(row[LABEL]) for row in {rows})
            total = sum(counts.values())
            shares = [counts.get(c, 0) / total for c in CLASSES]
            if PREDICTION == "label":
                prediction = [max(CLASSES, key=lambda c: counts.get(c, 0))]
            elif PREDICTION == "probability":
                prediction = [shares[1]]
            else:
                prediction = shares

        with open("submission.csv", "w", newline="") as {out}:
            writer = csv.writer({out})
            writer.writerow([ID] + OUTPUT_COLUMNS)
            for row_id in test_ids:
                writer.writerow([row_id] + prediction)
        print("wrote", len(test_ids), "rows")
        ''')


def _stdlib_centroids(spec: TaskSpec, rng: random.Random) -> str:
    power = rng.choice([1, 2])
    return _settings(spec) + textwrap.dedent(f'''\
        import csv
        import math


        def number(text):
            try:
                value = float(text)
            except ValueError:
                return None
            return value if math.isfinite(value) else None


        def as_label(text):
            value = number(text)
            return str(int(value)) if value is not None and value.is_integer() else text


        train = list(csv.DictReader(open("data/train.csv", newline="")))
        test = list(csv.DictReader(open("data/test.csv", newline="")))
        columns = [c for c in train[0] if c not in (ID, LABEL)
                   and sum(number(r[c]) is not None for r in train) > 0.9 * len(train)]

        stats = {{}}
        for c in columns:
            values = [v for r in train if (v := number(r[c])) is not None]
            mean = sum(values) / len(values)
            spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1.0
            stats[c] = (mean, spread)


        def point(row):
            out = []
            for c in columns:
                value = number(row.get(c, ""))
                mean, spread = stats[c]
                out.append(0.0 if value is None else (value - mean) / spread)
            return out


        points = [point(r) for r in train]
        if PREDICTION == "value":
            # One-feature least squares on the column that correlates best with the target
            # (the columns are standardised, so the best slope is the best correlation).
            y = [float(r[LABEL]) for r in train]
            my = sum(y) / len(y)
            slopes = [sum(p[j] * (v - my) for p, v in zip(points, y)) / len(y) for j in range(len(columns))]
            best = max(range(len(columns)), key=lambda j: abs(slopes[j]), default=None)
            predictions = [[my + (slopes[best] * point(r)[best] if best is not None else 0.0)] for r in test]
        else:
            centroids = {{c: [0.0] * len(columns) for c in CLASSES}}
            counts = {{c: 0 for c in CLASSES}}
            for r, p in zip(train, points):
                label = as_label(r[LABEL])
                if label in centroids:
                    counts[label] += 1
                    centroids[label] = [a + b for a, b in zip(centroids[label], p)]
            for c in CLASSES:
                centroids[c] = [a / max(counts[c], 1) for a in centroids[c]]
            predictions = []
            for r in test:
                p = point(r)
                closeness = [1.0 / (1e-6 + sum(abs(a - b) ** {power} for a, b in zip(p, centroids[c])))
                             if counts[c] else 0.0 for c in CLASSES]
                total = sum(closeness) or 1.0
                shares = [v / total for v in closeness]
                if PREDICTION == "label":
                    predictions.append([CLASSES[shares.index(max(shares))]])
                elif PREDICTION == "probability":
                    predictions.append([shares[1]])
                else:
                    predictions.append(shares)

        with open("submission.csv", "w") as out:
            out.write(",".join([ID] + OUTPUT_COLUMNS) + "\\n")
            for r, values in zip(test, predictions):
                out.write(",".join([r[ID]] + [str(v) for v in values]) + "\\n")
        ''')


def _numpy_ridge(spec: TaskSpec, rng: random.Random) -> str:
    alpha = rng.choice([0.1, 1.0, 10.0])
    return _settings(spec) + textwrap.dedent(f'''\
        import numpy as np
        import pandas as pd

        train = pd.read_csv("data/train.csv")
        test = pd.read_csv("data/test.csv")
        features = [c for c in train.select_dtypes("number").columns if c not in (ID, LABEL)]
        fill = train[features].median()
        A = train[features].fillna(fill).to_numpy(float)
        B = test[features].fillna(fill).to_numpy(float)
        mean, std = A.mean(axis=0), A.std(axis=0) + 1e-9
        A = np.hstack([(A - mean) / std, np.ones((len(A), 1))])
        B = np.hstack([(B - mean) / std, np.ones((len(B), 1))])


        def ridge(targets, alpha={alpha}):
            return np.linalg.solve(A.T @ A + alpha * np.eye(A.shape[1]), A.T @ targets)


        if PREDICTION == "value":
            result = (B @ ridge(train[LABEL].to_numpy(float)))[:, None]
        else:
            labels = train[LABEL].map({_PANDAS_LABEL})
            onehot = np.stack([(labels == c).to_numpy(float) for c in CLASSES], axis=1)
            scores = B @ ridge(onehot)
            if PREDICTION == "label":
                result = np.array(CLASSES, dtype=object)[scores.argmax(axis=1)][:, None]
            else:
                weights = np.exp(scores - scores.max(axis=1, keepdims=True))
                weights /= weights.sum(axis=1, keepdims=True)
                result = weights[:, 1:2] if PREDICTION == "probability" else weights

        table = np.column_stack([test[ID].astype(str).to_numpy(), result.astype(str)])
        np.savetxt("submission.csv", table, fmt="%s", delimiter=",", header=",".join([ID] + OUTPUT_COLUMNS),
                   comments="")
        ''')


def _pandas_groupby(spec: TaskSpec, rng: random.Random) -> str:
    bins = rng.choice([4, 8, 12])
    return _settings(spec) + textwrap.dedent(f'''\
        import pandas as pd

        df = pd.read_csv("data/train.csv")
        test_df = pd.read_csv("data/test.csv")
        sub = pd.read_csv("data/sample_submission.csv")

        # Group rows by the most informative simple key: a short categorical column, else a
        # binned numeric one.
        candidates = [c for c in df.columns if c not in (ID, LABEL)]
        categorical = [c for c in candidates if not pd.api.types.is_numeric_dtype(df[c]) and 2 <= df[c].nunique() <= 30]
        numeric = [c for c in candidates if pd.api.types.is_numeric_dtype(df[c]) and df[c].nunique() > 1]
        if categorical:
            key, test_key = df[categorical[0]].fillna("?"), test_df[categorical[0]].fillna("?")
        elif numeric:
            edges = df[numeric[0]].quantile([i / {bins} for i in range(1, {bins})]).unique()
            key = pd.Series(pd.cut(df[numeric[0]], [-float("inf"), *edges, float("inf")]).cat.codes, index=df.index)
            test_key = pd.Series(pd.cut(test_df[numeric[0]], [-float("inf"), *edges, float("inf")]).cat.codes,
                                 index=test_df.index)
        else:
            key, test_key = pd.Series(0, index=df.index), pd.Series(0, index=test_df.index)

        if PREDICTION == "value":
            target = df[LABEL].astype(float)
            table = target.groupby(key).mean()
            out = test_key.map(table).fillna(target.mean())
            predictions = {{OUTPUT_COLUMNS[0]: out.to_numpy()}}
        else:
            labels = df[LABEL].map({_PANDAS_LABEL})
            shares = pd.crosstab(key, labels, normalize="index").reindex(columns=CLASSES, fill_value=0.0)
            overall = labels.value_counts(normalize=True).reindex(CLASSES, fill_value=0.0)
            rows = shares.reindex(test_key.to_numpy()).fillna(overall).to_numpy()
            if PREDICTION == "label":
                predictions = {{OUTPUT_COLUMNS[0]: [CLASSES[i] for i in rows.argmax(axis=1)]}}
            elif PREDICTION == "probability":
                predictions = {{OUTPUT_COLUMNS[0]: rows[:, 1]}}
            else:
                predictions = {{c: rows[:, j] for j, c in enumerate(OUTPUT_COLUMNS)}}

        sub = pd.DataFrame({{ID: test_df[ID], **predictions}})
        sub.to_csv("submission.csv", index=False)
        print(sub.head())
        ''')


_QUICK_MODELS = {
    "forest": ("from sklearn.ensemble import RandomForest{kind}", "RandomForest{kind}(n_estimators={n}, "
               "random_state=0, n_jobs=1)"),
    "boosting": ("from sklearn.ensemble import HistGradientBoosting{kind}",
                 "HistGradientBoosting{kind}(max_iter={n}, random_state=0)"),
    "linear": ("from sklearn.linear_model import {linear}", "{linear}({linear_args})"),
}


def _sklearn_quick(spec: TaskSpec, rng: random.Random) -> str:
    prediction = get_metric(spec.metric).prediction
    kind = "Regressor" if prediction == "value" else "Classifier"
    model = rng.choice(sorted(_QUICK_MODELS))
    linear = "Ridge" if kind == "Regressor" else "LogisticRegression"
    linear_args = "alpha=1.0" if kind == "Regressor" else "max_iter=500"
    imports, build = (part.format(kind=kind, n=rng.choice([50, 100]), linear=linear, linear_args=linear_args)
                      for part in _QUICK_MODELS[model])
    return _settings(spec) + textwrap.dedent(f'''\
        import pandas as pd
        from sklearn.impute import SimpleImputer
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        {imports}

        train_df = pd.read_csv("data/train.csv")
        test_df = pd.read_csv("data/test.csv")

        # One-hot the short categorical columns of train and test together, so both get the
        # same dummy columns; long text columns are dropped.
        both = pd.concat([train_df.drop(columns=[LABEL]), test_df], keys=["train", "test"])
        text = [c for c in both.columns if c != ID and not pd.api.types.is_numeric_dtype(both[c])]
        short = [c for c in text if both[c].nunique() <= 20]
        both = both.drop(columns=[c for c in text if c not in short])
        both = pd.get_dummies(both, columns=short, dummy_na=True, dtype=float)
        X_train = both.loc["train"].drop(columns=[ID])
        X_test = both.loc["test"].drop(columns=[ID])
        y_train = train_df[LABEL]
        if PREDICTION != "value":
            y_train = y_train.map({_PANDAS_LABEL})

        model = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), {build})
        model.fit(X_train, y_train)

        submission = pd.DataFrame({{ID: test_df[ID].to_numpy()}})
        if PREDICTION == "value" or PREDICTION == "label":
            submission[OUTPUT_COLUMNS[0]] = model.predict(X_test)
        else:
            proba = pd.DataFrame(model.predict_proba(X_test), columns=model.classes_)
            proba = proba.reindex(columns=CLASSES, fill_value=0.0)
            if PREDICTION == "probability":
                submission[OUTPUT_COLUMNS[0]] = proba[CLASSES[1]].to_numpy()
            else:
                for col, c in zip(OUTPUT_COLUMNS, CLASSES):
                    submission[col] = proba[c].to_numpy()
        submission.to_csv("submission.csv", index=False)
        ''')


#: Every style, by name: ``(spec, rng) -> script``.
STYLES: dict[str, Callable[[TaskSpec, random.Random], str]] = {
    "stdlib_prior": _stdlib_prior,
    "stdlib_centroids": _stdlib_centroids,
    "numpy_ridge": _numpy_ridge,
    "pandas_groupby": _pandas_groupby,
    "sklearn_quick": _sklearn_quick,
}


def render_handwritten(spec: TaskSpec, style: str, seed: int = 0) -> str:
    """A complete script for ``spec`` in ``style`` (one of :data:`STYLES`); ``seed`` varies
    names, the model and small settings."""
    if style not in STYLES:
        raise ConfigError(f"unknown solution style {style!r}; known: {sorted(STYLES)}")
    if get_metric(spec.metric).prediction != "value" and not spec.classes:
        raise ConfigError(f"task {spec.id}: a classification metric needs spec.classes to render a solution")
    header = f'"""Solution for task {spec.id}, written by hand ({style.replace("_", " ")})."""\n'
    return header + STYLES[style](spec, random.Random(f"{style}:{seed}"))


def render_solution(spec: TaskSpec, choices: Mapping[str, str], seed: int) -> str:
    """The script of a corpus row's choices: a style (``{"style": name}``) or a grammar point."""
    if STYLE_KEY in choices:
        if len(choices) != 1:
            raise ConfigError(f"a style's choices hold the style alone, got {dict(choices)}")
        return render_handwritten(spec, choices[STYLE_KEY], seed)
    return render_script(spec, SolutionChoices(**choices), seed)
