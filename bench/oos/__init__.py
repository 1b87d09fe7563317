"""The frozen out-of-sample benchmarks of issue 44 (held-out tasks and hand-written scripts), and the
frozen task set of issue 49's registered confirmation.

Nothing here may be used to fit, tune or select anything; each set exists to measure a world model
on data and code no fit has seen (``bench/oos/README.md``). A set is a folder (:class:`FrozenSet`;
:data:`SETS`): ``bench/oos`` (``v1``, frozen 2026-12-05, since used to judge several changes),
``bench/oos_v2`` (``v2``, authored afterwards, before any change was judged on it) and
``bench/confirmation_tasks`` (``confirmation``: tasks only, training tasks whose data no world model fitted and
held-out tasks used in no selection; ``bench/confirmation_tasks/README.md``). What is frozen in each, and
checked by ``tests/unit/test_oos_frozen.py`` against its ``manifest.json``:

* ``tasks.yaml``: the task definitions; ``build_tasks.py`` regenerates the task folders from the
  data inside PyPI wheels and checks every generated file against its sha256 in the manifest;
* ``leaderboards.csv``: every reference solution's test score, one row per task and solution;
* ``scripts/<task_id>/<name>.py``: scripts written by hand in the idioms of LLM agents (not in
  ``confirmation``);
* ``outcomes.csv``: what executing each script in the sandbox gave (``execute_scripts.py``; not in
  ``confirmation``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Set before numpy loads (``python -m bench.oos.<command>`` imports this package first): one
# thread per process, since on 2 shared cores more threads only contend.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd
import yaml

from wmrl_envs.errors import ConfigError
from wmrl_envs.grading import Leaderboard, get_metric
from wmrl_envs.paths import wmrl_home
from wmrl_envs.tasks import Task, get_task, load_task
from wmrl_envs.tasks.build.suites import file_hashes, write_task
from wmrl_envs.tasks.suite_def import SuiteDef, TaskDef

OOS_DIR = Path(__file__).resolve().parent
REPO_ROOT = OOS_DIR.parent.parent


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


# --- the tasks ----------------------------------------------------------------------------------

OVERLAY = "wmrl.yaml"
BOARD = "leaderboard.csv"
# What the layout must read back exactly as the generator wrote it.
_SPEC_FIELDS = ("id", "metric", "task_type", "split", "id_column", "target_columns", "answer_columns", "classes")


def load_definition(path: Path) -> SuiteDef:
    """``tasks.yaml`` as a :class:`SuiteDef` (the keys of a built-in suite entry, defaults merged)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    defaults = data.get("defaults") or {}
    tasks = []
    for entry in data["tasks"]:
        merged = {**defaults, **entry, "limits": {**defaults.get("limits", {}), **entry.get("limits", {})}}
        for key in ("drop", "classes", "keep_classes", "text_columns"):
            if merged.get(key) is not None:
                merged[key] = tuple(merged[key])
        tasks.append(TaskDef(**merged))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: repeated task ids")
    return SuiteDef(suite=data["suite"], env_id=data["env_id"], version=int(data["version"]), tasks=tuple(tasks),
                    path=path)


def overlay_fields(native: Task) -> dict[str, Any]:
    """What a user writes in ``wmrl.yaml`` for this task: the layout infers the columns from the files.
    Its suite is the definition's (``oos`` here)."""
    spec = native.spec
    meta = {k: spec.meta[k] for k in ("source", "seed", "text_columns", "generator")}
    return {"id": spec.id, "name": spec.name, "suite": spec.suite, "split": spec.split, "metric": spec.metric,
            "task_type": spec.task_type, "classes": list(spec.classes) if spec.classes is not None else None,
            "limits": spec.limits.to_dict(), "meta": meta}


def write_folder(suite: SuiteDef, task: TaskDef, out: Path, scores: list[float] | None) -> Task:
    """Generate one task at ``out`` (which must not exist) in MLE-bench's layout; with ``scores``, its board."""
    native_dir = out.with_name(f".native-{out.name}")
    if native_dir.exists():
        shutil.rmtree(native_dir)
    write_task(suite, task, native_dir)
    native = load_task(native_dir, require_leaderboard=False)
    prepared = out / "prepared"
    prepared.mkdir(parents=True)
    (native_dir / "public").rename(prepared / "public")
    (native_dir / "description.md").rename(prepared / "public" / "description.md")
    (native_dir / "private").rename(prepared / "private")
    (out / OVERLAY).write_text(yaml.safe_dump(overlay_fields(native), sort_keys=False, allow_unicode=True),
                               encoding="utf-8")
    if scores is not None:
        write_board(out, task, scores)
    shutil.rmtree(native_dir)
    loaded = load_task(out, require_leaderboard=scores is not None)
    differ = [f for f in _SPEC_FIELDS if getattr(loaded.spec, f) != getattr(native.spec, f)]
    if loaded.layout != "mlebench" or differ:
        raise ConfigError(f"task {task.id}: the {loaded.layout} layout reads back different {differ}")
    return loaded


def write_board(folder: Path, task: TaskDef, scores: list[float]) -> Leaderboard:
    """The task's ``leaderboard.csv`` (``rank,score``, best first, as the built-in boards)."""
    board = Leaderboard(scores, get_metric(task.metric).higher_is_better)
    board.to_csv(folder / BOARD)
    return board


def board_scores(path: Path) -> dict[str, list[float]]:
    """Each task's reference scores, from the committed ``leaderboards.csv`` (pandas 3 parses floats exactly)."""
    frame = pd.read_csv(path)
    return {tid: group["score"].tolist() for tid, group in frame.groupby("task_id", sort=True)}


def materialise(out: Path, only: Sequence[str] | None = None, *, definition: Path, manifest: Path,
                boards: Path) -> dict[str, Task]:
    """The out-of-sample tasks (``only`` these ids), built where missing or stale, each file checked
    against the manifest.

    A folder whose files all match the manifest is reused as it is. Raises :class:`ConfigError`
    naming every file that differs (the data packages changed, or the generator did). Each set of
    tasks laid out this way (:class:`FrozenSet`, ``bench/oos_screen``) gives its own ``definition``,
    ``manifest`` and ``boards``.
    """
    out.mkdir(parents=True, exist_ok=True)
    suite, recorded, scores = (load_definition(definition), read_manifest(manifest).get("tasks", {}),
                               board_scores(boards))
    unknown = sorted(set(only or ()) - {t.id for t in suite.tasks})
    if unknown:
        raise ConfigError(f"not tasks of {definition}: {unknown}")
    tasks, problems = {}, []
    for task in suite.tasks:
        if only is not None and task.id not in only:
            continue
        folder = out / task.id
        want = recorded.get(task.id, {}).get("files")
        if not (folder.is_dir() and file_hashes(folder) == want):
            tmp = out / f".tmp-{task.id}-{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            write_folder(suite, task, tmp, scores.get(task.id))
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        got = file_hashes(folder)
        if got != want:
            names = sorted(n for n in set(got) | set(want or {}) if got.get(n) != (want or {}).get(n))
            problems.append(f"{task.id}: {', '.join(names)}")
        tasks[task.id] = load_task(folder)
    if problems:
        where = manifest.relative_to(REPO_ROOT) if manifest.is_relative_to(REPO_ROOT) else manifest
        raise ConfigError(f"regenerated task files differ from {where} (the recorded data must not change):\n"
                          + "\n".join(problems))
    return tasks


def split_ids(tasks_file: Path) -> dict[str, tuple[str, ...]]:
    """The task ids of each split of a definitions file, ``{"train": ..., "heldout": ...}``, sorted."""
    tasks = load_definition(tasks_file).tasks
    return {split: tuple(sorted(t.id for t in tasks if t.split == split)) for split in ("train", "heldout")}


@dataclass(frozen=True)
class FrozenSet:
    """One frozen out-of-sample set: a folder of definitions, boards, scripts and outcomes, and the
    folder under ``$WMRL_HOME`` its tasks are generated into (beside, not in, the built-in suites)."""

    name: str
    folder: Path
    cache_folder: str

    @property
    def tasks_file(self) -> Path:
        return self.folder / "tasks.yaml"

    @property
    def leaderboards_file(self) -> Path:
        return self.folder / "leaderboards.csv"

    @property
    def outcomes_file(self) -> Path:
        return self.folder / "outcomes.csv"

    @property
    def manifest_file(self) -> Path:
        return self.folder / "manifest.json"

    @property
    def scripts_dir(self) -> Path:
        return self.folder / "scripts"

    def definition(self) -> SuiteDef:
        return load_definition(self.tasks_file)

    def default_out(self) -> Path:
        return wmrl_home() / self.cache_folder

    @property
    def has_scripts(self) -> bool:
        """Whether the set holds hand-written scripts and their outcomes (``confirmation`` holds tasks only)."""
        return self.scripts_dir.is_dir()

    def script_paths(self) -> list[Path]:
        """Every hand-written script, ``scripts/<task_id>/<name>.py``, in a fixed order (none without ``scripts/``)."""
        return sorted(self.scripts_dir.glob("*/*.py"))

    def split_ids(self) -> dict[str, tuple[str, ...]]:
        """The task ids of each split (:func:`split_ids`; ``train`` is empty but in ``confirmation``)."""
        return split_ids(self.tasks_file)

    def frozen_digests(self) -> dict[str, str]:
        """sha256 of every frozen file (definitions, boards, outcomes, scripts), by its path from the repository root."""
        files = [p for p in (self.tasks_file, self.leaderboards_file, self.outcomes_file) if p.is_file()]
        return {p.relative_to(REPO_ROOT).as_posix(): sha256_file(p) for p in files + self.script_paths()}

    def read_manifest(self) -> dict[str, Any]:
        return read_manifest(self.manifest_file)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write the manifest with the digests of the frozen files as they are now."""
        manifest["frozen_files"] = self.frozen_digests()
        self.manifest_file.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")

    def materialise(self, out: Path | None = None, only: Sequence[str] | None = None) -> dict[str, Task]:
        """The set's tasks, checked against its manifest (:func:`materialise`), in ``out`` or its cache folder."""
        return materialise(out or self.default_out(), only, definition=self.tasks_file, manifest=self.manifest_file,
                           boards=self.leaderboards_file)

    def script_tasks(self, paths: list[Path]) -> dict[str, Task]:
        """Each script folder's task: a task of this set, or a held-out task of a built-in suite."""
        ids = sorted({p.parent.name for p in paths})
        own = {t.id for t in self.definition().tasks}
        tasks = dict(self.materialise(only=[i for i in ids if i in own]))
        for tid in ids:
            if tid not in own:
                task = get_task(tid)
                if not task.spec.is_heldout:
                    raise ConfigError(f"scripts/{tid}: {tid} is a training task; scripts go on held-out or new "
                                      "tasks only")
                tasks[tid] = task
        return tasks


#: The frozen sets by name; ``v1`` is every command's default, as it was the only set. ``confirmation``
#: (``bench/confirmation_tasks``) is issue 49's registered confirmation: tasks only (``split: train`` ones a
#: policy trains on, ``split: heldout`` ones it is evaluated on), no scripts and no outcomes.
SETS = {"v1": FrozenSet("v1", OOS_DIR, "oos"), "v2": FrozenSet("v2", REPO_ROOT / "bench" / "oos_v2", "oos-v2"),
        "confirmation": FrozenSet("confirmation", REPO_ROOT / "bench" / "confirmation_tasks", "confirmation")}
