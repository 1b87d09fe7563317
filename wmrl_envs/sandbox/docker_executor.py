"""Agent code in a Docker container, with the bubblewrap sandbox's view and limits.

::

    executor = make_executor("docker")           # the engine of DOCKER_HOST (or the CLI's context)
    with PrivateDockerd() as daemon:             # or a private engine (wmrl_envs.sandbox.dockerd)
        result = make_executor("docker", host=daemon.host).run(script, task)

Agent code sees what :mod:`~wmrl_envs.sandbox.bwrap` shows it: the host's OS runtime, the base
interpreter's prefix (its site-packages hidden) and the runtime venv at ``/opt/wmrl-runtime``,
all bind-mounted read-only on a read-only root, plus ``/workspace`` (writable, its cwd),
``/workspace/data`` (the task's public files, read-only), ``/workspace/solution.py`` and sized
tmpfs mounts on ``/tmp`` and ``/dev/shm``. Docker adds an empty ``/.dockerenv`` and ``/sys``
(an empty tmpfs here, hiding the host's sysfs). The image is an empty skeleton built offline
with ``docker import`` (mount points and the host's merged-``/usr`` links), tagged by its content.

Each run is one container: ``--network none``, every capability dropped, no-new-privileges,
a host uid of its own (the caller's uid where the caller is not root), memory without swap and a pids
limit from :class:`Limits`, and the environment rebuilt with ``env -i``. Its PID 1 is a shell
that sets the rlimits (CPU seconds, address space, file size) and runs the agent as its child;
when it exits, the kernel kills whatever the agent left running. On the wall-clock limit the
host kills the container. Containers are removed in ``finally``, whatever happened.

The work dir is a host folder bind-mounted at ``/workspace``; when the caller is root, a
``limits.tmpfs_mb`` tmpfs is mounted on it first, which bounds its total size (otherwise its
size is checked after the run). The submission is copied out on the host once the container
is gone, so every process of the run is dead, and never through a symlink: as with bwrap.

Containers belong to the engine, not to this process. PID 1 also watches its stdin, whose
other end this process holds through the CLI: if this process dies, the run is killed. What a
killed process leaves (its stopped containers, work-dir mounts, cgroup folders and run folders)
is removed by the next ``DockerExecutor`` created on the host.

CPU time and peak memory come from a per-run cgroup parent where the engine uses cgroup v1
with the cgroupfs driver (as here); elsewhere they are not measured: ``cpu_s`` and
``peak_rss_mb`` are 0 and ``enforced["cpuacct_cgroup"]`` is false.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import math
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import cgroups, identity
from wmrl_envs.sandbox.base import RUN_DIR_PREFIX, ExecutionResult, ExecutionStatus, OutputTail
from wmrl_envs.sandbox.bwrap import ETC_FILES, OS_DIRS, RUNTIME_MOUNT, WORKSPACE
from wmrl_envs.sandbox.docker_cli import docker_cli, run_docker
from wmrl_envs.sandbox.dockerd import mount_points
from wmrl_envs.sandbox.launcher import (
    KILL_GRACE_S,
    RunDir,
    agent_env,
    finish_run_dir,
    kill_group,
    pump_output,
    signal_note,
    start_run,
    tree_size,
)
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.runtime import Runtime, load_runtime
from wmrl_envs.sandbox.sweep import force_remove, owned_prefix, owner_is_dead, sweep_run_dirs

log = logging.getLogger(__name__)

IMAGE_REPOSITORY = "wmrl-sandbox"
# Run folders, containers and per-run cgroups share one name that says which process owns
# them: wmrl-run-docker-<owner>-<random> (the owner as wmrl_envs.sandbox.sweep spells it).
RUN_PREFIX = f"{RUN_DIR_PREFIX}docker-"
# Per-run cgroup parents live below this folder of every cgroup v1 hierarchy.
CGROUP_PARENT = "wmrl-docker"
# How long a control command (inspect, rm, import) may take before the engine counts as unusable.
CONTROL_TIMEOUT_S = 60.0
# PID 1 of the container, with the rlimits as $1..$3. Its stdin is the CLI's, held open by this
# process: a background reader kills the run when it reaches end-of-file (this process died).
# The agent gets /dev/null instead. The trailing ``exit`` keeps dash from exec'ing python as
# PID 1 (init's odd signal semantics); dash reaps orphans while it waits.
INIT_SCRIPT = r"""
exec 3<&0 </dev/null
ulimit -c 0 && ulimit -t "$1" && ulimit -v "$2" && ulimit -f "$3" || exit 125
(read -r _ <&3; kill -9 -1) &
exec 3<&-
python solution.py
exit "$?"
"""
_NEVER_STARTED = "0001-01-01T00:00:00Z"


def skeleton_tar() -> bytes:
    """The image's root: a few mount points and the host's ``/bin -> usr/bin``-style links.

    Deterministic (no times, no owners), so its hash names the image. Everything else the
    sandbox shows is bind-mounted from the host at run time.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mode in (("etc", 0o755), ("opt", 0o755), ("tmp", 0o1777), (WORKSPACE.lstrip("/"), 0o755)):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for path in OS_DIRS:
            if os.path.islink(path):  # merged-/usr systems: /lib -> usr/lib
                info = tarfile.TarInfo(path.lstrip("/"))
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(info)
    return buffer.getvalue()


def _mount_option(**fields: Any) -> str:
    """A ``--mount`` value: CSV, as the CLI parses it (a path with a comma gets quoted)."""
    items = []
    for key, value in fields.items():
        key = key.replace("_", "-")
        items.append(key if value is True else f"{key}={value}")
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(items)
    return out.getvalue()


@dataclass(frozen=True)
class _Launch:
    stdout: OutputTail
    stderr: OutputTail
    wall_s: float
    timed_out: bool


@dataclass(frozen=True)
class _Outcome:
    launch: _Launch
    state: dict[str, Any] | None  # the container's State as inspected before removal; None if never created
    cpu_ns: int | None
    peak_memory_bytes: int | None
    workdir_tmpfs: bool
    work_overflow: bool


class DockerExecutor:
    """Runs agent code in a Docker container (see the module docstring for what it sees).

    Args:
        runtime: Path of the agent runtime venv (default: built by
            :func:`~wmrl_envs.sandbox.runtime.ensure_runtime` on first use).
        work_root: Where run folders are created (default: the system temp dir). The engine
            bind-mounts from there, so it must run on this host.
        host: The engine's address (``unix:///path/docker.sock``); default: the CLI's
            (``DOCKER_HOST`` or its current context).

    Raises :class:`SandboxUnavailableError` at construction when the ``docker`` CLI is missing
    or the engine does not answer (the message says how to fix it), or the image cannot be built.
    """

    name = "docker"

    def __init__(self, runtime: Path | None = None, work_root: Path | None = None, host: str | None = None) -> None:
        self.host = host
        self._cli = docker_cli(host)
        self._runtime_path = runtime
        self._runtime: Runtime | None = None
        self.work_root = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
        info = self._control("info", "--format", "{{.ServerVersion}}|{{.CgroupDriver}}|{{.CgroupVersion}}",
                             failure="the Docker engine does not answer").strip().split("|")
        self._measure = info[1:] == ["cgroupfs", "1"] and (cgroups.CGROUP_ROOT / "cpuacct").is_dir()
        root = os.geteuid() == 0
        # As root each container runs as a host uid of its own (identity.RUN_UIDS), so that no two
        # runs share the kernel's per-uid budgets; otherwise as the caller.
        self._fixed_user = None if root else f"{os.geteuid()}:{os.getegid()}"
        self._mount_work_dir = root and shutil.which("mount") is not None
        self.image = self._ensure_image()
        self._remove_stale()

    # -- public API -----------------------------------------------------------------------
    def run(self, script: str, task: Any, limits: Limits | None = None) -> ExecutionResult:
        """Run ``script`` as ``solution.py`` against ``task``'s public files."""
        limits = limits if limits is not None else task.limits
        started = start_run(task, self._ensure_runtime, self.work_root, RUN_PREFIX)
        if isinstance(started, str):
            return self._infra(started)
        public_dir, runtime, run = started
        try:
            outcome = self._execute(script, runtime, run, public_dir.resolve(), limits)
        except (SandboxUnavailableError, OSError, subprocess.SubprocessError) as exc:
            finish_run_dir(run, keep_submission=False)
            return self._infra(f"could not launch the run: {exc}")
        finish_run_dir(run, keep_submission=True)
        return self._result(outcome, limits, run)

    def containers(self) -> list[str]:
        """Names of the containers this process's runs have on the engine (empty between runs)."""
        listed = self._control("ps", "--all", "--filter", f"name={owned_prefix(RUN_PREFIX)}", "--format", "{{.Names}}")
        return listed.split()

    # -- internals ------------------------------------------------------------------------
    def _ensure_runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = load_runtime(self._runtime_path)
        return self._runtime

    def _infra(self, message: str) -> ExecutionResult:
        return ExecutionResult(status=ExecutionStatus.INFRA_ERROR, error=message, executor=self.name)

    def _control(self, *args: str, data: bytes | None = None, failure: str = "a docker command failed") -> str:
        """Run a CLI command that is not a run; its stdout, or SandboxUnavailableError."""
        return run_docker(self._cli, *args, what=failure, data=data, timeout_s=CONTROL_TIMEOUT_S)

    def _ensure_image(self) -> str:
        """The skeleton image, imported once per content (its tag is the tar's hash)."""
        data = skeleton_tar()
        tag = f"{IMAGE_REPOSITORY}:{hashlib.sha256(data).hexdigest()[:16]}"
        try:
            self._control("image", "inspect", "--format", "{{.Id}}", tag)
        except SandboxUnavailableError:
            self._control("import", "--message", "WMRL sandbox skeleton", "-", tag, data=data,
                          failure="could not build the sandbox image")
        return tag

    def _remove_stale(self) -> None:
        """Remove what runs of dead processes left: containers, work-dir mounts, cgroup folders."""
        stale = [n for n in self._control("ps", "--all", "--filter", f"name={RUN_PREFIX}", "--format",
                                          "{{.Names}}").split() if owner_is_dead(n, RUN_PREFIX)]
        if stale:
            self._control("rm", "--force", *stale)
        for point in mount_points():
            folder = Path(point).parent
            if Path(point).name == "work" and owner_is_dead(folder.name, RUN_PREFIX):
                subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)
                force_remove(folder)
        sweep_run_dirs(self.work_root, RUN_PREFIX)  # the folders without a work-dir mount (not root)
        for group in cgroups.CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}/{RUN_PREFIX}*"):
            if owner_is_dead(group.name, RUN_PREFIX):
                cgroups.remove_dir(group)

    def _execute(self, script: str, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits) -> _Outcome:
        name = run.root.name
        run.work.mkdir()
        run.script.write_text(script, encoding="utf-8")
        mounted = self._prepare_work_dir(run.work, limits)
        try:
            try:
                launch = self._launch(name, self._run_args(runtime, run, public_dir, limits), limits)
                state = self._state(name)
            finally:
                self._remove_container(name)  # from here every process of the run is dead
                cpu_ns, peak = self._cgroup_stats(name)
            overflow = not mounted and tree_size(run.work) > limits.tmpfs_mb << 20
            _copy_submission(run)
        finally:
            if mounted:
                subprocess.run(["umount", "--lazy", str(run.work)], check=False, capture_output=True)
        return _Outcome(launch, state, cpu_ns, peak, mounted, overflow)

    def _user(self, run_name: str) -> str:
        """``uid:gid`` of the run's container."""
        if self._fixed_user is not None:
            return self._fixed_user
        uid = identity.run_uid(run_name)
        return f"{uid}:{uid}"

    def _prepare_work_dir(self, work: Path, limits: Limits) -> bool:
        """Mount a sized tmpfs on the work dir where possible; whether it was mounted."""
        uid, gid = self._user(work.parent.name).split(":")
        if self._mount_work_dir:
            options = f"size={limits.tmpfs_mb}m,mode=0755,uid={uid},gid={gid},nosuid,nodev"
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "wmrl-work", str(work)],
                                     check=False, capture_output=True, text=True)
            if mounted.returncode == 0:
                return True
            log.warning("docker executor: no tmpfs work dir (%s); its size is checked after each run instead",
                        mounted.stderr.strip())
            self._mount_work_dir = False
        if os.geteuid() == 0:
            os.chown(work, int(uid), int(gid))
        return False

    def _run_args(self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits) -> list[str]:
        tmpfs = f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777"
        args = [
            *self._cli, "run",
            "--interactive",  # PID 1's stdin: see INIT_SCRIPT
            "--name", run.root.name,
            "--pull", "never",
            "--network", "none",
            "--read-only",
            "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--user", self._user(run.root.name),
            "--hostname", "sandbox",
            "--log-driver", "none",  # output streams to us only; the engine stores none of it
            "--memory", f"{limits.memory_mb}m",
            "--memory-swap", f"{limits.memory_mb}m",  # equal: no swap
            "--pids-limit", str(limits.max_processes),
            "--tmpfs", f"/tmp:{tmpfs}",
            "--tmpfs", f"/dev/shm:{tmpfs}",
            "--tmpfs", "/sys:ro,size=4k",
            "--workdir", WORKSPACE,
        ]  # fmt: skip
        if self._measure:
            args += ["--cgroup-parent", f"/{CGROUP_PARENT}/{run.root.name}"]
        binds = [(path, path) for path in OS_DIRS if os.path.isdir(path) and not os.path.islink(path)]
        binds += [(path, path) for path in ETC_FILES if os.path.exists(path)]
        # The venv's python is a symlink into the base prefix, so mount it at the same path,
        # but hide its site-packages: agent code must not import the host's packages.
        binds += [(runtime.base_prefix, runtime.base_prefix), (runtime.venv, RUNTIME_MOUNT)]
        for source, target in binds:
            args += ["--mount", _mount_option(type="bind", source=source, target=target, readonly=True)]
        for site in runtime.base_site_packages:
            if site.is_dir():
                args += ["--mount", _mount_option(type="tmpfs", target=site, tmpfs_size=4096, readonly=True)]
        args += ["--mount", _mount_option(type="bind", source=run.work, target=WORKSPACE)]
        args += ["--mount", _mount_option(type="bind", source=public_dir, target=f"{WORKSPACE}/data", readonly=True)]
        args += ["--mount", _mount_option(type="bind", source=run.script, target=f"{WORKSPACE}/solution.py",
                                          readonly=True)]
        env = agent_env(path=f"{RUNTIME_MOUNT}/bin:/usr/local/bin:/usr/bin:/bin", home="/tmp", tmpdir="/tmp")
        args += [self.image, "/usr/bin/env", "-i", *(f"{key}={value}" for key, value in env.items())]
        args += ["/bin/sh", "-c", INIT_SCRIPT, "wmrl-init", str(math.ceil(limits.cpu_s)),
                 str(limits.memory_mb * 1024), str(limits.file_mb * 2048)]  # dash counts 512-byte blocks
        return args

    def _launch(self, name: str, argv: list[str], limits: Limits) -> _Launch:
        stdout, stderr = OutputTail(limits.output_bytes), OutputTail(limits.output_bytes)
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # all PIPEs
        # stdin stays open until the CLI exits: closing it would end the run (INIT_SCRIPT).
        with proc.stdin, proc.stdout, proc.stderr:
            timed_out = pump_output(
                {proc.stdout: stdout, proc.stderr: stderr},
                deadline=start + limits.wall_s,
                on_timeout=lambda: self._kill(name),
                on_grace_expired=lambda: kill_group(proc.pid),
            )
            proc.wait()
        return _Launch(stdout, stderr, time.monotonic() - start, timed_out)

    def _kill(self, name: str) -> None:
        # The container may not exist yet (a slow engine) or be gone already: the grace period
        # and the removal in ``finally`` cover both.
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run([*self._cli, "kill", name], check=False, capture_output=True, timeout=KILL_GRACE_S)

    def _state(self, name: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._control("inspect", "--type", "container", "--format", "{{json .State}}", name))
        except SandboxUnavailableError:  # never created: the CLI's stderr says why
            return None

    def _remove_container(self, name: str) -> None:
        try:
            self._control("rm", "--force", "--volumes", name)
        except SandboxUnavailableError as exc:
            if "No such container" not in str(exc):
                raise

    def _cgroup_stats(self, name: str) -> tuple[int | None, int | None]:
        """CPU-nanoseconds and peak memory of the run's cgroup parent, which is then removed."""
        if not self._measure:
            return None, None
        cpu_ns = peak = None
        with contextlib.suppress(OSError, ValueError):
            cpu_ns = int((cgroups.CGROUP_ROOT / "cpuacct" / CGROUP_PARENT / name / "cpuacct.usage").read_text())
        with contextlib.suppress(OSError, ValueError):
            memory = cgroups.CGROUP_ROOT / "memory" / CGROUP_PARENT / name
            peak = int((memory / "memory.max_usage_in_bytes").read_text())
        for group in cgroups.CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}/{name}"):
            cgroups.remove_dir(group)
        return cpu_ns, peak

    def _result(self, outcome: _Outcome, limits: Limits, run: RunDir) -> ExecutionResult:
        launch, state = outcome.launch, outcome.state or {}
        stderr = launch.stderr.text()
        started = state.get("StartedAt", _NEVER_STARTED) != _NEVER_STARTED and not state.get("Error")
        returncode: int | None = state.get("ExitCode") if started else None
        error: str | None = None
        if launch.timed_out:
            status, error = ExecutionStatus.TIMEOUT, f"wall-clock limit of {limits.wall_s:g} s exceeded"
        elif not started:
            reason = state.get("Error") or stderr[-2000:].strip()
            status, error = ExecutionStatus.INFRA_ERROR, f"sandbox failed to start: {reason}"
        elif outcome.work_overflow:
            status, error = ExecutionStatus.ERROR, f"the work dir grew past {limits.tmpfs_mb} MB"
        elif returncode == 0:
            status = ExecutionStatus.OK
        elif state.get("OOMKilled"):
            status, error = ExecutionStatus.MEMORY, f"memory limit of {limits.memory_mb} MB exceeded (OOM kill)"
        elif "MemoryError" in stderr[-4096:]:
            status, error = ExecutionStatus.MEMORY, f"memory limit of {limits.memory_mb} MB exceeded (MemoryError)"
        else:
            status, error = ExecutionStatus.ERROR, signal_note(returncode, limits)
        measured = outcome.cpu_ns is not None
        return ExecutionResult(
            status=status,
            stdout=launch.stdout.text(),
            stderr=stderr,
            returncode=returncode,
            wall_s=launch.wall_s,
            cpu_s=outcome.cpu_ns / 1e9 if outcome.cpu_ns is not None else 0.0,
            peak_rss_mb=outcome.peak_memory_bytes / (1 << 20) if outcome.peak_memory_bytes is not None else 0.0,
            submission_path=run.submission if run.submission.is_file() else None,
            stdout_truncated=launch.stdout.truncated,
            stderr_truncated=launch.stderr.truncated,
            error=error,
            enforced={"rlimits": True, "namespaces": True, "workdir_tmpfs": outcome.workdir_tmpfs,
                      "memory_cgroup": True, "pids_cgroup": True, "cpuacct_cgroup": measured},
            executor=self.name,
        )


def _copy_submission(run: RunDir) -> None:
    """Copy ``work/submission.csv`` out if it is a regular file (a link, FIFO or folder is ignored)."""
    try:
        # O_NONBLOCK: opening a FIFO nobody writes to must not hang the host.
        fd = os.open(run.work / "submission.csv", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked before fdopen, which refuses a folder
            return
        with os.fdopen(os.dup(fd), "rb") as source, open(run.submission, "wb") as target:
            shutil.copyfileobj(source, target)
    finally:
        os.close(fd)
