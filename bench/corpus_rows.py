"""Executed corpus rows as the benchmarks read them: their tasks, scripts and real scores.

A row's script is re-rendered from its choices (:func:`agents.code.handwritten.render_solution`:
grammar points and hand-written styles alike), as ``scripts/build_world_model.py`` rendered it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from agents.code.handwritten import render_solution
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models import corpus as corpus_lib

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
