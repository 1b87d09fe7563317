"""Executed corpus rows as the benchmarks read them: their tasks, scripts and real scores.

A row's script is re-rendered from its choices (:func:`agents.code.handwritten.render_solution`:
grammar points and hand-written styles alike), as ``scripts/build_world_model.py`` rendered it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from agents.code.handwritten import render_solution
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.analysis.code_features import solution_family
from wmrl_envs.calibration import Calibrator
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.build import corpus as corpus_lib

CORPUS = Path(__file__).resolve().parents[1] / "assets" / "world_models" / "corpus.csv"
# The corpus builder's caps on a run's wall clock (scripts/build_world_model.py defaults).
WALL_CAP_S, LOOP_WALL_CAP_S = 60.0, 30.0


def corpus_rows(corpus_path: Path, split: str = "heldout"):
    """Tasks, scripts and real scores of the corpus's rows of one split, and the rows."""
    frame = corpus_lib.read_corpus(corpus_path)
    frame = frame[frame["split"] == split].reset_index(drop=True)
    if frame.empty:
        raise SystemExit(f"{corpus_path} has no {split}-split rows: build them with scripts/build_world_model.py")
    tasks = {tid: get_task(tid) for tid in frame["task_id"].unique()}
    if any(t.spec.split != split for t in tasks.values()):
        raise SystemExit(f"corpus rows marked {split} belong to tasks of another split: rebuild the corpus")
    items = corpus_lib.corpus_items(frame)
    row_tasks = [tasks[i.task_id] for i in items]
    scripts = [i.script(t.spec, render_solution) for i, t in zip(items, row_tasks)]
    return row_tasks, scripts, frame["real_score"].to_numpy(float), frame


def capped_script(item: corpus_lib.CorpusItem) -> tuple[str, object]:
    """The script of a corpus row and its task, the wall clock capped as the corpus builder does."""
    task = get_task(item.task_id)
    cap = LOOP_WALL_CAP_S if item.mutation in corpus_lib.TIMEOUT_MUTATIONS else WALL_CAP_S
    if cap < task.limits.wall_s:
        limits = dataclasses.replace(task.limits, wall_s=cap)
        task = dataclasses.replace(task, spec=dataclasses.replace(task.spec, limits=limits))
    return item.script(task.spec, render_solution), task


def draw_groups(task_ids: np.ndarray, n: int, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n`` pairs drawn as whole groups: a random task, then ``group_size`` of its rows."""
    left = {t: list(rng.permutation(np.flatnonzero(task_ids == t))) for t in np.unique(task_ids)}
    drawn: list[int] = []
    while len(drawn) < n:
        task = rng.choice([t for t, rows in left.items() if rows])
        take = min(group_size, n - len(drawn), len(left[task]))
        drawn += [left[task].pop() for _ in range(take)]
    return np.array(drawn)


ASSETS = Path(__file__).resolve().parents[1] / "assets" / "world_models"
SUITES = {"mle": (ASSETS / "corpus.csv", ("heldout",)), "dsbench": (ASSETS / "dsbench_corpus.csv", ("train", "heldout"))}


@dataclasses.dataclass
class Rows:
    """Out-of-sample corpus rows of one suite."""

    tasks: list
    scripts: list[str]
    real: np.ndarray
    task_ids: np.ndarray
    strata: np.ndarray  # each script's model family, the audit's strata


def load_rows(suite: str) -> Rows:
    path, splits = SUITES[suite]
    parts = [corpus_rows(path, split=split) for split in splits]
    tasks = [t for p in parts for t in p[0]]
    scripts = [s for p in parts for s in p[1]]
    return Rows(tasks, scripts, np.concatenate([p[2] for p in parts]), np.array([t.id for t in tasks]),
                np.array([solution_family(s) for s in scripts], dtype=object))


def predictions(model, rows: Rows) -> np.ndarray:
    return np.array([min(max(p.score, 0.0), 1.0) for p in model.predict(rows.tasks, rows.scripts)])


def trainer_calibrator(**overrides) -> Calibrator:
    """A calibrator with the trainer's settings (``WMRLConfig().calibration``), some overridden."""
    return Calibrator(dataclasses.replace(WMRLConfig().calibration, **overrides))


#: The corrupted-world-model grid: every kind and strength run, defaults included (report all,
#: not only those that show an effect).
STRENGTHS = {"none": [None], "saturate": [2.0, 4.0, 8.0], "task_offset": [0.05, 0.15, 0.3],
             "family_bias": [0.1, 0.3, 0.5], "swap": [0.1, 0.2, 0.3], "noise": [0.05, 0.1, 0.2]}


class CachedWorldModel:
    """The base model's predictions, computed once per (task, script) and replayed."""

    def __init__(self, base) -> None:
        self.base, self.name, self.cache = base, base.name, {}

    def predict(self, tasks, scripts):
        missing = [(t, s) for t, s in zip(tasks, scripts) if (t.id, s) not in self.cache]
        if missing:
            for (t, s), p in zip(missing, self.base.predict([t for t, _ in missing], [s for _, s in missing])):
                self.cache[(t.id, s)] = p
        return [self.cache[(t.id, s)] for t, s in zip(tasks, scripts)]
