"""Run folders that outlived their process: named after their owner, removed once it is gone.

Every run folder's name says which process made it::

    wmrl-run-<pid namespace inode>-<pid>-<start time>-<random>    (docker: wmrl-run-docker-...)

A process killed mid-run (``kill -9`` of ``wmrl train``, a crashed Ray worker) leaves its
folders in the work root: the script, the work dir, a kept ``submission.csv``. Every executor
calls :func:`sweep_run_dirs` on its work root when it starts, which removes the folders whose
owner is gone. The pid's start time (``/proc/<pid>/stat``) tells a reused pid from the owner,
and a folder of another pid namespace (another container sharing the folder) is left alone,
since its owner cannot be seen from here. So a live run's folder is never removed, and
neither is anything outside WMRL's prefix, a symlink or another user's folder.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wmrl_envs.sandbox.base import RUN_DIR_PREFIX

log = logging.getLogger(__name__)


def _start_time(pid: int | str) -> str | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22); None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[19]  # the fields after the command name start at field 3


def _pid_namespace() -> str:
    return str(os.stat("/proc/self/ns/pid").st_ino)


def owner_tag() -> str:
    """This process as run folder names spell it: ``<pid namespace>-<pid>-<start time>``."""
    return f"{_pid_namespace()}-{os.getpid()}-{_start_time('self')}"


def owned_prefix(prefix: str = RUN_DIR_PREFIX) -> str:
    """The name prefix of a run folder this process makes: ``prefix`` and :func:`owner_tag`."""
    return f"{prefix}{owner_tag()}-"


def owner_is_dead(name: str, prefix: str = RUN_DIR_PREFIX) -> bool:
    """Whether ``name`` (``prefix`` then an owner tag) belongs to a process of this pid namespace
    that is gone. False for any other name: what cannot be judged is kept."""
    match = re.match(rf"{re.escape(prefix)}(\d+)-(\d+)-(\d+)-", name)
    if match is None:
        return False
    namespace, pid, started = match.groups()
    return namespace == _pid_namespace() and _start_time(pid) != started


def sweep_run_dirs(root: Path, prefix: str = RUN_DIR_PREFIX) -> list[Path]:
    """Remove the run folders directly in ``root`` whose owner is gone; the paths removed.

    Only this user's real folders (no symlinks) named ``prefix`` plus an owner tag qualify. A
    folder that cannot be removed is logged and left: a sweep never stops an executor starting.
    """
    removed = []
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return removed
    for entry in entries:
        try:
            ours = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
            if ours and owner_is_dead(entry.name, prefix):
                force_remove(Path(entry.path))
                removed.append(Path(entry.path))
        except FileNotFoundError:  # another executor starting at the same time removed it first
            continue
        except OSError as exc:
            log.warning("could not remove the stale run folder %s: %s", entry.path, exc)
    return removed


def force_remove(path: Path) -> None:
    """Remove a file or tree that agent code may have made unreadable (``chmod 000``)."""

    def make_writable_and_retry(func: Callable[[str], None], failed: str, _exc: Any) -> None:
        parent = os.path.dirname(failed)
        os.chmod(parent, stat.S_IRWXU)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, stat.S_IRWXU)
        func(failed)

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, onerror=make_writable_and_retry)
    else:
        path.unlink(missing_ok=True)
