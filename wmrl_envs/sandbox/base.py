"""Types every executor shares: the status, the result and the ``Executor`` protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from wmrl_envs.sandbox.limits import Limits


class ExecutionStatus(str, Enum):
    """How a run ended.

    ``INFRA_ERROR`` means the sandbox itself failed (could not start); it is not the agent's
    fault and must never be turned into a score.
    """

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    INFRA_ERROR = "infra_error"


@dataclass
class ExecutionResult:
    """The outcome of one run of agent code.

    Attributes:
        status: How the run ended.
        stdout: Tail of the standard output (at most ``limits.output_bytes`` bytes, decoded).
        stderr: Tail of the standard error.
        returncode: Exit status in shell convention (``128 + N`` when killed by signal N);
            None when the run never started.
        wall_s: Wall-clock seconds from launch to exit, sandbox setup included.
        cpu_s: CPU-seconds of the whole process tree (from the run's cpuacct cgroup; without
            one, from ``wait4``, which misses processes killed without being reaped).
        peak_rss_mb: Peak memory of the run in MiB. With a memory cgroup this is the group's
            peak usage, which also counts the run's tmpfs and page-cache pages; without one it
            is the largest single process's peak RSS from ``wait4``, which can include the size
            of the launching Python process at fork time.
        submission_path: A copy of the ``submission.csv`` the run wrote, kept outside the
            deleted work dir, whatever the status (a run that timed out may have written
            one); None if none was written. Call :meth:`cleanup` when done with it.
        stdout_truncated: Whether stdout was longer than the kept tail.
        stderr_truncated: Whether stderr was longer than the kept tail.
        error: What went wrong with the infrastructure (or with a limit the sandbox
            enforced), for humans; None on a normal run.
        enforced: Which limits were enforced on this run (``rlimits``, ``memory_cgroup``,
            ``pids_cgroup``, ``cpuacct_cgroup``, ``workdir_tmpfs``, ``namespaces``).
        executor: Name of the executor that ran it.
    """

    status: ExecutionStatus
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    submission_path: Path | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: str | None = None
    enforced: dict[str, bool] = field(default_factory=dict)
    executor: str = ""

    @property
    def ok(self) -> bool:
        return self.status is ExecutionStatus.OK

    def cleanup(self) -> None:
        """Delete the kept submission copy (and the folder WMRL kept it in)."""
        if self.submission_path is None:
            return
        folder = self.submission_path.parent
        self.submission_path.unlink(missing_ok=True)
        if folder.name.startswith(RUN_DIR_PREFIX) and not any(folder.iterdir()):
            folder.rmdir()
        self.submission_path = None


RUN_DIR_PREFIX = "wmrl-run-"


@runtime_checkable
class Executor(Protocol):
    """Runs one agent script against a task's public files.

    The script runs as ``solution.py`` in a fresh writable work dir (its cwd), with the
    task's public files readable under ``data/``; it writes ``submission.csv`` in the cwd.
    ``task`` is anything with ``public_dir`` (Path) and ``limits`` (:class:`Limits`);
    ``limits`` overrides ``task.limits``. Infrastructure failures come back as
    ``INFRA_ERROR`` results; ``run`` does not raise for them.
    """

    name: str

    def run(self, script: str, task: Any, limits: Limits | None = None) -> ExecutionResult: ...


class OutputTail:
    """Keeps the last ``limit`` bytes of a stream, in bounded memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self.limit:  # trim in batches, not on every chunk
            del self._buf[: -self.limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        return bytes(self._buf[-self.limit :]).decode("utf-8", errors="replace")
