"""Read, validate and grade submissions against a task's private answers.

Conventions, each chosen so a score never depends on incidental formatting:

* **Row order never matters.** A valid submission is re-ordered to the answers' row order
  by id before any metric sees it.
* **Ids and class labels are compared as text** after normalisation: integral numbers lose
  their ``.0`` and text is stripped of surrounding whitespace, so ``1``, ``1.0``,
  ``np.int64(1)`` and ``" 1"`` all match, while ``"01"`` and ``1`` do not (``"1.0"`` *as
  text* is not rewritten either; :func:`read_submission` parses it as the number ``1.0``).
* **Several target columns** of a ``label`` or ``value`` metric are scored column by column
  (``answer_columns[i]`` against ``target_columns[i]``) and the mean is returned.
* **Probability metrics**: the answers hold the true label in ``spec.answer_columns[0]``,
  or, for per-class probabilities, one-hot indicators in one answer column per class
  (MLE-bench's ``id,EAP,HPL,MWS`` with rows like ``id1,1,0,0``); the submission holds
  ``P(positive)`` in its single target column (``"probability"``) or one probability column
  per class, in class order (``"class_probabilities"``).
* The class order is ``spec.classes`` when given, else the sorted distinct answer labels
  (the answer columns' order for one-hot answers; for ordinal metrics with integer labels,
  every integer from the smallest to the largest). An ordinal metric (QWK) whose task follows
  the ``ordinal_labels: present`` convention (:mod:`wmrl_envs.grading.conventions`) rates on
  the labels present in the answers or the submission instead, as the peers' graders do.

An invalid submission raises :class:`InvalidSubmissionError` (it scores 0 upstream); bad
answers or an inconsistent spec raise :class:`TaskFormatError` (the task is broken, not the agent).
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_integer_dtype, is_numeric_dtype

from wmrl_envs.errors import InvalidSubmissionError, TaskFormatError, preview
from wmrl_envs.grading.conventions import Conventions, conventions
from wmrl_envs.grading.metrics import Metric, get_metric
from wmrl_envs.task_spec import TaskSpec

#: The cap of a submission's size when nothing is known of its task (:func:`submission_cap`).
SUBMISSION_CAP_FLOOR_BYTES = 4 * 1024 * 1024
#: How many times its task's sample submission a submission may weigh (:func:`submission_cap`).
SUBMISSION_CAP_SAMPLE_FACTOR = 16
_READ_CHUNK_BYTES = 1024 * 1024


def submission_cap(sample_submission: str | os.PathLike[str] | None) -> int:
    """The most bytes a submission may hold: ``max(4 MiB, 16 x the sample submission's size)``.

    A valid submission has the sample's rows and columns, so only its values' text differs: a
    value at float64's full precision, quoted (``"-1.2345678901234567e-308",``, 27 bytes), takes
    the place of at least a one-character value and its comma (2 bytes), 13.5 times as many, and
    16 leaves room for CRLF line ends; the floor covers small tasks in any format. Grading holds
    at most this many bytes, plus the frame pandas builds from them, whatever the file claims. A
    task without a sample submission (hand-built ones only: every layout requires it) gets the floor.
    """
    sample = Path(sample_submission) if sample_submission is not None else None
    sample_bytes = sample.stat().st_size if sample is not None and sample.is_file() else 0
    return max(SUBMISSION_CAP_FLOOR_BYTES, SUBMISSION_CAP_SAMPLE_FACTOR * sample_bytes)


def read_submission(path: str | os.PathLike[str], *, max_bytes: int = SUBMISSION_CAP_FLOOR_BYTES) -> pd.DataFrame:
    """Read a submission CSV of at most ``max_bytes`` bytes (a task's :func:`submission_cap`).

    Any unreadable file raises :class:`InvalidSubmissionError`: missing, not a regular file, empty,
    larger than ``max_bytes``, holding a NUL byte, not UTF-8 or not a CSV. The size is the count
    of bytes read, never more than ``max_bytes + 1`` of them: a sparse file's apparent size
    costs its writer nothing, and it reads as NUL bytes.
    """
    path = Path(path)
    if not path.exists():
        raise InvalidSubmissionError(f"submission file not found: {path}")
    if not path.is_file():
        raise InvalidSubmissionError(f"submission path is not a regular file: {path}")
    size = path.stat().st_size
    if size > max_bytes:  # rejected without reading it
        raise InvalidSubmissionError(f"submission file is too large: {size:,} bytes, the cap is {max_bytes:,} bytes: {path}")
    data = _read_bounded(path, max_bytes)
    if not data:
        raise InvalidSubmissionError(f"submission file is empty (0 bytes): {path}")
    try:
        return pd.read_csv(io.BytesIO(data), low_memory=False)
    except pd.errors.EmptyDataError as exc:
        raise InvalidSubmissionError(f"submission file is empty (no header): {path}") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidSubmissionError(f"submission file is not a parseable CSV: {path}: {detail}") from exc


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, reading at most ``max_bytes + 1`` (one more tells that it is over the cap).

    A NUL byte stops the read: no CSV holds one, and a sparse file's holes read as NULs.
    """
    data = io.BytesIO()
    with path.open("rb") as fh:
        while chunk := fh.read(min(_READ_CHUNK_BYTES, max_bytes + 1 - data.tell())):
            nul = chunk.find(b"\0")
            if nul >= 0:
                raise InvalidSubmissionError(f"submission file holds a NUL byte at offset {data.tell() + nul:,} "
                                             f"(a CSV is text; a sparse file reads as NULs): {path}")
            data.write(chunk)
            if data.tell() > max_bytes:
                # The file grew after it was measured, or its size does not tell its content (/proc).
                raise InvalidSubmissionError(f"submission file is too large: more than the cap of {max_bytes:,} bytes: {path}")
    return data.getvalue()


def validate_submission(submission: pd.DataFrame, answers: pd.DataFrame, spec: TaskSpec) -> pd.DataFrame:
    """Check a submission against the answers and return it aligned to the answers' rows.

    The result has exactly the columns ``[spec.id_column, *spec.target_columns]``, a fresh
    ``RangeIndex`` and row ``i`` matching ``answers.iloc[i]``; numeric prediction columns are
    converted to ``float``. Raises :class:`InvalidSubmissionError` naming the first problem found.
    """
    expected = _expect(answers, spec)
    return _align(submission, answers, spec, expected)


def grade(submission: pd.DataFrame, answers: pd.DataFrame, spec: TaskSpec) -> float:
    """Validate ``submission`` and score it with ``spec.metric`` (direction: the metric's)."""
    expected = _expect(answers, spec)
    aligned = _align(submission, answers, spec, expected)
    return _score(aligned, answers.reset_index(drop=True), spec, expected)


def grade_file(path: str | os.PathLike[str], answers: pd.DataFrame, spec: TaskSpec, *,
               max_bytes: int = SUBMISSION_CAP_FLOOR_BYTES) -> float:
    """:func:`read_submission` then :func:`grade`; ``max_bytes``: the task's :func:`submission_cap`."""
    return grade(read_submission(path, max_bytes=max_bytes), answers, spec)


def perfect_submission(answers: pd.DataFrame, spec: TaskSpec) -> pd.DataFrame:
    """The answers written in submission format (one-hot probabilities for probability metrics)."""
    expected = _expect(answers, spec)
    answers = answers.reset_index(drop=True)
    columns: dict[str, Any] = {spec.id_column: answers[spec.id_column].to_numpy()}
    kind = expected.metric.prediction
    if kind in ("label", "value"):
        for answer_col, target_col in zip(spec.answer_columns, spec.target_columns):
            columns[target_col] = answers[answer_col].to_numpy()
        return pd.DataFrame(columns)
    y = _true_codes(answers, spec, expected)
    if kind == "probability":
        columns[spec.target_columns[0]] = (y == 1).astype(float)
    else:
        one_hot = np.eye(len(spec.target_columns))[y]
        for j, target_col in enumerate(spec.target_columns):
            columns[target_col] = one_hot[:, j]
    return pd.DataFrame(columns)


def best_possible(answers: pd.DataFrame, spec: TaskSpec) -> float:
    """The score of the answers graded against themselves (DSBench's ``g``)."""
    return grade(perfect_submission(answers, spec), answers, spec)


# --- what the answers and the spec imply --------------------------------------------------


@dataclass(frozen=True)
class _Expected:
    """What grading needs beyond the spec: the metric, the task's conventions, and per
    classification answer column its class keys in class order.

    ``one_hot``: the answers hold one indicator column per class. ``open_labels``: an ordinal
    metric's class set is the labels present in answers and submission, so the keys here are
    not a scale and any label of the answers' kind is valid.
    """

    metric: Metric
    conventions: Conventions
    classes: Mapping[str, tuple[str, ...]]
    one_hot: bool = False
    open_labels: bool = False


def _expect(answers: pd.DataFrame, spec: TaskSpec) -> _Expected:
    """Check the answers and the spec against the metric; problems are the task's fault."""
    metric = get_metric(spec.metric)
    conv = conventions(spec)
    _check_answers(answers, spec)
    kind = metric.prediction
    where = f"task {spec.id} (metric {metric.name})"
    if kind in ("label", "value") and len(spec.answer_columns) != len(spec.target_columns):
        raise TaskFormatError(
            f"{where}: answer_columns {preview(spec.answer_columns)} and target_columns "
            f"{preview(spec.target_columns)} must pair up one to one"
        )
    if kind == "value":
        for col in spec.answer_columns:
            numbers = pd.to_numeric(answers[col], errors="coerce")
            if numbers.isna().any() or not np.isfinite(numbers.to_numpy(float)).all():
                raise TaskFormatError(f"{where}: answers column {col!r} must hold finite numbers")
            if metric.non_negative and (numbers < 0).any():
                raise TaskFormatError(f"{where}: answers column {col!r} has negative values")
        return _Expected(metric, conv, {})
    if kind == "class_probabilities" and len(spec.answer_columns) > 1:
        return _expect_one_hot(answers, spec, metric, conv, where)

    label_cols = spec.answer_columns if kind == "label" else spec.answer_columns[:1]
    open_labels = metric.ordinal and conv.ordinal_labels == "present"
    classes = {col: _class_keys(answers[col], spec, metric, open_labels) for col in label_cols}
    n_classes = len(classes[label_cols[0]])
    if metric.binary and n_classes != 2:
        raise TaskFormatError(f"{where}: needs exactly 2 classes, found {n_classes}")
    if kind == "probability" and len(spec.target_columns) != 1:
        raise TaskFormatError(f"{where}: expects one target column holding P(positive)")
    if kind == "class_probabilities" and len(spec.target_columns) != n_classes:
        raise TaskFormatError(
            f"{where}: expects one target column per class ({n_classes}), got {len(spec.target_columns)}"
        )
    return _Expected(metric, conv, classes, open_labels=open_labels)


def _expect_one_hot(answers: pd.DataFrame, spec: TaskSpec, metric: Metric, conv: Conventions,
                    where: str) -> _Expected:
    """Per-class answers: one 0/1 indicator column per class (see :func:`_one_hot_columns`)."""
    columns = _one_hot_columns(spec)
    if len(columns) != len(spec.target_columns):
        raise TaskFormatError(f"{where}: one-hot answers need one answer column per target column; "
                              f"answer_columns {preview(columns)}, target_columns {preview(spec.target_columns)}")
    keys = tuple(label_key(c) for c in (spec.classes if spec.classes is not None else columns))
    if len(keys) != len(columns):
        raise TaskFormatError(f"{where}: {len(keys)} classes {preview(keys)} for {len(columns)} one-hot answer columns")
    indicators = answers[columns].apply(pd.to_numeric, errors="coerce")
    binary = indicators.isin([0, 1]).all(axis=1)
    bad = ~(binary & (indicators.sum(axis=1) == 1))
    if bad.any():
        raise TaskFormatError(
            f"{where}: one-hot answers {preview(columns)} must hold 0/1 with exactly one 1 per row; "
            f"{int(bad.sum()):,} row(s) do not, e.g. ids {preview(answers.loc[bad, spec.id_column])}"
        )
    return _Expected(metric, conv, {spec.answer_columns[0]: keys}, one_hot=True)


def _check_answers(answers: pd.DataFrame, spec: TaskSpec) -> None:
    columns = [spec.id_column, *spec.answer_columns]
    missing = [c for c in columns if c not in answers.columns]
    if missing:
        raise TaskFormatError(f"task {spec.id}: answers lack column(s) {preview(missing)}; "
                              f"they have {len(answers.columns):,}: {preview(answers.columns)}")
    if len(answers) == 0:
        raise TaskFormatError(f"task {spec.id}: answers are empty")
    for col in columns:
        blank = int(_blank(answers[col]).sum())
        if blank:
            raise TaskFormatError(f"task {spec.id}: answers column {col!r} has {blank} missing value(s)")
    if _keys(answers[spec.id_column]).duplicated().any():
        raise TaskFormatError(f"task {spec.id}: answers have duplicate ids")


def _class_keys(labels: pd.Series, spec: TaskSpec, metric: Metric, open_labels: bool) -> tuple[str, ...]:
    """Class keys in class order for one answer column (see the module docstring)."""
    if spec.classes is not None:
        keys = tuple(label_key(c) for c in spec.classes)
        if len(set(keys)) != len(keys):
            raise TaskFormatError(f"task {spec.id}: classes {preview(spec.classes)} repeat a label")
        unknown = sorted(set(_keys(labels)) - set(keys))
        if unknown:
            raise TaskFormatError(
                f"task {spec.id}: answers column {labels.name!r} holds labels not in classes: {preview(unknown)}"
            )
        return keys
    if is_numeric_dtype(labels) and not is_bool_dtype(labels):
        values = np.sort(pd.unique(labels.to_numpy()))
        if metric.ordinal and not open_labels and np.all(values == np.round(values)):
            # Quadratic weights use distances between ratings, so ratings absent from the
            # answers must still occupy their place in the scale.
            return tuple(str(i) for i in range(int(values[0]), int(values[-1]) + 1))
        return tuple(label_key(v) for v in values)
    return tuple(sorted(set(_keys(labels))))


# --- the submission -------------------------------------------------------------------------


def _align(submission: pd.DataFrame, answers: pd.DataFrame, spec: TaskSpec, expected: _Expected) -> pd.DataFrame:
    """Validate the submission and return its rows in the answers' order (see validate_submission)."""
    # Headers are compared as text; a frame built in memory may have non-string labels.
    submission = submission.set_axis([str(c) for c in submission.columns], axis=1)
    _check_shape(submission, spec, len(answers))
    rows = _row_order(submission[spec.id_column], answers[spec.id_column], spec.id_column)
    aligned = submission.iloc[rows][[spec.id_column, *spec.target_columns]].reset_index(drop=True)

    metric = expected.metric
    for answer_col, target_col in zip(_answer_columns_for_targets(spec, metric), spec.target_columns):
        values = aligned[target_col]
        blank = int(_blank(values).sum())
        if blank:
            raise InvalidSubmissionError(
                f"column {target_col!r} has {blank} missing/empty value(s) (NaN or blank); every row needs a prediction"
            )
        if expected.open_labels:
            aligned[target_col] = _check_open_labels(target_col, values, answers[answer_col])
        elif metric.prediction == "label":
            _check_labels(target_col, values, expected.classes[answer_col])
        else:
            aligned[target_col] = _check_numbers(target_col, values, metric)
    return aligned


def _check_shape(submission: pd.DataFrame, spec: TaskSpec, n: int) -> None:
    """Emptiness, exact column set and row count."""
    expected_columns = [spec.id_column, *spec.target_columns]
    if submission.shape[0] == 0 or submission.shape[1] == 0:
        raise InvalidSubmissionError(
            f"submission is empty: expected {n} rows with columns {preview(expected_columns)}, "
            f"got shape {submission.shape}"
        )
    columns = list(submission.columns)
    repeated = sorted(c for c, count in Counter(columns).items() if count > 1)
    if repeated:
        raise InvalidSubmissionError(f"duplicate column name(s) {preview(repeated)}")
    if spec.id_column not in columns:
        raise InvalidSubmissionError(f"missing id column {spec.id_column!r}; the submission has "
                                     f"{len(columns):,} column(s): {preview(columns)}")
    missing = [c for c in spec.target_columns if c not in columns]
    if missing:
        raise InvalidSubmissionError(f"missing target column(s) {preview(missing)}; "
                                     f"expected columns {preview(expected_columns)}")
    extra = [c for c in columns if c not in expected_columns]
    if extra:
        hint = " (was the DataFrame index written? use index=False)" if any(c.startswith("Unnamed") for c in extra) else ""
        raise InvalidSubmissionError(f"{len(extra):,} unexpected extra column(s) {preview(extra)}; "
                                     f"expected exactly {preview(expected_columns)}{hint}")
    if len(submission) != n:
        raise InvalidSubmissionError(f"wrong row count: expected {n} rows, got {len(submission)}")


def _row_order(ids: pd.Series, answer_ids: pd.Series, id_column: str) -> np.ndarray:
    """Positions in the submission of each answer id, in the answers' order."""
    blank = int(_blank(ids).sum())
    if blank:
        raise InvalidSubmissionError(f"id column {id_column!r} has {blank} missing/empty value(s)")
    keys = _keys(ids)
    repeats = keys[keys.duplicated()]
    if len(repeats):
        raise InvalidSubmissionError(
            f"duplicate id(s) in column {id_column!r}: {preview(repeats.unique())} ({len(repeats)} extra row(s))"
        )
    answer_keys = _keys(answer_ids)
    rows = pd.Index(keys).get_indexer(answer_keys)
    if (rows < 0).any():
        absent = answer_keys[rows < 0]
        unexpected = keys[~keys.isin(set(answer_keys))]
        raise InvalidSubmissionError(
            f"ids do not match the answers: {len(absent)} missing (e.g. {preview(absent)}), "
            f"{len(unexpected)} unexpected (e.g. {preview(unexpected)}); "
            "ids are compared as text, so 1, 1.0 and '1' match"
        )
    return rows


def _answer_columns_for_targets(spec: TaskSpec, metric: Metric) -> tuple[str, ...]:
    """The answer column each target column is checked against (the label column for probabilities)."""
    if metric.prediction in ("label", "value"):
        return spec.answer_columns
    return (spec.answer_columns[0],) * len(spec.target_columns)


def _check_labels(column: str, values: pd.Series, classes: tuple[str, ...]) -> None:
    keys = _keys(values)
    unknown = keys[~keys.isin(set(classes))]
    if len(unknown):
        raise InvalidSubmissionError(
            f"column {column!r} has {len(unknown)} unknown class label(s), e.g. {preview(unknown.unique())}; "
            f"expected one of {preview(classes, 20)}"
        )


def _check_open_labels(column: str, values: pd.Series, answer_labels: pd.Series) -> pd.Series:
    """Labels of an open class set: any label of the answers' kind (numbers for numeric ratings)."""
    if not is_numeric_dtype(answer_labels) or is_bool_dtype(answer_labels):
        return values
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna() | np.isinf(numbers.astype(float))
    if bad.any():
        raise InvalidSubmissionError(
            f"column {column!r} has {int(bad.sum())} non-numeric or infinite rating(s), e.g. "
            f"{preview(values[bad].unique())}; the answers are numbers"
        )
    return numbers.astype(float)


def _present_classes(answer_labels: pd.Series, predicted: pd.Series) -> tuple[str, ...]:
    """The sorted labels present in either column (numerically for numbers): cohen_kappa_score's
    class set when it is given no ``labels``."""
    both = pd.concat([answer_labels, predicted], ignore_index=True)
    if is_numeric_dtype(answer_labels) and not is_bool_dtype(answer_labels):
        return tuple(label_key(v) for v in np.unique(both.to_numpy(float)))
    return tuple(sorted(set(_keys(both))))


def _check_numbers(column: str, values: pd.Series, metric: Metric) -> pd.Series:
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna()
    if bad.any():
        raise InvalidSubmissionError(
            f"column {column!r} has {int(bad.sum())} non-numeric value(s), e.g. {preview(values[bad].unique())}"
        )
    numbers = numbers.astype(float)
    infinite = np.isinf(numbers)
    if infinite.any():
        raise InvalidSubmissionError(f"column {column!r} has {int(infinite.sum())} infinite value(s)")
    if metric.prediction in ("probability", "class_probabilities"):
        outside = (numbers < 0) | (numbers > 1)
        if outside.any():
            raise InvalidSubmissionError(
                f"column {column!r} has {int(outside.sum())} probabilities outside [0, 1], "
                f"e.g. {preview(numbers[outside])}"
            )
    if metric.non_negative:
        negative = numbers < 0
        if negative.any():
            raise InvalidSubmissionError(
                f"column {column!r} has {int(negative.sum())} negative prediction(s), "
                f"e.g. {preview(numbers[negative])}; {metric.name} needs predictions >= 0"
            )
    return numbers


# --- scoring --------------------------------------------------------------------------------


def _score(aligned: pd.DataFrame, answers: pd.DataFrame, spec: TaskSpec, expected: _Expected) -> float:
    metric = expected.metric
    params = {name: getattr(expected.conventions, name) for name in metric.params}
    pairs = zip(spec.answer_columns, spec.target_columns)
    if metric.prediction == "value":
        return float(np.mean([
            metric(pd.to_numeric(answers[a]).to_numpy(float), aligned[t].to_numpy(float), **params)
            for a, t in pairs
        ]))
    if metric.prediction == "label":
        scores = []
        for answer_col, target_col in pairs:
            classes = (_present_classes(answers[answer_col], aligned[target_col]) if expected.open_labels
                       else expected.classes[answer_col])
            y_true, y_pred = _codes(answers[answer_col], classes), _codes(aligned[target_col], classes)
            scores.append(metric(y_true, y_pred, len(classes), **params))
        return float(np.mean(scores))
    y_true = _true_codes(answers, spec, expected)
    if metric.prediction == "probability":
        y_pred = aligned[spec.target_columns[0]].to_numpy(float)
    else:
        y_pred = aligned[list(spec.target_columns)].to_numpy(float)
    return metric(y_true, y_pred, len(expected.classes[spec.answer_columns[0]]), **params)


def _true_codes(answers: pd.DataFrame, spec: TaskSpec, expected: _Expected) -> np.ndarray:
    """The true class codes of a probability metric: from the label column or the one-hot columns."""
    if expected.one_hot:
        return answers[_one_hot_columns(spec)].apply(pd.to_numeric).to_numpy(float).argmax(axis=1)
    label_col = spec.answer_columns[0]
    return _codes(answers[label_col], expected.classes[label_col])


def _one_hot_columns(spec: TaskSpec) -> list[str]:
    """One-hot answer columns in class (target) order: matched by name when they carry the target
    columns' names, as MLE-bench matches them, else by position."""
    if set(spec.answer_columns) == set(spec.target_columns):
        return list(spec.target_columns)
    return list(spec.answer_columns)


# --- small helpers --------------------------------------------------------------------------


def label_key(value: object) -> str:
    """Canonical text of one id or label: ``1``, ``1.0``, ``np.int64(1)`` and ``" 1"`` give ``"1"``.

    Ids and class labels are compared by this text everywhere (see the module docstring).
    """
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _keys(values: pd.Series) -> pd.Series:
    if is_integer_dtype(values) and not is_bool_dtype(values):
        # Fast path for the usual integer ids: same text as label_key, without a Python loop.
        return pd.Series(values.to_numpy().astype(str), index=values.index, dtype=object)
    return pd.Series([label_key(v) for v in values], index=values.index, dtype=object)


def _codes(labels: pd.Series, classes: tuple[str, ...]) -> np.ndarray:
    """Integer class codes (positions in ``classes``); labels were checked to be known."""
    position = {key: i for i, key in enumerate(classes)}
    return np.array([position[label_key(v)] for v in labels], dtype=int)


def _blank(values: pd.Series) -> pd.Series:
    """NaN/None, or text that is empty after stripping."""
    missing = values.isna()
    if is_numeric_dtype(values):
        return missing
    return missing | values.map(lambda v: isinstance(v, str) and not v.strip()).astype(bool)
