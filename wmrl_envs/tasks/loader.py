"""Read task folders of every supported layout into :class:`~wmrl_envs.task_spec.Task`.

Layouts (see docs/architecture.md, "Task format"):

* ``native``: ``task.yaml``, ``description.md``, ``public/{test.csv, sample_submission.csv, ...}``,
  ``private/answers.csv`` and a leaderboard, either ``leaderboard.csv`` in the folder or
  ``meta.leaderboard`` in ``task.yaml``: a path relative to :func:`wmrl_envs.paths.leaderboards_dir`
  (how built-in tasks point at ``leaderboards/<suite>/<id>.csv`` in the repository).
* ``mledojo`` (MLE-Dojo prepared folders): ``data/public/{description.txt, sample_submission.csv, ...}``,
  ``data/private/test_answer.csv`` and ``data/private/{private,public}_leaderboard.csv``.
* ``mlebench`` (MLE-bench prepared competitions): ``prepared/public/{description.md,
  sample_submission.csv, ...}``, ``prepared/private/<answers>.csv`` and ``leaderboard.csv``, which
  MLE-bench keeps in its repository (``mlebench/competitions/<id>/``), not in the prepared data.
* ``dsbench`` (DSBench data modeling, RPG-scored, no leaderboard): ``data_resplit/<name>/``,
  ``task/<name>.txt``, ``answers/<name>/test_answer.csv`` and, optionally, DSBench's baseline
  scores in ``save_performance/baseline/``; see :mod:`wmrl_envs.tasks.dsbench_layout`.

Foreign layouts carry no machine-readable metric. Their id and target columns come from the
sample submission (first column = id); the metric, the task type and anything else come from
a small overlay file, ``wmrl.yaml`` in the task folder, or from keyword overrides to
:func:`load_task`. Each foreign layout records its peer's grading conventions in the tasks'
``meta`` (:mod:`wmrl_envs.grading.conventions`). The layouts :func:`load_task` knows are an explicit, ordered registry
(:data:`BUILTIN_LAYOUTS`), and they are pluggable: subclass
:class:`~wmrl_envs.tasks.layout.TaskLayout` (or :class:`~wmrl_envs.tasks.layout.ForeignLayout`)
and call :func:`register_layout`. A layout whose tasks do not sit directly under a tasks root
(DSBench keeps ``data_resplit/<name>``, ``task/<name>.txt`` and ``answers/<name>/`` side by side)
overrides :meth:`~wmrl_envs.tasks.layout.TaskLayout.candidates` to yield its task paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from wmrl_envs.errors import TaskFormatError, WMRLError, preview
from wmrl_envs.paths import leaderboards_dir
from wmrl_envs.task_spec import Task, TaskSpec
from wmrl_envs.tasks.dsbench_layout import DSBenchLayout
from wmrl_envs.tasks.layout import (
    FILE_KEYS,
    OVERLAY_FILE,
    SPEC_KEYS,
    ForeignLayout,
    Problems,
    TaskFiles,
    TaskLayout,
    check_answers,
    check_leaderboard,
    csv_header,
    read_yaml,
    require_dir,
    require_file,
    validate_spec,
)

# --- native -------------------------------------------------------------------------------------


class NativeLayout(TaskLayout):
    """WMRL's own layout, written by the built-in suite generator."""

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

        description = require_file(path / "description.md", "description.md (what the agent reads)")
        public = require_dir(path / "public", "public/ folder (the agent's input files)")
        test = require_file(public / "test.csv", "public/test.csv (the rows to predict)")
        sample = require_file(public / "sample_submission.csv", "public/sample_submission.csv")
        answers = require_file(path / "private" / "answers.csv", "private/answers.csv (the hidden answers)")

        expected = [spec.id_column, *spec.target_columns]
        header = csv_header(sample, "sample submission")
        if header != expected:
            raise TaskFormatError(f"{sample}: sample submission columns {preview(header)} differ from "
                                  f"{preview(expected)} (task.yaml)")
        test_header = csv_header(test, "test file")
        if spec.id_column not in test_header:
            raise TaskFormatError(f"{test}: test file lacks the id column {spec.id_column!r}")
        leaked = [c for c in spec.answer_columns if c in test_header]
        if leaked:
            raise TaskFormatError(f"{test}: test file holds answer column(s) {preview(leaked)}; "
                                  "labels must stay private")

        # RPG-scored tasks (DSBench) are scored against their recorded g and b, not a leaderboard.
        board = self._leaderboard(path, spec, require_leaderboard and spec.meta.get("reward") != "rpg")
        task = Task(spec=spec, root=path, description_path=description, public_dir=public, answers_path=answers,
                    leaderboard_path=board, layout=self.name)
        check_answers(task)
        return task

    @staticmethod
    def _leaderboard(path: Path, spec: TaskSpec, required: bool) -> Path | None:
        local = path / "leaderboard.csv"
        pointer = spec.meta.get("leaderboard")
        board = local if local.is_file() or not pointer else leaderboards_dir() / str(pointer)
        if board.is_file():
            return check_leaderboard(board)
        if not required:
            return None
        if pointer:
            raise TaskFormatError(
                f"{path}: missing leaderboard {board} (task.yaml meta.leaderboard = {pointer!r}); "
                "generate it with scripts/build_leaderboards.py"
            )
        raise TaskFormatError(f"{path}: missing leaderboard: add leaderboard.csv (rank,score) to the task folder")


# --- MLE-Dojo and MLE-bench ------------------------------------------------------------------


def _first_csv(folder: Path, pattern: str) -> Path | None:
    found = sorted(p for p in folder.glob("*.csv") if re.fullmatch(pattern, p.name, flags=re.IGNORECASE))
    return found[0] if found else None


def _sample_submission(public: Path, located: Mapping[str, Any], root: Path) -> Path:
    if "sample_submission" in located:
        return require_file(root / str(located["sample_submission"]), "sample submission (wmrl.yaml)")
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

    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> TaskFiles:
        problems = Problems(path)
        public = problems.check(require_dir, path / "data" / "public", "data/public/ folder")
        problems.check(require_dir, path / "data" / "private", "data/private/ folder")
        description = path / str(located.get("description", "data/public/description.txt"))
        answers = path / str(located["answers"]) if "answers" in located else path / "data/private/test_answer.csv"
        description = problems.check(require_file, description, "description (data/public/description.txt)")
        sample = problems.check(_sample_submission, public, located, path) if public else None
        answers = problems.check(require_file, answers, "answers (data/private/test_answer.csv)")
        boards = problems.check(self._leaderboards, path, located, require_leaderboard)
        problems.raise_if_any()
        return TaskFiles(description, public, sample, answers, boards)

    @staticmethod
    def _leaderboards(path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> tuple[Path, ...]:
        private = path / "data" / "private"
        if "leaderboard" in located:
            boards = [path / str(located["leaderboard"])]
        else:
            named = (private / "private_leaderboard.csv", private / "public_leaderboard.csv")
            boards = [b for b in named if b.is_file()]
            if not boards and require_leaderboard:
                raise TaskFormatError(f"{private}: missing leaderboard: add private_leaderboard.csv and/or "
                                      "public_leaderboard.csv (rank,score)")
        return tuple(check_leaderboard(b) for b in boards if b.is_file() or require_leaderboard)


class MLEBenchLayout(ForeignLayout):
    """MLE-bench prepared competitions: ``prepared/public``, ``prepared/private``, ``leaderboard.csv``.

    MLE-bench's grader rounds scores to 5 decimals before it ranks them; so do these tasks.
    """

    name = "mlebench"
    default_suite = "mlebench"
    summary = ("prepared/public/{description.md, sample_submission.csv}, prepared/private/<answers>.csv, "
               "leaderboard.csv (from MLE-bench's repository), wmrl.yaml")
    grading_meta: ClassVar[Mapping[str, Any]] = {"score_decimals": 5}
    #: Preferred answer file names when prepared/private holds several CSV files.
    answer_names: ClassVar[tuple[str, ...]] = ("answers.csv", "test.csv", "gold_submission.csv", "solution.csv")

    def detect(self, path: Path) -> bool:
        return (path / "prepared").is_dir()

    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> TaskFiles:
        problems = Problems(path)
        public = problems.check(require_dir, path / "prepared" / "public", "prepared/public/ folder")
        private = problems.check(require_dir, path / "prepared" / "private", "prepared/private/ folder")
        if "description" in located:
            description = path / str(located["description"])
        else:
            description = next((p for p in (path / "prepared/public/description.md", path / "description.md")
                                if p.is_file()), path / "prepared/public/description.md")
        description = problems.check(require_file, description, "description (prepared/public/description.md)")
        sample = problems.check(_sample_submission, public, located, path) if public else None
        answers = problems.check(self._answers, path, private, located) if private else None
        boards = problems.check(self._leaderboard, path, located, require_leaderboard)
        problems.raise_if_any()
        return TaskFiles(description, public, sample, answers, boards)

    @staticmethod
    def _leaderboard(path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> tuple[Path, ...]:
        board = path / str(located.get("leaderboard", "leaderboard.csv"))
        if board.is_file():
            return (check_leaderboard(board),)
        if require_leaderboard:
            # The folder name is the competition id: MLE-bench prepares <data-dir>/<id>/prepared/.
            raise TaskFormatError(
                f"{board}: missing leaderboard. MLE-bench keeps it in its repository, not in the prepared data: "
                f"copy mlebench/competitions/{path.name}/leaderboard.csv from a checkout of "
                "https://github.com/openai/mle-bench (a Git LFS file: run `git lfs pull` there first) to "
                f"{board}, or set leaderboard in {OVERLAY_FILE}"
            )
        return ()

    def _answers(self, path: Path, private: Path, located: Mapping[str, Any]) -> Path:
        if "answers" in located:
            return require_file(path / str(located["answers"]), "answers (wmrl.yaml)")
        csvs = sorted(private.glob("*.csv"))
        if len(csvs) == 1:
            return csvs[0]
        for name in self.answer_names:
            if (private / name).is_file():
                return private / name
        found = preview(p.name for p in csvs) if csvs else "no CSV file"
        raise TaskFormatError(f"{private}: missing answers ({found}); set answers in {OVERLAY_FILE}")


# --- the registry and loading -------------------------------------------------------------------


#: The built-in layouts in detection order: the first that recognises a folder reads it. Native is
#: tried first: a folder with a ``task.yaml`` is WMRL's own, whatever else it holds.
BUILTIN_LAYOUTS: tuple[type[TaskLayout], ...] = (NativeLayout, MLEDojoLayout, MLEBenchLayout, DSBenchLayout)

_LAYOUTS: list[TaskLayout] = [layout() for layout in BUILTIN_LAYOUTS]


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
    """The registered layouts, in detection order."""
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
        raise TaskFormatError(f"load_task: unknown override(s) {preview(unknown)}; "
                              f"known: {sorted(SPEC_KEYS + FILE_KEYS)}")
    layout = detect_layout(path)
    if layout is None:
        expected = "; ".join(f"{lay.name}: {lay.summary}" for lay in _LAYOUTS)
        raise TaskFormatError(f"{path}: not a task folder (missing task.yaml). Expected one of the layouts: {expected}")
    return layout.load(path, overrides, require_leaderboard)


@dataclass(frozen=True)
class LoadFailure:
    """A task folder, or a built-in suite, that did not load.

    Attributes:
        path: The folder (or the suite file).
        source: What it was read as: ``"<layout> layout"`` or ``"built-in suite <name>"``.
        error: Why it did not load (the error's message).
    """

    path: str
    source: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "source": self.source, "load_error": self.error}


def discover_tasks(root: Path, *, require_leaderboard: bool = True,
                   failures: list[LoadFailure] | None = None) -> list[Task]:
    """Every task under a tasks root: the root itself if it is a task, else the folders inside it.

    Folders no layout recognises are skipped. A recognised but broken folder raises, or, when a
    ``failures`` list is given, is appended to it and skipped, so one bad folder blocks only itself.
    """
    if not root.is_dir():
        return []
    own = detect_layout(root)
    found = [(root, own)] if own is not None else list(_candidates(root))
    tasks: list[Task] = []
    for path, layout in found:
        try:
            tasks.append(layout.load(path, {}, require_leaderboard))
        # A user's folder may hold any unreadable file (pandas raises ValueError subclasses).
        except (WMRLError, OSError, ValueError) as exc:
            if failures is None:
                raise
            failures.append(LoadFailure(str(path), f"{layout.name} layout", str(exc) or type(exc).__name__))
    return tasks


def _candidates(root: Path) -> Iterator[tuple[Path, TaskLayout]]:
    """The task folders under a tasks root and the layout that recognises each, once each."""
    seen: set[Path] = set()
    for layout in _LAYOUTS:
        for candidate in layout.candidates(root):
            if candidate in seen:
                continue
            found = detect_layout(candidate)
            if found is not None:
                seen.add(candidate)
                yield candidate, found
