"""The task-layout protocol and what every layout shares.

A layout (:class:`TaskLayout`) recognises one kind of task folder and reads it into a
:class:`~wmrl_envs.task_spec.Task`. :class:`ForeignLayout` holds the logic of layouts that carry
no machine-readable spec (MLE-Dojo, MLE-bench, DSBench): columns are inferred from the sample
submission and the rest comes from an overlay file, ``wmrl.yaml``. The layouts themselves and
their ordered registry live in :mod:`wmrl_envs.tasks.loader`.
"""

from __future__ import annotations

import csv
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pandas as pd
import yaml

from wmrl_envs.errors import TaskFormatError, preview
from wmrl_envs.grading import METRICS, Leaderboard, get_metric
from wmrl_envs.grading.conventions import conventions
from wmrl_envs.task_spec import TASK_TYPES, Task, TaskSpec

T = TypeVar("T")

OVERLAY_FILE = "wmrl.yaml"
DEFAULT_ENV_ID = "wmrl/MLEDojo-v0"
REGRESSION_TYPES: tuple[str, ...] = tuple(t for t in TASK_TYPES if t.endswith("regression"))
# Keys of wmrl.yaml (and of load_task overrides) that locate files instead of setting spec fields.
FILE_KEYS: tuple[str, ...] = ("description", "sample_submission", "answers", "leaderboard")
SPEC_KEYS: tuple[str, ...] = tuple(TaskSpec.__dataclass_fields__)
# libyaml's safe loader when PyYAML was built with it: task folders are read on every reset.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Kaggle solution files often mark public/private rows; that column is not an answer.
_BOOKKEEPING_COLUMNS = {"usage"}


# --- small readers ----------------------------------------------------------------------------


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file; a syntax error becomes a :class:`TaskFormatError` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TaskFormatError(f"{path}: missing {what}") from exc
    try:
        return yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise TaskFormatError(f"{path}: {what} is not valid YAML: {exc}") from exc


def csv_header(path: Path, what: str) -> list[str]:
    """The column names of a CSV file, read without loading it."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except FileNotFoundError as exc:
        raise TaskFormatError(f"{path}: missing {what}") from exc
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TaskFormatError(f"{path}: {what} is not a readable CSV: {exc}") from exc
    if not header:
        raise TaskFormatError(f"{path}: {what} is empty (no header row)")
    return [c.strip() for c in header]


def safe_task_id(name: str) -> str:
    """A folder name turned into a valid task id (other characters become ``-``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "task"


def require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise TaskFormatError(f"{path}: missing {what}")
    return path


def require_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise TaskFormatError(f"{path}: missing {what}")
    return path


def check_leaderboard(path: Path) -> Path:
    """Read the whole board once, so a broken one fails when the task loads, not when it is graded."""
    Leaderboard.from_csv(path, higher_is_better=True)  # the direction does not matter for the checks
    return path


class Problems:
    """A task folder's problems, collected so that one error names every missing piece at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[str] = []

    def add(self, message: str) -> None:
        self.found.append(message)

    def check(self, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``, or ``None`` once the problems of the :class:`TaskFormatError` it raised are recorded."""
        try:
            return fn(*args)
        except TaskFormatError as exc:
            self.found.extend(exc.problems)
            return None

    def raise_if_any(self) -> None:
        """Raise one :class:`TaskFormatError`: the problem itself, or all of them listed."""
        if len(self.found) == 1:
            raise TaskFormatError(self.found[0])
        if self.found:
            listed = "\n".join(f"- {problem}" for problem in self.found)
            raise TaskFormatError(f"{self.path}: {len(self.found)} problems:\n{listed}", tuple(self.found))


def validate_spec(spec: TaskSpec, source: str) -> None:
    """Check the fields that need the grading registries: the metric exists and fits the task type,
    and the grading conventions in ``meta`` are well formed."""
    metric = get_metric(spec.metric)
    try:
        conventions(spec)
    except TaskFormatError as exc:
        raise TaskFormatError(f"{source}: {exc}") from exc
    regression = spec.task_type in REGRESSION_TYPES
    if regression != (metric.prediction == "value"):
        kind = "regression" if regression else "classification"
        raise TaskFormatError(f"{source}: metric {metric.name!r} does not fit the {kind} task_type {spec.task_type!r}")
    if metric.binary and spec.classes is not None and len(spec.classes) != 2:
        raise TaskFormatError(f"{source}: metric {metric.name!r} needs exactly 2 classes, got {preview(spec.classes)}")
    per_class = metric.prediction == "class_probabilities" and spec.classes is not None
    if per_class and len(spec.classes) != len(spec.target_columns):
        raise TaskFormatError(
            f"{source}: metric {metric.name!r} needs one target column per class; "
            f"{len(spec.classes):,} classes {preview(spec.classes)}, "
            f"{len(spec.target_columns):,} target_columns {preview(spec.target_columns)}"
        )


def check_answers(task: Task) -> None:
    """Answers hold the id and answer columns and never live under the public folder."""
    spec = task.spec
    if task.answers_path.resolve().is_relative_to(task.public_dir.resolve()):
        raise TaskFormatError(f"{task.answers_path}: private answers lie under the public folder {task.public_dir}")
    header = csv_header(task.answers_path, "answers")
    missing = [c for c in (spec.id_column, *spec.answer_columns) if c not in header]
    if missing:
        raise TaskFormatError(f"{task.answers_path}: answers lack column(s) {preview(missing)}; "
                              f"they have {preview(header)}")


# --- the layout protocol ------------------------------------------------------------------------


class TaskLayout(ABC):
    """How one kind of task folder is recognised and read."""

    name: ClassVar[str]
    #: One line that says what a folder of this layout must contain (used in error messages).
    summary: ClassVar[str]

    @abstractmethod
    def detect(self, path: Path) -> bool:
        """Whether ``path`` looks like a task folder of this layout (it may still be incomplete)."""

    @abstractmethod
    def load(self, path: Path, overrides: Mapping[str, Any], require_leaderboard: bool) -> Task:
        """Read and validate the task at ``path``; raise :class:`TaskFormatError` naming what is wrong."""

    def candidates(self, root: Path) -> Iterator[Path]:
        """Folders under a tasks root that may each hold one task (default: its visible children)."""
        yield from sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


# --- foreign layouts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskFiles:
    """Where a foreign task's files lie, as its layout located and checked them."""

    description: Path
    public_dir: Path
    sample_submission: Path
    answers: Path
    leaderboards: tuple[Path, ...]


class ForeignLayout(TaskLayout):
    """Shared logic of layouts without a machine-readable spec: infer columns, read ``wmrl.yaml``."""

    default_suite: ClassVar[str]
    default_env_id: ClassVar[str] = DEFAULT_ENV_ID
    #: Grading conventions of the peer's grader (:mod:`wmrl_envs.grading.conventions`), written
    #: into the meta of every task of this layout; the overlay's ``meta`` overrides them.
    grading_meta: ClassVar[Mapping[str, Any]] = {}

    @abstractmethod
    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> TaskFiles:
        """Locate (and check) the task's files; ``located`` holds explicit file keys from the overlay.

        Raise one :class:`TaskFormatError` naming every missing piece (see :class:`Problems`).
        """

    def load(self, path: Path, overrides: Mapping[str, Any], require_leaderboard: bool) -> Task:
        overlay, source = self.overlay(path)
        fields = {**overlay, **overrides}
        source = source if overlay else f"{path} (overrides)"
        # Everything that is missing is reported at once: the overlay's fields, the files, the columns.
        problems = Problems(path)
        missing = [k for k in ("metric", "task_type") if k not in fields]
        if missing:
            problems.add(self._overlay_help(path, missing))
        files = problems.check(self.files, path, {k: fields[k] for k in FILE_KEYS if k in fields}, require_leaderboard)
        spec_fields = None if files is None or missing else problems.check(self._spec_fields, path, files, fields)
        problems.raise_if_any()
        assert files is not None and spec_fields is not None  # raise_if_any raised otherwise
        spec = TaskSpec.from_dict(spec_fields, source=source)
        validate_spec(spec, source)
        task = Task(spec=spec, root=path, description_path=files.description, public_dir=files.public_dir,
                    answers_path=files.answers, leaderboard_path=files.leaderboards[0] if files.leaderboards else None,
                    leaderboard_paths=files.leaderboards, sample_submission_path=files.sample_submission,
                    layout=self.name)
        check_answers(task)
        return task

    def overlay(self, path: Path) -> tuple[dict[str, Any], str]:
        """The task's overlay fields (``wmrl.yaml`` in the task folder; empty if absent) and their source."""
        overlay_path = path / OVERLAY_FILE
        return (read_overlay(overlay_path) if overlay_path.is_file() else {}), str(overlay_path)

    def _overlay_help(self, path: Path, missing: list[str]) -> str:
        return (
            f"{path}: the {self.name} layout carries no machine-readable {' or '.join(missing)}. "
            f"Add {path / OVERLAY_FILE} with at least:\n"
            f"  metric: <one of {sorted(METRICS)}>\n"
            f"  task_type: <one of {list(TASK_TYPES)}>\n"
            "and, where the files do not tell, answer_columns (which answers columns to grade) and "
            "sample_submission (its path); optionally id, name, split (train|heldout, default heldout), "
            "suite, classes, id_column, target_columns, limits, meta, or the other file locations "
            f"{list(FILE_KEYS)}; or pass metric=..., task_type=... to load_task()"
        )

    def _spec_fields(self, path: Path, files: TaskFiles, fields: Mapping[str, Any]) -> dict[str, Any]:
        metric = get_metric(str(fields["metric"]))
        kind = metric.prediction
        header = csv_header(files.sample_submission, "sample submission")
        if len(header) < 2:
            raise TaskFormatError(
                f"{files.sample_submission}: a sample submission needs an id column and a target column, "
                f"got {preview(header)}"
            )
        id_column = fields.get("id_column", header[0])
        targets = list(fields.get("target_columns") or [c for c in header if c != id_column])
        answers = fields.get("answer_columns") or self._answer_columns(files.answers, id_column, targets, kind)
        classes = fields.get("classes")
        defaults = dict(self.grading_meta)
        if classes is None and kind == "class_probabilities":
            classes = targets
        elif classes is None and kind in ("label", "probability"):
            classes = _sorted_labels(files.answers, answers[0])
            if metric.ordinal:  # no declared scale: the peers' graders rate on the labels present
                defaults["ordinal_labels"] = "present"
        derived = data_statistics(files.public_dir, id_column, tuple(answers))
        meta = {"layout": self.name, **derived, **defaults, **(fields.get("meta") or {})}
        return {
            "id": fields.get("id", safe_task_id(path.name)),
            "name": fields.get("name", path.name),
            "suite": fields.get("suite", self.default_suite),
            "env_id": fields.get("env_id", self.default_env_id),
            "split": fields.get("split", "heldout"),
            "metric": fields["metric"],
            "task_type": fields["task_type"],
            "id_column": id_column,
            "target_columns": targets,
            "answer_columns": list(answers),
            "classes": classes,
            "limits": fields.get("limits"),
            "meta": meta,
        }

    @staticmethod
    def _answer_columns(answers: Path, id_column: str, targets: list[str], kind: str) -> list[str]:
        header = csv_header(answers, "answers")
        if id_column not in header:
            raise TaskFormatError(f"{answers}: answers lack the id column {id_column!r}; "
                                  f"they have {preview(header)}")
        others = [c for c in header if c != id_column and c.lower() not in _BOOKKEEPING_COLUMNS]
        if kind in ("label", "value"):
            if all(t in others for t in targets):
                return targets
            if len(others) == len(targets):
                return others
        elif len(others) == 1:
            return others
        elif kind == "class_probabilities" and len(targets) > 1 and all(t in others for t in targets):
            return targets  # one-hot answers, one indicator column per class (MLE-bench's log-loss tasks)
        raise TaskFormatError(
            f"{answers}: cannot tell which answer column(s) to grade ({preview(others)} for submission columns "
            f"{preview(targets)}); "
            f"set answer_columns in {OVERLAY_FILE}"
        )


def read_overlay(path: Path) -> dict[str, Any]:
    """The fields of an overlay file (``wmrl.yaml``), checked by :func:`check_overlay`."""
    return check_overlay(read_yaml(path, OVERLAY_FILE), str(path))


def check_overlay(data: Any, where: str) -> dict[str, Any]:
    """Check parsed overlay fields: a mapping of spec and file keys; ``where`` names them in errors."""
    if not isinstance(data, dict):
        raise TaskFormatError(f"{where}: expected a mapping at top level, got {type(data).__name__}")
    unknown = sorted(set(data) - set(SPEC_KEYS) - set(FILE_KEYS))
    if unknown:
        raise TaskFormatError(f"{where}: unknown key(s) {preview(unknown)}; known: {sorted(SPEC_KEYS + FILE_KEYS)}")
    return data


def _sorted_labels(answers: Path, column: str) -> list[Any]:
    """Distinct labels of an answer column, sorted (numbers numerically)."""
    values = pd.read_csv(answers, usecols=[column])[column].dropna().unique().tolist()
    return sorted(values, key=lambda v: (isinstance(v, str), v))


#: Rows read to tell numeric from other columns when statistics are derived from the files.
_DTYPE_SAMPLE_ROWS = 2_000


def data_statistics(public_dir: Path, id_column: str, answer_columns: tuple[str, ...]) -> dict[str, int]:
    """``n_train``, ``n_test``, ``n_features`` and ``n_numeric`` read from ``train.csv`` / ``test.csv``.

    Policies and world models condition on these (``agents.code.features``,
    ``wmrl_envs.analysis.code_features``); a foreign task whose overlay gives no ``meta``
    gets them from its files instead of an unseen row count of 0. Files that are absent give
    no statistic. Results are cached by path, size and modification time, because task lookups
    rescan user folders.
    """
    out: dict[str, int] = {}
    for key, name in (("n_train", "train.csv"), ("n_test", "test.csv")):
        path = public_dir / name
        if path.is_file():
            stat = path.stat()
            out[key] = _row_count(str(path), stat.st_size, stat.st_mtime_ns)
    test = public_dir / "test.csv"
    if test.is_file():
        stat = test.stat()
        out.update(_column_stats(str(test), stat.st_size, stat.st_mtime_ns, id_column, answer_columns))
    return out


@lru_cache(maxsize=256)
def _row_count(path: str, size: int, mtime_ns: int) -> int:
    """Data rows of a CSV: its newlines, less the header's (a last line without one still counts)."""
    newlines, last = 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    return max(newlines - 1 + (last != b"\n"), 0)


@lru_cache(maxsize=256)
def _column_stats(path: str, size: int, mtime_ns: int, id_column: str,
                  answer_columns: tuple[str, ...]) -> dict[str, int]:
    sample = pd.read_csv(path, nrows=_DTYPE_SAMPLE_ROWS)
    features = [c for c in sample.columns if c != id_column and c not in answer_columns]
    return {"n_features": len(features),
            "n_numeric": int(sum(pd.api.types.is_numeric_dtype(sample[c]) for c in features))}
