"""Where WMRL keeps generated and shipped files.

* ``WMRL_HOME`` (default ``~/.cache/wmrl``): generated task folders, the agent runtime venv.
* ``WMRL_TASKS_DIR``: extra task folders a user brings (native, MLE-Dojo or MLE-bench layout),
  ``os.pathsep``-separated; they shadow built-in tasks with the same id.
* Shipped data: the checkout's top-level ``assets/`` and ``leaderboards/`` install as the
  packages ``wmrl_envs._assets`` and ``wmrl_envs._leaderboards`` (pyproject.toml), found through
  :mod:`importlib.resources` in a wheel and in an editable install alike.
  ``WMRL_ASSETS_DIR`` / ``WMRL_LEADERBOARDS_DIR`` point at other folders instead.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from wmrl_envs.errors import WMRLError


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
    """Shipped artefacts: suite manifests, prompts, world-model weights, runtime requirements."""
    return _shipped("wmrl_envs._assets", "WMRL_ASSETS_DIR")


def leaderboards_dir() -> Path:
    """Leaderboards of the built-in tasks, ``<suite>/<task>.csv``."""
    return _shipped("wmrl_envs._leaderboards", "WMRL_LEADERBOARDS_DIR")


def _shipped(package: str, override: str) -> Path:
    if os.environ.get(override):
        return Path(os.environ[override]).expanduser()
    try:
        folder = resources.files(package)
    except ModuleNotFoundError as exc:  # an editable install made before the data packages existed
        raise WMRLError(f"{package} is not installed: reinstall WMRL (bash scripts/setup.sh)") from exc
    # A real folder: pip unpacks wheels, and callers glob these folders and bind them into sandboxes.
    return Path(folder)
