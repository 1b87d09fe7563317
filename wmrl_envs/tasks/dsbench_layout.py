"""DSBench's data-modeling layout, read as RPG-scored tasks of ``wmrl/DSBench-v0``.

A DSBench root (its ``data_modeling`` folder) holds, for every task ``<name>``::

    data_resplit/<name>/train.csv, test.csv, <sample submission>.csv   the agent's files (public)
    task/<name>.txt                                                     what the agent reads
    answers/<name>/test_answer.csv                                      the hidden answers
    save_performance/baseline/<name>/result.txt                         DSBench's baseline score (optional)

DSBench ships no machine-readable metric, so an overlay names it, as for the other foreign
layouts: ``wmrl.yaml`` at the root maps task names to ``wmrl.yaml`` fields, and
``answers/<name>/wmrl.yaml`` (private, beside the answers) may set a single task's fields::

    defaults:              # optional, applies to every task
      split: heldout
    tasks:
      <name>:
        metric: rmse
        task_type: regression
        # any other overlay key: id_column, target_columns, classes, meta, sample_submission, ...

File keys (``description``, ``answers``, ``sample_submission``) are paths relative to the root.
The task id is ``<name>`` made filesystem-safe, the split defaults to ``heldout``.

Every task is scored by DSBench's relative performance gap. ``g`` is the answers graded against
themselves. ``b`` is DSBench's own baseline score, read from ``save_performance/baseline/<name>/
result.txt`` when that file is present (as DSBench's ``show_results.py`` reads it); otherwise it
is WMRL's trivial baseline (majority class, class shares or mean of ``train.csv``, the built-in
suite's), which is *not* DSBench's and gives other RPGs. ``meta: {rpg_perfect, rpg_baseline}`` in
the overlay overrides either. ``meta.rpg_baseline_source`` says which ``b`` a task uses, and the
grading details repeat it. Computed references are cached while the files stay unchanged.
Unlike DSBench's own scripts, grading validates the submission and matches rows by id, so a
score never depends on row order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from wmrl_envs.errors import TaskFormatError, preview
from wmrl_envs.grading import best_possible, get_metric, relative_performance_gap
from wmrl_envs.grading.reward import baseline_source
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks.baseline import rpg_references
from wmrl_envs.tasks.layout import (
    OVERLAY_FILE,
    ForeignLayout,
    Problems,
    TaskFiles,
    check_overlay,
    read_overlay,
    read_yaml,
    require_file,
)

ENV_ID = "wmrl/DSBench-v0"
DATA_DIR, DESCRIPTION_DIR, ANSWERS_DIR = "data_resplit", "task", "answers"
ANSWERS_FILE = "test_answer.csv"
#: Where DSBench records its baseline's score of a task, relative to the root.
BASELINE_FILE = "save_performance/baseline/{name}/result.txt"
_DATA_FILES = {"train.csv", "test.csv"}
# (train file, answers file, grading-relevant spec fields) -> computed RPG references.
_REFERENCES: dict[tuple[Any, ...], dict[str, Any]] = {}


class DSBenchLayout(ForeignLayout):
    """DSBench data-modeling tasks: ``data_resplit/<name>``, ``task/<name>.txt``, ``answers/<name>``."""

    name = "dsbench"
    default_suite = "dsbench"
    default_env_id = ENV_ID
    summary = (f"{DATA_DIR}/<name>/{{train.csv, test.csv, <sample submission>.csv}}, {DESCRIPTION_DIR}/<name>.txt, "
               f"{ANSWERS_DIR}/<name>/{ANSWERS_FILE}, {OVERLAY_FILE} at the root")

    def detect(self, path: Path) -> bool:
        return path.parent.name == DATA_DIR and path.is_dir()

    def candidates(self, root: Path) -> Iterator[Path]:
        data = root / DATA_DIR
        if data.is_dir():
            yield from sorted(p for p in data.iterdir() if p.is_dir() and not p.name.startswith("."))

    def overlay(self, path: Path) -> tuple[dict[str, Any], str]:
        """Root ``wmrl.yaml`` (defaults, then the task's entry), then ``answers/<name>/wmrl.yaml``."""
        root, name = _root(path), path.name
        fields: dict[str, Any] = {}
        sources = []
        shared = root / OVERLAY_FILE
        if shared.is_file():
            data = read_yaml(shared, OVERLAY_FILE)
            if not isinstance(data, dict) or set(data) - {"defaults", "tasks"}:
                got = preview(sorted(data)) if isinstance(data, dict) else type(data).__name__
                raise TaskFormatError(f"{shared}: expected a mapping with 'defaults' and/or 'tasks' (task name -> "
                                      f"fields), got {got}")
            tasks = data.get("tasks") or {}
            if not isinstance(tasks, dict):
                raise TaskFormatError(f"{shared}: 'tasks' must map task names to fields")
            fields.update(check_overlay(data.get("defaults") or {}, f"{shared}: defaults"))
            if name in tasks:
                fields.update(check_overlay(tasks[name], f"{shared}: tasks.{name}"))
            sources.append(f"{shared} (tasks.{name})" if name in tasks else str(shared))
        own = root / ANSWERS_DIR / name / OVERLAY_FILE
        if own.is_file():
            fields.update(read_overlay(own))
            sources.append(str(own))
        return fields, " + ".join(sources) or str(shared)

    def _overlay_help(self, path: Path, missing: list[str]) -> str:
        root = _root(path)
        return (f"{path}: DSBench tasks carry no machine-readable {' or '.join(missing)}. Add an entry to "
                f"{root / OVERLAY_FILE}:\n  tasks:\n    {path.name}:\n      metric: <metric>\n      task_type: <type>\n"
                f"(or put the fields in {root / ANSWERS_DIR / path.name / OVERLAY_FILE})")

    def files(self, path: Path, located: Mapping[str, Any], require_leaderboard: bool) -> TaskFiles:
        root, name = _root(path), path.name
        problems = Problems(path)
        problems.check(require_file, path / "train.csv", f"{DATA_DIR}/{name}/train.csv (the training data)")
        problems.check(require_file, path / "test.csv", f"{DATA_DIR}/{name}/test.csv (the rows to predict)")
        description = root / str(located.get("description", f"{DESCRIPTION_DIR}/{name}.txt"))
        answers = root / str(located.get("answers", f"{ANSWERS_DIR}/{name}/{ANSWERS_FILE}"))
        if "sample_submission" in located:
            sample = problems.check(require_file, root / str(located["sample_submission"]),
                                    "sample submission (wmrl.yaml)")
        else:
            sample = problems.check(_sample_submission, path)
        description = problems.check(require_file, description, f"description ({DESCRIPTION_DIR}/{name}.txt)")
        answers = problems.check(require_file, answers, f"answers ({ANSWERS_DIR}/{name}/{ANSWERS_FILE})")
        problems.raise_if_any()
        return TaskFiles(description, path, sample, answers, leaderboards=())  # scored by RPG, no leaderboard

    def load(self, path: Path, overrides: Mapping[str, Any], require_leaderboard: bool) -> Task:
        task = super().load(path, overrides, require_leaderboard)
        meta = task.spec.meta
        if "rpg_baseline" in meta:
            references: dict[str, Any] = {"rpg_baseline_source": "the overlay (meta.rpg_baseline)"}
        elif (recorded := dsbench_baseline(_root(path), path.name)) is not None:
            references = {"rpg_baseline": recorded,
                          "rpg_baseline_source": f"DSBench ({BASELINE_FILE.format(name=path.name)})"}
        else:
            references = {}
        ours = "rpg_baseline" not in meta and not references
        if ours or "rpg_perfect" not in meta:
            references = {**cached_references(task, baseline=ours), **references}
        meta = {**references, **meta, "reward": "rpg"}
        try:  # recorded or computed, g must beat b for the gap to mean anything
            g = float(meta["rpg_perfect"])
            relative_performance_gap(g, g, float(meta["rpg_baseline"]), get_metric(task.spec.metric).higher_is_better)
        except (TypeError, ValueError) as exc:
            raise TaskFormatError(f"{path}: meta.rpg_perfect and meta.rpg_baseline must be numbers: {exc}") from exc
        except TaskFormatError as exc:
            raise TaskFormatError(f"{path}: {exc}") from exc
        return replace(task, spec=replace(task.spec, meta=meta))


def dsbench_baseline(root: Path, name: str) -> float | None:
    """DSBench's recorded baseline score of task ``name`` (:data:`BASELINE_FILE`), or None without the file."""
    path = root / BASELINE_FILE.format(name=name)
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise TaskFormatError(f"{path}: DSBench's baseline result must be a finite number, got {preview([text[:80]])}")
    return value


def cached_references(task: Task, *, baseline: bool = True) -> dict[str, Any]:
    """``g``, the row counts and (with ``baseline``) WMRL's trivial ``b`` of a task, as ``meta`` entries.

    Cached while the task's train and answers files are unchanged.
    """
    spec, train = task.spec, task.public_dir / "train.csv"
    key = (_stamp(train), _stamp(task.answers_path), spec.id, spec.metric, spec.id_column, spec.target_columns,
           spec.answer_columns, spec.classes, baseline)
    if key not in _REFERENCES:
        answers = task.answers()
        if baseline:
            label = spec.answer_columns[0]
            # Only the target column: DSBench train files can be large and the baseline needs nothing else.
            frame = pd.read_csv(train, usecols=lambda column: column.strip() == label)
            found = rpg_references(spec, frame.rename(columns=str.strip), answers)
            found["rpg_baseline_source"] = baseline_source(found)
        else:
            frame = pd.read_csv(train, usecols=[0])  # the row count only
            found = {"reward": "rpg", "rpg_perfect": best_possible(answers, spec)}
        _REFERENCES[key] = {**found, "n_train": len(frame), "n_test": len(answers)}
    return dict(_REFERENCES[key])


def _root(path: Path) -> Path:
    return path.parent.parent


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def _sample_submission(folder: Path) -> Path:
    """The one CSV besides train.csv and test.csv, else the one whose name says submission/sample."""
    others = sorted(p for p in folder.glob("*.csv") if p.name.lower() not in _DATA_FILES)
    if len(others) > 1:
        others = [p for p in others if re.search(r"sample|submission", p.name, flags=re.IGNORECASE)]
    if len(others) != 1:
        found = preview(sorted(p.name for p in folder.glob("*.csv")))
        raise TaskFormatError(f"{folder}: missing sample submission (a CSV besides train.csv and test.csv; found "
                              f"{found}); set sample_submission in {OVERLAY_FILE}")
    return others[0]
