"""Read task folders of every supported layout into :class:`~wmrl_envs.tasks.spec.Task`.

Layouts (see DESIGN §3):

* ``native``: ``task.yaml``, ``description.md``, ``public/{test.csv, sample_submission.csv, ...}``,
  ``private/answers.csv`` and a leaderboard, either ``leaderboard.csv`` in the folder or
  ``meta.leaderboard`` in ``task.yaml``: a path relative to :func:`wmrl_envs.paths.leaderboards_dir`
  (how built-in tasks point at ``leaderboards/<suite>/<id>.csv`` in the repository).
* ``mledojo`` (MLE-Dojo prepared folders): ``data/public/{description.txt, sample_submission.csv, ...}``,
  ``data/private/test_answer.csv`` and ``data/private/{private,public}_leaderboard.csv``.
* ``mlebench`` (MLE-bench prepared competitions): ``prepared/public/{description.md,
  sample_submission.csv, ...}``, ``prepared/private/<answers>.csv`` and ``leaderboard.csv``.
* ``dsbench`` (DSBench data modeling, RPG-scored, no leaderboard): ``data_resplit/<name>/``,
  ``task/<name>.txt`` and ``answers/<name>/test_answer.csv``; see :mod:`wmrl_envs.tasks.dsbench_layout`.

Foreign layouts carry no machine-readable metric. Their id and target columns come from the
sample submission (first column = id); the metric, the task type and anything else come from
a small overlay file, ``wmrl.yaml`` in the task folder, or from keyword overrides to
:func:`load_task`. Layouts are pluggable: subclass :class:`TaskLayout` (or :class:`ForeignLayout`)
and call :func:`register_layout`. A layout whose tasks do not sit directly under a tasks root
(DSBench keeps ``data_resplit/<name>``, ``task/<name>.txt`` and ``answers/<name>/`` side by side)
overrides :meth:`TaskLayout.candidates` to yield its task paths.
"""

from __future__ import annotations

import csv
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.paths import leaderboards_dir
from wmrl_envs.tasks.spec import TASK_TYPES, Task, TaskSpec

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


def _require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise TaskFormatError(f"{path}: missing {what}")
    return path


def _require_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise TaskFormatError(f"{path}: missing {what}")
    return path


def _check_leaderboard(path: Path) -> Path:
    header = csv_header(path, "leaderboard")
    if "score" not in (c.lower() for c in header):
        raise TaskFormatError(f"{path}: leaderboard has no 'score' column; columns are {header}")
    return path


def validate_spec(spec: TaskSpec, source: str) -> None:
    """Check the fields that need the metric registry: the metric exists and fits the task type."""
    from wmrl_envs.grading import (
        get_metric,  # lazy: the grading package imports tasks.spec
    )

    metric = get_metric(spec.metric)
    regression = spec.task_type in REGRESSION_TYPES
    if regression != (metric.prediction == "value"):
        kind = "regression" if regression else "classification"
        raise TaskFormatError(f"{source}: metric {metric.name!r} does not fit the {kind} task_type {spec.task_type!r}")
    if metric.binary and spec.classes is not None and len(spec.classes) != 2:
        raise TaskFormatError(f"{source}: metric {metric.name!r} needs exactly 2 classes, got {list(spec.classes)}")
    per_class = metric.prediction == "class_probabilities" and spec.classes is not None
    if per_class and len(spec.classes) != len(spec.target_columns):
        raise TaskFormatError(
            f"{source}: metric {metric.name!r} needs one target column per class; "
            f"classes {list(spec.classes)}, target_columns {list(spec.target_columns)}"
        )


def _check_answers(task: Task) -> None:
    """Answers hold the id and answer columns and never live under the public folder."""
    spec = task.spec
    if task.answers_path.resolve().is_relative_to(task.public_dir.resolve()):
        raise TaskFormatError(f"{task.answers_path}: private answers lie under the public folder {task.public_dir}")
    header = csv_header(task.answers_path, "answers")
    missing = [c for c in (spec.id_column, *spec.answer_columns) if c not in header]
    if missing:
        raise TaskFormatError(f"{task.answers_path}: answers lack column(s) {missing}; they have {header}")


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


_LAYOUTS: list[TaskLayout] = []


def register_layout(layout: TaskLayout, *, first: bool = False) -> None:
    """Add a layout; ``first=True`` lets it claim folders before the built-in layouts."""
    if any(existing.name == layout.name for existing in _LAYOUTS):
        raise ValueError(f"a task layout named {layout.name!r} is already registered")
    if first:
        _LAYOUTS.insert(0, layout)
    else:
        _LAYOUTS.append(layout)


def unregister_layout(name: str) -> None:
    """Remove a registered layout by name (a no-op when there is none)."""
    _LAYOUTS[:] = [layout for layout in _LAYOUTS if layout.name != name]


def layouts() -> tuple[TaskLayout, ...]:
    return tuple(_LAYOUTS)


def detect_layout(path: Path) -> TaskLayout | None:
    """The first registered layout that recognises ``path``."""
    return next((layout for layout in _LAYOUTS if layout.detect(path)), None)


def load_task(path: str | Path, *, require_leaderboard: bool = True, **overrides: Any) -> Task:
    """Load the task folder at ``path``, whatever its layout.

    Args:
        path: The task folder.
        require_leaderboard: Raise if the task has no leaderboard (off only while one is built).
        **overrides: Spec fields (``metric``, ``task_type``, ``split``, ...) and, for foreign
            layouts, file locations (``answers``, ``sample_submission``, ...) that take
            precedence over ``task.yaml`` / ``wmrl.yaml``.

    Raises:
        TaskFormatError: The folder is not a task, or a piece is missing or malformed.
    """
    path = Path(path).expanduser()
    if not path.is_dir():
        raise TaskFormatError(f"{path}: not a directory")
    unknown = sorted(set(overrides) - set(SPEC_KEYS) - set(FILE_KEYS))
    if unknown:
        raise TaskFormatError(f"load_task: unknown override(s) {unknown}; known: {sorted(SPEC_KEYS + FILE_KEYS)}")
    layout = detect_layout(path)
    if layout is None:
        expected = "; ".join(f"{lay.name}: {lay.summary}" for lay in _LAYOUTS)
        raise TaskFormatError(f"{path}: not a task folder (missing task.yaml). Expected one of the layouts: {expected}")
    return layout.load(path, overrides, require_leaderboard)


def discover_tasks(root: Path, *, require_leaderboard: bool = True) -> list[Task]:
    """Every task under a tasks root: the root itself if it is a task, else the folders inside it.

    Folders no layout recognises are skipped; a recognised but broken folder raises.
    """
    if not root.is_dir():
        return []
    own = detect_layout(root)
    if own is not None:
        return [own.load(root, {}, require_leaderboard)]
    seen: set[Path] = set()
    tasks: list[Task] = []
    for layout in _LAYOUTS:
        for candidate in layout.candidates(root):
            if candidate in seen:
                continue
            found = detect_layout(candidate)
            if found is not None:
                seen.add(candidate)
                tasks.append(found.load(candidate, {}, require_leaderboard))
    return tasks


# --- native -------------------------------------------------------------------------------------


class NativeLayout(TaskLayout):
    """WMRL's own layout (DESIGN §3), written by the built-in suite generator."""

    name = "native"
    summary = "task.yaml, description.md, public/ (test.csv, sample_submission.csv), private/answers.csv, leaderboard"

    def detect(self, path: Path) -> bool:
        # A folder with public/ and private/ but no task.yaml is a broken native task, not "no task".
        return (path / "task.yaml").is_file() or ((path / "public").is_dir() and (path / "private").is_dir())

    def load(self, path: Path, overrides: Mapping[str, Any], require_leaderboard: bool) -> Task:
        source = str(path / "task.yaml")
        bad = sorted(set(overrides) & set(FILE_KEYS))
        if bad:
            raise TaskFormatError(f"{path}: native tasks locate their files by convention; cannot override {bad}")
        data = read_yaml(path / "task.yaml", "task.yaml")
        if not isinstance(data, dict):
            raise TaskFormatError(f"{source}: expected a mapping at top level, got {type(data).__name__}")
        spec = TaskSpec.from_dict({**data, **overrides}, source=source)
        validate_spec(spec, source)

        description = _require_file(path / "description.md", "description.md (what the agent reads)")
        public = _require_dir(path / "public", "public/ folder (the agent's input files)")
        test = _require_file(public / "test.csv", "public/test.csv (the rows to predict)")
        sample = _require_file(public / "sample_submission.csv", "public/sample_submission.csv")
        answers = _require_file(path / "private" / "answers.csv", "private/answers.csv (the hidden answers)")

        expected = [spec.id_column, *spec.target_columns]
        header = csv_header(sample, "sample submission")
        if header != expected:
            raise TaskFormatError(f"{sample}: sample submission columns {header} differ from {expected} (task.yaml)")
        test_header = csv_header(test, "test file")
        if spec.id_column not in test_header:
            raise TaskFormatError(f"{test}: test file lacks the id column {spec.id_column!r}")
        leaked = [c for c in spec.answer_columns if c in test_header]
        if leaked:
            raise TaskFormatError(f"{test}: test file holds answer column(s) {leaked}; labels must stay private")

        # RPG-scored tasks (DSBench) are scored against their recorded g and b, not a leaderboard.
        board = self._leaderboard(path, spec, require_leaderboard and spec.meta.get("reward") != "rpg")
        task = Task(spec=spec, root=path, description_path=description, public_dir=public, answers_path=answers,
                    leaderboard_path=board, layout=self.name)
        _check_answers(task)
        return task

    @staticmethod
    def _leaderboard(path: Path, spec: TaskSpec, required: bool) -> Path | None:
        local = path / "leaderboard.csv"
        pointer = spec.meta.get("leaderboard")
        board = local if local.is_file() or not pointer else leaderboards_dir() / str(pointer)
        if board.is_file():
            return _check_leaderboard(board)
        if not required:
            return None
        if pointer:
            raise TaskFormatError(
                f"{path}: missing leaderboard {board} (task.yaml meta.leaderboard = {pointer!r}); "
                "generate it with scripts/build_leaderboards.py"
            )
        raise TaskFormatError(f"{path}: missing leaderboard: add leaderboard.csv (rank,score) to the task folder")


# --- foreign layouts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Files:
    description: Path
    public_dir: Path
    sample_submission: Path
    answers: Path
    leaderboards: tuple[Path, ...]


class ForeignLayout(TaskLayout):
    """Shared logic of layouts without a machine-readable spec: infer columns, read ``wmrl.yaml``."""

    default_suite: ClassVar[str]
    default_env_id: ClassVar[str] = DEFAULT_ENV_ID

    @abstractmethod
    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> _Files:
        """Locate (and check) the task's files; ``located`` holds explicit file keys from the overlay."""

    def load(self, path: Path, overrides: Mapping[str, Any], require_leaderboard: bool) -> Task:
        overlay, source = self.overlay(path)
        fields = {**overlay, **overrides}
        missing = [k for k in ("metric", "task_type") if k not in fields]
        if missing:
            raise TaskFormatError(self._overlay_help(path, missing))
        files = self.files(path, {k: fields[k] for k in FILE_KEYS if k in fields}, require_leaderboard)
        source = source if overlay else f"{path} (overrides)"
        spec = TaskSpec.from_dict(self._spec_fields(path, files, fields, source), source=source)
        validate_spec(spec, source)
        task = Task(spec=spec, root=path, description_path=files.description, public_dir=files.public_dir,
                    answers_path=files.answers, leaderboard_path=files.leaderboards[0] if files.leaderboards else None,
                    leaderboard_paths=files.leaderboards, sample_submission_path=files.sample_submission,
                    layout=self.name)
        _check_answers(task)
        return task

    def overlay(self, path: Path) -> tuple[dict[str, Any], str]:
        """The task's overlay fields (``wmrl.yaml`` in the task folder; empty if absent) and their source."""
        overlay_path = path / OVERLAY_FILE
        return (read_overlay(overlay_path) if overlay_path.is_file() else {}), str(overlay_path)

    def _overlay_help(self, path: Path, missing: list[str]) -> str:
        from wmrl_envs.grading import METRICS

        return (
            f"{path}: the {self.name} layout carries no machine-readable {' or '.join(missing)}. "
            f"Add {path / OVERLAY_FILE} with at least:\n"
            f"  metric: <one of {sorted(METRICS)}>\n"
            f"  task_type: <one of {list(TASK_TYPES)}>\n"
            "and optionally id, name, split (train|heldout, default heldout), suite, classes, "
            "id_column, target_columns, answer_columns, limits, meta, or file locations "
            f"{list(FILE_KEYS)}; or pass metric=..., task_type=... to load_task()"
        )

    def _spec_fields(self, path: Path, files: _Files, fields: Mapping[str, Any], source: str) -> dict[str, Any]:
        from wmrl_envs.grading import get_metric

        kind = get_metric(str(fields["metric"])).prediction
        header = csv_header(files.sample_submission, "sample submission")
        if len(header) < 2:
            raise TaskFormatError(
                f"{files.sample_submission}: a sample submission needs an id column and a target column, got {header}"
            )
        id_column = fields.get("id_column", header[0])
        targets = list(fields.get("target_columns") or [c for c in header if c != id_column])
        answers = fields.get("answer_columns") or self._answer_columns(files.answers, id_column, targets, kind)
        classes = fields.get("classes")
        if classes is None and kind == "class_probabilities":
            classes = targets
        elif classes is None and kind in ("label", "probability"):
            classes = _sorted_labels(files.answers, answers[0])
        meta = {"layout": self.name, **(fields.get("meta") or {})}
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
            raise TaskFormatError(f"{answers}: answers lack the id column {id_column!r}; they have {header}")
        others = [c for c in header if c != id_column and c.lower() not in _BOOKKEEPING_COLUMNS]
        if kind in ("label", "value"):
            if all(t in others for t in targets):
                return targets
            if len(others) == len(targets):
                return others
        elif len(others) == 1:
            return others
        raise TaskFormatError(
            f"{answers}: cannot tell which answer column(s) to grade ({others} for submission columns {targets}); "
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
        raise TaskFormatError(f"{where}: unknown key(s) {unknown}; known: {sorted(SPEC_KEYS + FILE_KEYS)}")
    return data


def _sorted_labels(answers: Path, column: str) -> list[Any]:
    """Distinct labels of an answer column, sorted (numbers numerically)."""
    import pandas as pd

    values = pd.read_csv(answers, usecols=[column])[column].dropna().unique().tolist()
    return sorted(values, key=lambda v: (isinstance(v, str), v))


def _first_csv(folder: Path, pattern: str) -> Path | None:
    found = sorted(p for p in folder.glob("*.csv") if re.fullmatch(pattern, p.name, flags=re.IGNORECASE))
    return found[0] if found else None


def _sample_submission(public: Path, located: Mapping[str, Any], root: Path) -> Path:
    if "sample_submission" in located:
        return _require_file(root / str(located["sample_submission"]), "sample submission (wmrl.yaml)")
    found = _first_csv(public, r"sample_?submission.*\.csv")
    if found is None:
        raise TaskFormatError(f"{public}: missing sample_submission.csv (or set sample_submission in {OVERLAY_FILE})")
    return found


class MLEDojoLayout(ForeignLayout):
    """MLE-Dojo prepared folders: ``data/public``, ``data/private`` and two leaderboards."""

    name = "mledojo"
    default_suite = "mledojo"
    summary = ("data/public/{description.txt, sample_submission.csv}, data/private/test_answer.csv, "
               "data/private/{private,public}_leaderboard.csv, wmrl.yaml")

    def detect(self, path: Path) -> bool:
        return (path / "data" / "public").is_dir() or (path / "data" / "private").is_dir()

    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> _Files:
        public = _require_dir(path / "data" / "public", "data/public/ folder")
        private = _require_dir(path / "data" / "private", "data/private/ folder")
        description = path / str(located.get("description", "data/public/description.txt"))
        answers = path / str(located["answers"]) if "answers" in located else private / "test_answer.csv"
        if "leaderboard" in located:
            boards = [path / str(located["leaderboard"])]
        else:
            boards = [b for b in (private / "private_leaderboard.csv", private / "public_leaderboard.csv") if b.is_file()]
            if not boards and require_leaderboard:
                raise TaskFormatError(f"{private}: missing leaderboard: add private_leaderboard.csv and/or "
                                      "public_leaderboard.csv (rank,score)")
        return _Files(
            description=_require_file(description, "description (data/public/description.txt)"),
            public_dir=public,
            sample_submission=_sample_submission(public, located, path),
            answers=_require_file(answers, "answers (data/private/test_answer.csv)"),
            leaderboards=tuple(_check_leaderboard(b) for b in boards if b.is_file() or require_leaderboard),
        )


class MLEBenchLayout(ForeignLayout):
    """MLE-bench prepared competitions: ``prepared/public``, ``prepared/private``, ``leaderboard.csv``."""

    name = "mlebench"
    default_suite = "mlebench"
    summary = ("prepared/public/{description.md, sample_submission.csv}, prepared/private/<answers>.csv, "
               "leaderboard.csv, wmrl.yaml")
    #: Preferred answer file names when prepared/private holds several CSV files.
    answer_names: ClassVar[tuple[str, ...]] = ("answers.csv", "test.csv", "gold_submission.csv", "solution.csv")

    def detect(self, path: Path) -> bool:
        return (path / "prepared").is_dir()

    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> _Files:
        public = _require_dir(path / "prepared" / "public", "prepared/public/ folder")
        private = _require_dir(path / "prepared" / "private", "prepared/private/ folder")
        if "description" in located:
            description = path / str(located["description"])
        else:
            description = next((p for p in (public / "description.md", path / "description.md") if p.is_file()),
                               public / "description.md")
        board = path / str(located.get("leaderboard", "leaderboard.csv"))
        if not board.is_file() and require_leaderboard:
            raise TaskFormatError(f"{board}: missing leaderboard (MLE-bench's leaderboard.csv with a score column)")
        return _Files(
            description=_require_file(description, "description (prepared/public/description.md)"),
            public_dir=public,
            sample_submission=_sample_submission(public, located, path),
            answers=self._answers(path, private, located),
            leaderboards=(_check_leaderboard(board),) if board.is_file() else (),
        )

    def _answers(self, path: Path, private: Path, located: Mapping[str, Any]) -> Path:
        if "answers" in located:
            return _require_file(path / str(located["answers"]), "answers (wmrl.yaml)")
        csvs = sorted(private.glob("*.csv"))
        if len(csvs) == 1:
            return csvs[0]
        for name in self.answer_names:
            if (private / name).is_file():
                return private / name
        found = [p.name for p in csvs] or "no CSV file"
        raise TaskFormatError(f"{private}: missing answers ({found}); set answers in {OVERLAY_FILE}")


for _layout in (NativeLayout(), MLEDojoLayout(), MLEBenchLayout()):
    register_layout(_layout)

# Last: the DSBench layout builds on ForeignLayout and registers itself when imported.
from wmrl_envs.tasks import dsbench_layout  # noqa: E402,F401
