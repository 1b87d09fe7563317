"""The task records: the task specification (``task.yaml``) and the runtime :class:`Task` handle.

Both are pure data: reading leaderboards and turning scores into rewards belong to
:mod:`wmrl_envs.grading` (``task_leaderboards``, ``task_reward``), which imports this module.
They sit below grading, and so outside the task registry (:mod:`wmrl_envs.tasks`, which grades
and re-exports them): grading reads the records and never imports the registry.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from wmrl_envs.errors import ConfigError, TaskFormatError, preview
from wmrl_envs.sandbox.limits import Limits

Split = Literal["train", "heldout"]
SPLITS: tuple[str, ...] = ("train", "heldout")
TASK_TYPES: tuple[str, ...] = (
    "binary",
    "multiclass",
    "regression",
    "text-binary",
    "text-multiclass",
    "text-regression",
    "image-multiclass",
    "timeseries-multiclass",
)


@dataclass(frozen=True)
class TaskSpec:
    """Everything WMRL needs to know about a task, as written in ``task.yaml``.

    Attributes:
        id: Unique, filesystem-safe task id (``[A-Za-z0-9_.-]``).
        name: Human-readable name.
        suite: Suite the task belongs to (``mle``, ``dsbench`` or a user suite).
        env_id: Gymnasium id of the environment that serves it.
        split: ``train`` (may be trained on) or ``heldout`` (evaluation only).
        metric: Name of a metric in :mod:`wmrl_envs.grading.metrics`; it fixes the direction.
        task_type: One of :data:`TASK_TYPES`.
        id_column: Column that identifies rows in test, submission and answers files.
        target_columns: Submission columns besides the id (for class probabilities, one per class).
        answer_columns: Columns of ``answers.csv`` besides the id (default: ``target_columns``).
        classes: Class labels, for classification tasks (order used for probability columns).
        limits: Sandbox limits for one run of a solution.
        meta: Free-form metadata (source dataset, row/column counts) used as task features, and
            the grading conventions the task follows (:mod:`wmrl_envs.grading.conventions`).
    """

    id: str
    name: str
    suite: str
    env_id: str
    split: Split
    metric: str
    task_type: str
    id_column: str = "id"
    target_columns: tuple[str, ...] = ("target",)
    answer_columns: tuple[str, ...] = ()
    classes: tuple[Any, ...] | None = None
    limits: Limits = field(default_factory=Limits)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or not all(c.isalnum() or c in "_-." for c in self.id):
            raise TaskFormatError(f"task id {self.id!r} must be non-empty and use only [A-Za-z0-9_.-]")
        if self.split not in SPLITS:
            raise TaskFormatError(f"task {self.id}: split must be one of {SPLITS}, got {self.split!r}")
        if self.task_type not in TASK_TYPES:
            raise TaskFormatError(f"task {self.id}: task_type must be one of {TASK_TYPES}, got {self.task_type!r}")
        for name in ("target_columns", "answer_columns"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(c, str) and c for c in value):
                got = repr(value) if isinstance(value, str) else preview(value)
                raise TaskFormatError(f"task {self.id}: {name} must be a list of column names, got {got}")
        if not self.target_columns:
            raise TaskFormatError(f"task {self.id}: target_columns must not be empty")
        if isinstance(self.classes, (str, dict)):
            raise TaskFormatError(f"task {self.id}: classes must be a list, got {self.classes!r}")
        if not isinstance(self.meta, dict):
            raise TaskFormatError(f"task {self.id}: meta must be a mapping, got {type(self.meta).__name__}")
        if self.id_column in self.target_columns:
            raise TaskFormatError(f"task {self.id}: id_column {self.id_column!r} is also a target column")
        # Normalise list-likes from YAML into tuples so specs stay hashable and frozen.
        object.__setattr__(self, "target_columns", tuple(self.target_columns))
        object.__setattr__(self, "answer_columns", tuple(self.answer_columns or self.target_columns))
        if self.classes is not None:
            object.__setattr__(self, "classes", tuple(self.classes))

    @property
    def is_heldout(self) -> bool:
        return self.split == "heldout"

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "task.yaml") -> TaskSpec:
        """Validate a parsed ``task.yaml`` mapping; errors name the file and the field."""
        if not isinstance(data, dict):
            raise TaskFormatError(f"{source}: expected a mapping at top level, got {type(data).__name__}")
        required = ("id", "name", "suite", "env_id", "split", "metric", "task_type")
        missing = [k for k in required if k not in data]
        if missing:
            raise TaskFormatError(f"{source}: missing required field(s) {missing}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise TaskFormatError(f"{source}: unknown field(s) {preview(unknown)}")
        kwargs = dict(data)
        limits = data.get("limits")
        if limits is not None and not isinstance(limits, dict):
            raise TaskFormatError(f"{source}: limits must be a mapping, got {type(limits).__name__}")
        try:
            kwargs["limits"] = Limits.from_mapping(limits)
        except ConfigError as exc:
            raise TaskFormatError(f"{source}: bad limits block: {exc}") from exc
        if kwargs.get("meta") is None:
            kwargs["meta"] = {}
        try:
            return cls(**kwargs)
        except TaskFormatError as exc:
            raise TaskFormatError(f"{source}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["target_columns"] = list(self.target_columns)
        out["answer_columns"] = list(self.answer_columns)
        out["classes"] = list(self.classes) if self.classes is not None else None
        out["limits"] = self.limits.to_dict()
        return out


@dataclass(frozen=True)
class Task:
    """A loaded task: its spec plus where its files live.

    ``private_dir`` is never handed to agent code; only ``public_dir`` is mounted in the sandbox.

    Attributes:
        spec: The validated task specification.
        root: The task folder.
        description_path: What the agent reads (``description.md`` or a foreign layout's file).
        public_dir: Files the agent may read; mounted as ``data/`` in the sandbox.
        answers_path: Private answers (id column plus answer columns).
        leaderboard_path: The primary leaderboard (``rank,score`` or any CSV with a ``score``
            column); ``None`` only while a built-in suite's leaderboards are being generated.
        leaderboard_paths: Every leaderboard of the task, primary first (MLE-Dojo ships a
            private and a public board and averages the position score over both).
        sample_submission_path: A valid submission in the expected format (default
            ``public_dir/sample_submission.csv``).
        layout: The folder layout the task was read from (``native``, ``mledojo``, ``mlebench``, ...).
    """

    spec: TaskSpec
    root: Path
    description_path: Path
    public_dir: Path
    answers_path: Path
    leaderboard_path: Path | None = None
    leaderboard_paths: tuple[Path, ...] = ()
    sample_submission_path: Path | None = None
    layout: str = "native"

    def __post_init__(self) -> None:
        if self.sample_submission_path is None:
            object.__setattr__(self, "sample_submission_path", self.public_dir / "sample_submission.csv")
        if not self.leaderboard_paths and self.leaderboard_path is not None:
            object.__setattr__(self, "leaderboard_paths", (self.leaderboard_path,))
        object.__setattr__(self, "leaderboard_paths", tuple(self.leaderboard_paths))

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def limits(self) -> Limits:
        return self.spec.limits

    @cached_property
    def description(self) -> str:
        return self.description_path.read_text(encoding="utf-8")

    @cached_property
    def data_key(self) -> str:
        """``<id>@<digest>``: the task's id and a digest of what a run's outcome depends on, its spec
        and the contents of its public files, private answers and leaderboards (read once per loaded
        task). What a scorer remembers of executed scripts is keyed by it, so a task whose data
        changed under the same id (a regenerated suite, a user's edit before ``--resume``) is never
        answered with the old data's outcomes; the same data in another folder has the same key."""
        digest = hashlib.sha256(json.dumps(asdict(self.spec), sort_keys=True, default=str).encode())
        files = sorted(p for p in self.public_dir.rglob("*") if p.is_file())
        for path in [*files, self.answers_path, *self.leaderboard_paths]:
            name = path.relative_to(self.public_dir) if path.is_relative_to(self.public_dir) else path.name
            digest.update(f"\0{name}\0".encode())
            with path.open("rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    digest.update(chunk)
        return f"{self.id}@{digest.hexdigest()[:16]}"

    def answers(self) -> pd.DataFrame:
        """The private answers as a DataFrame (a fresh copy on every call)."""
        return pd.read_csv(self.answers_path)
