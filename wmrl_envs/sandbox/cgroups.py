"""Per-run cgroups (v1 layout) that bound and measure a whole process tree.

``RLIMIT_AS`` and ``RLIMIT_CPU`` apply per process, and ``RLIMIT_NPROC`` is ignored for uid 0,
so only a cgroup bounds a run's aggregate memory and process count (a fork bomb). Each run
gets its own group in the ``memory``, ``pids`` and ``cpuacct`` controllers, created under a
``wmrl`` parent below this process's own cgroup (so a container's limits still apply) and
removed after the run. Controllers that are missing or not writable are skipped; the result
records which ones were enforced.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from wmrl_envs.sandbox.limits import Limits

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpuacct")
_counter = itertools.count()


def _own_path(controller: str) -> str:
    """This process's cgroup path in a v1 controller hierarchy (``/`` if not listed)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return "/"


def parent_dirs() -> dict[str, Path]:
    """The writable ``wmrl`` parent group of every usable controller (created on demand)."""
    parents: dict[str, Path] = {}
    for controller in CONTROLLERS:
        mount = CGROUP_ROOT / controller
        if not (mount / "cgroup.procs").exists():
            continue
        parent = mount / _own_path(controller).lstrip("/") / "wmrl"
        try:
            parent.mkdir(exist_ok=True)
        except OSError as exc:  # read-only or not ours: run without this controller
            log.debug("cgroup controller %s not writable: %s", controller, exc)
            continue
        parents[controller] = parent
    _remove_stale(parents)
    return parents


def _remove_stale(parents: dict[str, Path]) -> None:
    """Remove run groups left behind by WMRL processes that died mid-run."""
    for parent in parents.values():
        for group in parent.glob("run-*"):
            owner = group.name.split("-")[1]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                _kill_members(group)
                remove_dir(group)


def _members(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _kill_members(group: Path) -> None:
    # Members may fork while we kill; repeat until the group is empty (pids.max bounds forks).
    for _ in range(500):
        pids = _members(group)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def remove_dir(group: Path) -> None:
    """Remove an emptied cgroup folder, retrying while the kernel still reports it busy."""
    # Right after the last member exits the kernel may still report the group busy.
    for _ in range(200):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.005)
    log.warning("could not remove cgroup %s", group)


@dataclass(frozen=True)
class CgroupStats:
    """What a run's groups measured: peak memory (page cache and tmpfs included), CPU, OOM kills."""

    peak_memory_bytes: int | None
    cpu_ns: int | None
    oom_kills: int


class RunCgroup:
    """One run's group in every available controller; limits are set on creation."""

    def __init__(self, parents: dict[str, Path], limits: Limits) -> None:
        name = f"run-{os.getpid()}-{next(_counter)}"
        self.groups: dict[str, Path] = {}
        try:
            for controller, parent in parents.items():
                group = parent / name
                group.mkdir()
                self.groups[controller] = group
            self._set_limits(limits)
        except OSError:
            self.remove()  # don't leak the groups already made
            raise
        self.controllers = frozenset(self.groups)

    def _set_limits(self, limits: Limits) -> None:
        if "memory" in self.groups:
            mem = self.groups["memory"]
            (mem / "memory.limit_in_bytes").write_text(str(limits.memory_mb << 20))
            swap = mem / "memory.memsw.limit_in_bytes"
            if swap.exists():  # only with swap accounting; memory+swap must not exceed the limit
                swap.write_text(str(limits.memory_mb << 20))
        if "pids" in self.groups:
            (self.groups["pids"] / "pids.max").write_text(str(limits.max_processes))

    @property
    def enforced(self) -> dict[str, bool]:
        return {f"{c}_cgroup": c in self.controllers for c in CONTROLLERS}

    @property
    def procs_files(self) -> list[Path]:
        """Files a process writes its pid into to join this run's groups."""
        return [g / "cgroup.procs" for g in self.groups.values()]

    def kill(self) -> None:
        """SIGKILL every process in the run's groups."""
        for group in self.groups.values():
            _kill_members(group)

    def stats(self) -> CgroupStats:
        mem = self.groups.get("memory")
        cpu = self.groups.get("cpuacct")
        oom_kills = 0
        if mem is not None:
            for line in (mem / "memory.oom_control").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    oom_kills = int(value)
        return CgroupStats(
            peak_memory_bytes=int((mem / "memory.max_usage_in_bytes").read_text()) if mem else None,
            cpu_ns=int((cpu / "cpuacct.usage").read_text()) if cpu else None,
            oom_kills=oom_kills,
        )

    def remove(self) -> None:
        """Kill stragglers and delete the groups."""
        for group in self.groups.values():
            _kill_members(group)
            remove_dir(group)
        self.groups.clear()
