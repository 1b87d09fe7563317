"""Where WMRL keeps generated and shipped files.

* ``WMRL_HOME`` (default ``~/.cache/wmrl``): generated task folders, the agent runtime venv.
* ``WMRL_TASKS_DIR``: extra task folders a user brings (native, MLE-Dojo or MLE-bench layout),
  ``os.pathsep``-separated; they shadow built-in tasks with the same id.
* The repository's ``assets/`` and ``leaderboards/`` ship with the source checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def wmrl_home() -> Path:
    """Root of WMRL's cache (created on demand)."""
    home = Path(os.environ.get("WMRL_HOME", Path.home() / ".cache" / "wmrl")).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def builtin_tasks_dir(suite: str) -> Path:
    """Folder that holds the generated task folders of a built-in suite."""
    return wmrl_home() / "tasks" / suite


def user_tasks_dirs() -> list[Path]:
    """Task roots named by ``WMRL_TASKS_DIR``, in order."""
    raw = os.environ.get("WMRL_TASKS_DIR", "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def assets_dir() -> Path:
    return Path(os.environ.get("WMRL_ASSETS_DIR", REPO_ROOT / "assets"))


def leaderboards_dir() -> Path:
    return Path(os.environ.get("WMRL_LEADERBOARDS_DIR", REPO_ROOT / "leaderboards"))
