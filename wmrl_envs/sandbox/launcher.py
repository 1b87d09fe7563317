"""The machinery both process executors share: launch, supervise, measure, classify.

Every run goes through a small trusted POSIX-shell helper that runs on the host side::

    [unshare --mount] [setpriv --pdeathsig KILL] sh helper
                                            (host side; private mount namespace when root)
      mount a sized tmpfs on the work dir   (root only: bounds the work dir's total size)
      ( subshell                            (joins the run's cgroups, sets rlimits)
        exec <command> )                    (bwrap ... python solution.py, or python directly)
      copy work/submission.csv out          (after every sandboxed process is dead)

The helper stays outside the run's cgroups, so a wall-clock kill of the cgroup (or of the
sandbox's PID 1) still lets it copy the submission out. It is started without
``preexec_fn`` (unsafe with the pool's threads): rlimits are set with the shell's ``ulimit``.
Output is read from pipes into bounded tails, so 100 MB of stdout costs no host memory or disk.

:class:`RunExecutor` is the pipeline around a launch (run folder, cgroup, measures, status) and
:class:`HelperExecutor` launches through the helper; the warm executor
(:mod:`~wmrl_envs.sandbox.warm`) shares the pipeline and launches from a zygote instead.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import cgroups
from wmrl_envs.sandbox.arithmetic import arithmetic_env
from wmrl_envs.sandbox.base import RUN_DIR_PREFIX, ExecutionResult, ExecutionStatus, OutputTail
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.runtime import Runtime, load_runtime
from wmrl_envs.sandbox.sweep import force_remove, owned_prefix, sweep_run_dirs

# The helper's fd for the status channel (bwrap's --json-status-fd, or the start mark).
STATUS_FD = 3
# After a wall-clock kill, how long the helper gets to copy the submission and exit.
KILL_GRACE_S = 5.0
_READ_CHUNK = 1 << 16

# The status pipe arrives as stdin (single-digit fds are all dash can redirect); move it to fd 3.
# The agent's side runs in a subshell (a fork, no exec), so only it joins the run's cgroups
# (writing 0 to cgroup.procs moves the writer) and gets the rlimits.
HELPER_SCRIPT = r"""
exec 3>&0 </dev/null
if [ -n "$WMRL_WORK_MB" ]; then
  mount -t tmpfs -o "size=${WMRL_WORK_MB}m,mode=0755,nosuid,nodev${WMRL_RUN_UID:+,uid=$WMRL_RUN_UID,gid=$WMRL_RUN_UID}" \
    wmrl-work "$WMRL_WORK" || exit 125
fi
if [ -n "$WMRL_VIEW" ]; then  # where an unprivileged sandbox reaches what it could not by its own path
  mount --bind "$WMRL_WORK" "$WMRL_VIEW/work" && mount --bind "$WMRL_RUN/solution.py" "$WMRL_VIEW/solution.py" &&
    mount --bind "$WMRL_PUBLIC" "$WMRL_VIEW/data" && mount --bind "$WMRL_BASE" "$WMRL_VIEW/base" &&
    mount --bind "$WMRL_VENV" "$WMRL_VIEW/venv" || exit 125
fi
(
  for procs in $WMRL_CGROUP_PROCS; do echo 0 > "$procs" || exit 125; done
  ulimit -c 0 && ulimit -t "$WMRL_CPU_S" && ulimit -v "$WMRL_AS_KB" && ulimit -f "$WMRL_FSIZE_BLOCKS" || exit 125
  if [ -n "$WMRL_MARK_START" ]; then
    cd "$WMRL_WORK" || exit 125
    printf 'started\n' >&3
    exec 3>&-
  fi
  if [ -n "$WMRL_SECCOMP" ]; then exec 9<"$WMRL_SECCOMP" || exit 125; fi  # bwrap's --seccomp 9
  exec "$@"
)
rc=$?
sub=$WMRL_WORK/submission.csv
if [ -f "$sub" ] && [ ! -L "$sub" ]; then
  cp "$sub" "$WMRL_RUN/submission.csv" || rm -f "$WMRL_RUN/submission.csv"
fi
exit "$rc"
"""


def agent_env(path: str, home: str, tmpdir: str) -> dict[str, str]:
    """The whole environment agent code sees: nothing from the host leaks in."""
    return {
        "PATH": path,
        "HOME": home,
        "TMPDIR": tmpdir,
        "LANG": "C.UTF-8",
        # On a shared 2-core box, BLAS/OpenMP thread pools under contention run 10-25x slower.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        **arithmetic_env(),  # the same vector code on every x86-64-v3 host (sandbox/arithmetic.py)
    }


@dataclass(frozen=True)
class RunDir:
    """Host-side folder of one run: ``solution.py``, ``work/`` and the kept submission."""

    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def script(self) -> Path:
        """The agent's script, outside the work dir; executors place it as ``solution.py``."""
        return self.root / "solution.py"

    @property
    def submission(self) -> Path:
        return self.root / "submission.csv"


@dataclass
class Launch:
    """What the helper process left behind."""

    stdout: OutputTail
    stderr: OutputTail
    status_text: str
    returncode: int
    rusage: resource.struct_rusage
    wall_s: float
    timed_out: bool
    #: A cause outside the script that spoiled the run (the result is an infrastructure failure).
    host_fault: str | None = None
    #: What the status channel says of a scored failure that no exit code explains.
    note: str | None = None


class RunExecutor(ABC):
    """The run pipeline of the host-side executors: run folder, cgroup, launch, measures, status.

    Subclasses supply the launch (the helper below, or the warm executor's zygote) and read
    their status channel.

    Args:
        runtime: Path of the agent runtime venv (default: built by
            :func:`~wmrl_envs.sandbox.runtime.ensure_runtime` on first use).
        work_root: Where run folders are created (default: the system temp dir); those that
            killed processes left there are removed here (:mod:`~wmrl_envs.sandbox.sweep`).
        use_cgroups: Put each run in its own cgroup when the v1 hierarchy is writable.
        tmpfs_work_dir: Mount a ``limits.tmpfs_mb`` tmpfs on the work dir where the host
            allows it (root); otherwise the work dir is a host folder checked after the run.
    """

    name: str = ""

    def __init__(
        self,
        runtime: Path | None = None,
        work_root: Path | None = None,
        use_cgroups: bool = True,
        tmpfs_work_dir: bool = True,
    ) -> None:
        self._runtime_path = runtime
        self._runtime: Runtime | None = None
        self.work_root = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
        self._cgroup_parents = cgroups.parent_dirs() if use_cgroups else {}
        # Paths go through the shell's word splitting; skip cgroups rather than mis-split.
        if any(any(c.isspace() for c in str(p)) for p in self._cgroup_parents.values()):
            self._cgroup_parents = {}
        # Set only where the helper can get a private mount namespace for the work-dir tmpfs.
        self._unshare = _mount_unsharer() if tmpfs_work_dir else None
        self._setpriv = shutil.which("setpriv")
        sweep_run_dirs(self.work_root)  # what runs of killed processes left here

    # -- subclass hooks -------------------------------------------------------------------
    @abstractmethod
    def _launch(
        self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits, cgroup: cgroups.RunCgroup | None
    ) -> Launch:
        """Run the script in ``run`` to its end or its wall-clock kill; what the host saw."""

    @abstractmethod
    def _started(self, status_text: str) -> tuple[bool, int | None]:
        """Whether agent code started, and its exit status if the status channel knows it."""

    @abstractmethod
    def _kill_sandbox(self, status_text: str, helper_pid: int) -> None:
        """Kill the agent's process tree on a wall-clock timeout, sparing what copies the
        submission out (the helper, or the warm run's supervisor)."""

    def _prepare(self, run: RunDir, public_dir: Path) -> None:  # noqa: B027 (an optional hook)
        """Set up the host-side work dir before launch (default: nothing)."""

    def _finish(self, run: RunDir) -> None:  # noqa: B027 (an optional hook)
        """Remove what :meth:`_prepare` made outside the run folder (default: nothing)."""

    @property
    def _namespaces(self) -> bool:
        return False

    @property
    def _private_mounts(self) -> bool:
        return self._unshare is not None

    # -- public API -----------------------------------------------------------------------
    def run(self, script: str, task: Any, limits: Limits | None = None) -> ExecutionResult:
        """Run ``script`` as ``solution.py`` against ``task``'s public files."""
        limits = limits if limits is not None else task.limits
        started = start_run(task, self._ensure_runtime, self.work_root, RUN_DIR_PREFIX)
        if isinstance(started, str):
            return self._infra(started)
        public_dir, runtime, run = started
        cgroup: cgroups.RunCgroup | None = None
        try:
            run.work.mkdir()
            run.script.write_text(script, encoding="utf-8")
            self._prepare(run, public_dir)
            if self._cgroup_parents:
                cgroup = cgroups.RunCgroup(self._cgroup_parents, limits)
            launch = self._launch(runtime, run, public_dir, limits, cgroup)
            stats = cgroup.stats() if cgroup is not None else None
        except OSError as exc:  # work dir, cgroup or spawn failure on the host side
            finish_run_dir(run, keep_submission=False)
            return self._infra(f"could not launch the run: {exc}")
        finally:
            if cgroup is not None:
                cgroup.remove()
            self._finish(run)
        work_overflow = not self._private_mounts and tree_size(run.work) > limits.tmpfs_mb << 20
        finish_run_dir(run, keep_submission=True)
        return self._result(launch, stats, limits, run, cgroup, work_overflow)

    # -- internals ------------------------------------------------------------------------
    def _ensure_runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = load_runtime(self._runtime_path)
        return self._runtime

    def _infra(self, message: str) -> ExecutionResult:
        return ExecutionResult(status=ExecutionStatus.INFRA_ERROR, error=message, executor=self.name)

    def _on_timeout(self, cgroup: cgroups.RunCgroup | None, status: OutputTail, helper_pid: int) -> None:
        self._kill_sandbox(status.text(), helper_pid)
        if cgroup is not None:  # whatever the executor's own kill missed
            cgroup.kill()

    def _result(
        self,
        launch: Launch,
        stats: cgroups.CgroupStats | None,
        limits: Limits,
        run: RunDir,
        cgroup: cgroups.RunCgroup | None,
        work_overflow: bool,
    ) -> ExecutionResult:
        started, exit_code = self._started(launch.status_text)
        returncode: int | None = exit_code if exit_code is not None else launch.returncode
        stderr = launch.stderr.text()
        oom_killed = stats is not None and stats.oom_kills > 0
        error: str | None = None
        if launch.host_fault is not None:
            status, error = ExecutionStatus.INFRA_ERROR, launch.host_fault
        elif launch.timed_out:
            status, error = ExecutionStatus.TIMEOUT, f"wall-clock limit of {limits.wall_s:g} s exceeded"
        elif not started and not oom_killed:  # the OOM killer may have picked bwrap itself
            status, error = ExecutionStatus.INFRA_ERROR, f"sandbox failed to start: {stderr[-2000:].strip()}"
            returncode = None
        elif work_overflow:
            status, error = ExecutionStatus.ERROR, f"the work dir grew past {limits.tmpfs_mb} MB"
        elif started and returncode == 0:
            status = ExecutionStatus.OK
        elif oom_killed:
            status, error = ExecutionStatus.MEMORY, f"memory limit of {limits.memory_mb} MB exceeded (OOM kill)"
        elif "MemoryError" in stderr[-4096:]:
            status, error = ExecutionStatus.MEMORY, f"memory limit of {limits.memory_mb} MB exceeded (MemoryError)"
        else:
            status = ExecutionStatus.ERROR
            error = signal_note(returncode, limits) or launch.note

        if stats is not None and stats.cpu_ns is not None:
            cpu_s = stats.cpu_ns / 1e9
        else:
            cpu_s = launch.rusage.ru_utime + launch.rusage.ru_stime
        if stats is not None and stats.peak_memory_bytes is not None:
            peak_mb = stats.peak_memory_bytes / (1 << 20)
        else:
            peak_mb = launch.rusage.ru_maxrss / 1024  # Linux reports KiB
        enforced = {"rlimits": True, "namespaces": self._namespaces, "workdir_tmpfs": self._private_mounts}
        enforced |= cgroup.enforced if cgroup is not None else {f"{c}_cgroup": False for c in cgroups.CONTROLLERS}
        return ExecutionResult(
            status=status,
            stdout=launch.stdout.text(),
            stderr=stderr,
            returncode=returncode,
            wall_s=launch.wall_s,
            cpu_s=cpu_s,
            peak_rss_mb=peak_mb,
            submission_path=run.submission if run.submission.is_file() else None,
            stdout_truncated=launch.stdout.truncated,
            stderr_truncated=launch.stderr.truncated,
            error=error,
            enforced=enforced,
            executor=self.name,
        )


class HelperExecutor(RunExecutor):
    """An executor that runs each script through the helper; subclasses supply the command."""

    @abstractmethod
    def _command(self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits) -> list[str]:
        """The command the helper's subshell execs (it inherits the rlimits and cgroups)."""

    def _helper_env(self, runtime: Runtime, run: RunDir, public_dir: Path) -> dict[str, str]:
        """What else the helper reads (``WMRL_RUN_UID`` and its sources, ``WMRL_SECCOMP``); default none."""
        return {}

    def _launch(
        self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits, cgroup: cgroups.RunCgroup | None
    ) -> Launch:
        status_r, status_w = os.pipe()
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "WMRL_RUN": str(run.root),
            "WMRL_WORK": str(run.work),
            "WMRL_WORK_MB": str(limits.tmpfs_mb) if self._private_mounts else "",
            "WMRL_CGROUP_PROCS": " ".join(str(p) for p in cgroup.procs_files) if cgroup else "",
            "WMRL_CPU_S": str(math.ceil(limits.cpu_s)),
            "WMRL_AS_KB": str(limits.memory_mb * 1024),
            "WMRL_FSIZE_BLOCKS": str(limits.file_mb * 2048),  # dash counts 512-byte blocks
            "WMRL_MARK_START": "" if self._namespaces else "1",
            **self._helper_env(runtime, run, public_dir),
        }
        argv = ["/bin/sh", "-c", HELPER_SCRIPT, "wmrl-helper"]
        argv += self._command(runtime, run, public_dir, limits)
        if self._setpriv:  # the helper (and through --die-with-parent, the sandbox) dies with us
            argv = [self._setpriv, "--pdeathsig", "KILL", "--", *argv]
        if self._unshare is not None:  # the work-dir tmpfs lives and dies with the helper
            argv = [self._unshare, "--mount", "--propagation", "private", "--", *argv]

        stdout, stderr = OutputTail(limits.output_bytes), OutputTail(limits.output_bytes)
        status = OutputTail(1 << 16)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=status_w,  # becomes fd 3 in the helper, see HELPER_SCRIPT
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # own process group: the last-resort kill takes it all
            )
        except OSError:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        assert proc.stdout is not None and proc.stderr is not None  # both are PIPEs
        with os.fdopen(status_r, "rb", buffering=0) as status_pipe, proc.stdout, proc.stderr:
            timed_out = pump_output(
                {proc.stdout: stdout, proc.stderr: stderr, status_pipe: status},
                deadline=start + limits.wall_s,
                on_timeout=lambda: self._on_timeout(cgroup, status, proc.pid),
                on_grace_expired=lambda: kill_group(proc.pid),
            )
        # os.wait4 (not Popen.wait) so the tree's rusage is available without a cgroup.
        _, wait_status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        returncode = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode  # shell convention
        return Launch(
            stdout=stdout,
            stderr=stderr,
            status_text=status.text(),
            returncode=returncode,
            rusage=rusage,
            wall_s=time.monotonic() - start,
            timed_out=timed_out,
        )


def start_run(task: Any, ensure_runtime: Callable[[], Runtime], work_root: Path,
              prefix: str) -> tuple[Path, Runtime, RunDir] | str:
    """What every executor checks and makes before a run: the task's public folder, the agent
    runtime and a fresh run folder named after this process (see :mod:`~wmrl_envs.sandbox.sweep`);
    or why the run cannot start (an infrastructure failure)."""
    public_dir = Path(task.public_dir)
    try:
        runtime = ensure_runtime()
    except (SandboxUnavailableError, OSError) as exc:
        return f"agent runtime unavailable: {exc}"
    if not public_dir.is_dir():
        return f"task public_dir {public_dir} is not a directory"
    try:
        run = RunDir(Path(tempfile.mkdtemp(prefix=owned_prefix(prefix), dir=work_root)))
    except OSError as exc:
        return f"could not create a run folder in {work_root}: {exc}"
    return public_dir, runtime, run


def pump_output(
    streams: dict[Any, OutputTail],
    deadline: float,
    on_timeout: Callable[[], None],
    on_grace_expired: Callable[[], None],
) -> bool:
    """Read every stream into its tail until all close; enforce the wall clock.

    Returns whether the deadline passed. The helper holds all three pipes until it exits, so
    end-of-file on every pipe means the run is over.
    """
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for pipe, tail in streams.items():
            sel.register(pipe, selectors.EVENT_READ, tail)
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                if timed_out:
                    on_grace_expired()
                    deadline = math.inf
                else:
                    timed_out = True
                    on_timeout()
                    deadline = now + KILL_GRACE_S
            wait = None if deadline == math.inf else max(0.0, deadline - time.monotonic())
            for key, _ in sel.select(wait):
                data = os.read(key.fd, _READ_CHUNK)
                if data:
                    key.data.feed(data)
                else:
                    sel.unregister(key.fileobj)
    return timed_out


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (the helper's, as the last resort)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def signal_note(returncode: int | None, limits: Limits) -> str | None:
    if returncode == 128 + signal.SIGXCPU:
        return f"CPU-time limit of {limits.cpu_s:g} s per process exceeded"
    if returncode == 128 + signal.SIGXFSZ:
        return f"file-size limit of {limits.file_mb} MB exceeded"
    return None


def _mount_unsharer() -> str | None:
    """``unshare``'s path where it can make a private mount namespace (root with CAP_SYS_ADMIN)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        return None
    probe = subprocess.run([unshare, "--mount", "--propagation", "private", "true"], check=False, capture_output=True)
    return unshare if probe.returncode == 0 else None


def tree_size(root: Path) -> int:
    """Bytes allocated by the files under ``root`` (symlinks are not followed)."""
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def finish_run_dir(run: RunDir, keep_submission: bool) -> None:
    """Delete the run folder, except the submission copy when there is one to keep."""
    if keep_submission and run.submission.is_file():
        for entry in run.root.iterdir():
            if entry != run.submission:
                force_remove(entry)
    else:
        force_remove(run.root)
