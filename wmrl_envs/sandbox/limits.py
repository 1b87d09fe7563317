"""Resource limits for one sandboxed execution."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from wmrl_envs.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to one run of agent code.

    Attributes:
        wall_s: Wall-clock timeout; the whole process tree is killed when it passes.
        cpu_s: CPU-seconds per process (``RLIMIT_CPU``); the cgroup bounds the aggregate.
        memory_mb: Address space per process (``RLIMIT_AS``) and, where a cgroup is
            writable, the memory limit of the whole run.
        max_processes: Maximum number of live processes/threads (cgroup ``pids.max``).
        tmpfs_mb: Size of the private ``/tmp`` and ``/dev/shm`` tmpfs mounts.
        file_mb: Largest file the run may write (``RLIMIT_FSIZE``).
        output_bytes: Tail of stdout/stderr kept in the result (the rest is discarded).
    """

    wall_s: float = 120.0
    cpu_s: float = 240.0
    memory_mb: int = 4096
    max_processes: int = 128
    tmpfs_mb: int = 512
    file_mb: int = 256
    output_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"Limits.{f.name} must be a positive number, got {value!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Limits:
        """Build limits from a (possibly partial) mapping, e.g. a task.yaml ``limits:`` block."""
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown limit(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
