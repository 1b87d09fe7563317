"""Where a result came from: the commit, the machine, the date and the command (docs/architecture.md §9).

Every result file (``wmrl train``/``eval`` runs, bench scripts, build scripts) records
:func:`provenance` as it is; a caller adds its own fields next to it (a bench's load average,
a run's config)::

    meta = {**provenance(), "config": config.to_dict()}

Keys: ``commit`` (``HEAD`` of the checkout this package runs from, ``"unknown"`` outside a
git checkout, e.g. an installed wheel), ``dirty`` (uncommitted changes to tracked or untracked
files; ``None`` when unknown), ``date`` (UTC, ISO 8601), ``cores``, ``cpu`` (the processor's
model: an executed script can score differently on another one), ``ram_gib``, ``python``,
``arithmetic`` (the vector code sandboxed scripts run with, :mod:`wmrl_envs.sandbox.arithmetic`),
``platform`` and ``argv`` (the command's arguments, without the program).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from wmrl_envs.sandbox.arithmetic import arithmetic, cpuinfo_field, read_cpuinfo

#: The checkout this package runs from (a wheel install has no ``.git`` there).
_CHECKOUT = Path(__file__).resolve().parents[1]


def git_state(root: Path = _CHECKOUT) -> tuple[str, bool | None]:
    """``(commit, dirty)`` of the git checkout at ``root``; ``("unknown", None)`` outside one."""
    # Without this check, a package installed inside some other repository (a venv in a
    # project folder) would report that repository's commit.
    if not (root / ".git").exists():
        return "unknown", None
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = bool(_git(root, "status", "--porcelain"))
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return commit, dirty


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    return cpuinfo_field(read_cpuinfo(), "model name") or platform.processor() or "unknown"


def provenance() -> dict[str, Any]:
    """Commit, dirty flag, date, cores, CPU, arithmetic, RAM, Python, platform and arguments of this process."""
    commit, dirty = git_state()
    ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"commit": commit, "dirty": dirty, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cores": os.cpu_count(), "cpu": cpu_model(), "arithmetic": arithmetic(), "ram_gib": round(ram_gib, 1),
            "python": platform.python_version(), "platform": platform.platform(), "argv": sys.argv[1:]}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()
