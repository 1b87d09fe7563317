"""The warm executor: each run forks from a zygote that has already imported the runtime's heavy modules.

A cold run spends most of its CPU importing numpy, pandas and scikit-learn again. Here a zygote
process imports them once (what to import is measured, see :mod:`~wmrl_envs.sandbox.preload`)
inside a long-lived bubblewrap sandbox, and every run is a fork of it::

    host (root)
      unshare --mount          the keeper: a private mount namespace that holds the spool's mounts
        setpriv --reuid 65534  bwrap runs unprivileged, so the sandbox's uid 65534 is the host's
          bwrap                no network, cleared environment, no capabilities, read-only root
            zygote             preloaded, single-threaded, never runs agent code (zygote.py)
              supervisor       per run: new user, mount, pid, net, ipc and uts namespaces
                init           PID 1 of the run, moved into the run's cgroups by the host
                  agent        runs solution.py

Each run is as isolated as a cold ``bwrap`` run. Its supervisor enters a user namespace of its
own (twice: the outer one is capped at one nested namespace, so agent code cannot create
another and regain capabilities), then new mount, pid, network, ipc and uts namespaces, and
mounts the run's own tmpfs work dir (``limits.tmpfs_mb``, its pages charged to the run's
memory cgroup), ``/tmp``, ``/dev/shm``, a fresh ``/proc``, a devpts instance and a loopback no other
run shares.
The spool of per-run folders is hidden under an empty mount. The task's public files reach the
sandbox as a read-only bind that the host makes per run in the keeper's namespace and that
propagates into the sandbox; the answers are never mounted. Its init joins the run's cgroups
(memory, pids, cpuacct) before the agent exists, drops every capability, installs the seccomp
filter (:mod:`~wmrl_envs.sandbox.seccomp`) and keeps only default signal handlers, so the kernel
drops whatever signal agent code sends it; the agent sets the
rlimits, gets fresh fds, ``/dev/null`` on stdin, its own session, the signal dispositions of a
fresh interpreter, and RNGs reseeded from ``os.urandom`` (``random``, numpy's global
RandomState, multiprocessing's authentication key). Nothing a run does reaches the next: it
leaves the zygote unchanged, its files and mounts vanish with its namespaces, its processes
with its PID namespace. On the wall clock the host kills the run's PID namespace; the
supervisor survives to copy the submission out, as the cold helper does.

Design choices, against the alternatives:

* A fresh bwrap per run cannot start from a zygote: a process cannot be forked into namespaces
  created after it. So the namespaces that make a run private are made by the run itself.
* One shared sandbox with per-run folders only (no per-run namespaces) would share ``/tmp``,
  ``/dev/shm``, the PID namespace and the loopback between runs: a run could leave a process,
  a file or a listener for the next. Recreating the zygote every N runs narrows that, never
  closes it.
* Per-run namespaces need capabilities inside the sandbox. A root-run bwrap keeps none (and
  its user namespace cannot mount a fresh ``/proc`` over the one bwrap covers), so the
  zygote's bwrap runs as uid 65534, where nested user namespaces give the supervisor the
  capabilities it needs over its own namespaces only. Agent code thus runs as the host's
  ``nobody`` in every run (cold runs each get a uid of their own), so each run gets a share of
  the kernel's per-uid budgets (:mod:`~wmrl_envs.sandbox.identity`); the task's public files
  must be readable by others, as for the Docker executor. The spool sits in a temp folder that
  uid can enter, whatever ``TMPDIR`` is.
* Once agent code may have run (init reports "started" before it does), every outcome is the
  run's own and scored: the supervisor always reports an exit status, whatever the script left
  behind. Only a cause on the host's side (the zygote died, the spool could not be written) makes
  a started run an ``INFRA_ERROR``.
* One zygote per runtime serves every run (the pool's threads included): it only forks, in
  milliseconds, and never changes. A zygote that died is replaced at the next run; one that
  does not start a run within ``handshake_timeout_s`` is killed and replaced, and that run is
  an ``INFRA_ERROR``, as is every run whose sandbox failed to start. A zygote that started a
  thread, holds an unexpected fd or cannot import is refused, never forked.

Limits mean what they mean for a cold run (``RLIMIT_AS`` is per process, and the preloaded
modules count in it as if the script had imported them), with one difference: the pages the
zygote shares with a run are charged to the host process's memory cgroup, not the run's, so
``peak_rss_mb`` counts only what the run itself touches. Likewise a run finds the preloaded
modules imported, with their import-time effects (scikit-learn's ``KMP_*`` environment
defaults), as if the script had imported them first. Each run still ends with the interpreter's
full finalization (about 0.09 CPU-s here, as it copies the pages it touches): unflushed files
and atexit handlers behave as in ``python solution.py``. The first run of a runtime waits for
its zygote to start (about 2 s and 1 CPU-s here), outside the run's wall clock. It needs root (the keeper's mounts and
the run cgroups) and unprivileged user namespaces; :class:`SandboxUnavailableError` says which
is missing.

The Ray executor runs it on each node (``make_executor("ray", executor="warm")``; each worker
process keeps its own zygote). The Docker executor does not: its isolation is one container per
run, made by the engine, and inside a container the default seccomp and AppArmor profiles refuse
the namespaces and mounts a zygote's runs need.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import cgroups, identity
from wmrl_envs.sandbox.base import RUN_DIR_PREFIX, OutputTail
from wmrl_envs.sandbox.bwrap import INSTALL_HINT, RUNTIME_MOUNT, isolation_args, kill_pid_namespace, runtime_args
from wmrl_envs.sandbox.launcher import KILL_GRACE_S, Launch, RunDir, RunExecutor, pump_output
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.preload import preload_modules
from wmrl_envs.sandbox.runtime import Runtime
from wmrl_envs.sandbox.seccomp import filter_program
from wmrl_envs.sandbox.sweep import force_remove, owned_prefix, sweep_run_dirs
from wmrl_envs.sandbox.zygote import SANDBOX_ID, SETUP_FAILED, SPOOL, WORKSPACE

log = logging.getLogger(__name__)

#: Spool folders (one per zygote, in the system temp dir) are named after their owner, so that
#: the next executor removes those a killed process left.
SPOOL_PREFIX = f"{RUN_DIR_PREFIX}warm-"
ZYGOTE_PATH = "/opt/wmrl-zygote.py"  # where the sandbox sees zygote.py
TOOLS = ("bwrap", "unshare", "setpriv", "nsenter", "mount")
# The keeper (root, in its own mount namespace): the per-run folders become a shared mount, so
# that binds made there later reach the sandbox; the runtime, which may sit under a home dir
# that uid 65534 cannot enter, is bound where it can. Then bwrap starts as uid 65534.
KEEPER_SCRIPT = r"""
mount --bind "$WMRL_SPOOL/runs" "$WMRL_SPOOL/runs" && mount --make-shared "$WMRL_SPOOL/runs" || exit 125
mount --bind "$WMRL_BASE" "$WMRL_SPOOL/base" && mount --bind "$WMRL_VENV" "$WMRL_SPOOL/venv" || exit 125
exec "$@"
"""
_UCRED = struct.Struct("3i")  # SCM_CREDENTIALS: pid, uid, gid


def _unprivileged(setpriv: str) -> list[str]:
    return [setpriv, f"--reuid={SANDBOX_ID}", f"--regid={SANDBOX_ID}", "--clear-groups", "--pdeathsig", "KILL", "--"]


@functools.cache
def _probe(bwrap: str, setpriv: str) -> None:
    """Fail early where uid 65534 cannot run bwrap or create the nested user namespaces a run needs."""
    cmd = [*_unprivileged(setpriv), bwrap, *isolation_args(nested_userns=True), "--remount-ro", "/", "--",
           "unshare", "--user", "true"]
    probe = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if probe.returncode != 0:
        raise SandboxUnavailableError(
            f"the warm sandbox cannot start here: {probe.stderr.strip()} (it needs unprivileged user "
            "namespaces, nested ones included; use make_executor('bwrap') where they are disabled)"
        )


class Zygote:
    """One warm sandbox: the keeper process, the zygote in it, its control socket and spool folder.

    Raises :class:`SandboxUnavailableError` (with the sandbox's own words) when it does not start.
    """

    def __init__(self, runtime: Runtime, modules: tuple[str, ...], tools: dict[str, str], start_timeout_s: float):
        self.runtime = runtime
        self._nsenter = tools["nsenter"]
        self._control: socket.socket | None = None
        self.keeper: subprocess.Popen | None = None
        # bwrap runs as uid 65534 and resolves its sources by path: the spool must be reachable.
        self.spool = Path(tempfile.mkdtemp(prefix=owned_prefix(SPOOL_PREFIX), dir=identity.traversable_temp_dir()))
        try:
            self._start(modules, tools, start_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start(self, modules: tuple[str, ...], tools: dict[str, str], start_timeout_s: float) -> None:
        self.spool.chmod(0o755)  # uid 65534 (bwrap) resolves its mount sources through it
        for name in ("runs", "base", "venv"):
            (self.spool / name).mkdir(mode=0o755)
        shutil.copyfile(Path(__file__).with_name("zygote.py"), self.spool / "zygote.py")
        self._control, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        control_fd = inside.fileno()  # the zygote finds its end at the same number
        spool = self.spool
        bwrap = [tools["bwrap"], *isolation_args(nested_userns=True),
                 *runtime_args(self.runtime, spool / "base", spool / "venv"),
                 "--ro-bind", str(spool / "zygote.py"), ZYGOTE_PATH, "--bind", str(spool / "runs"), SPOOL,
                 "--dir", WORKSPACE,  # each run mounts its own work dir, /tmp and /dev/shm over these
                 "--size", "4096", "--tmpfs", "/tmp", "--size", "4096", "--tmpfs", "/dev/shm",
                 "--chdir", WORKSPACE,  # as for a cold run, PWD says /workspace
                 "--remount-ro", "/dev", "--remount-ro", "/", "--",
                 f"{RUNTIME_MOUNT}/bin/python", ZYGOTE_PATH, str(control_fd), json.dumps(list(modules)),
                 filter_program().hex()]
        argv = [tools["unshare"], "--mount", "--propagation", "slave", "--", "/bin/sh", "-c", KEEPER_SCRIPT,
                "wmrl-keeper", *_unprivileged(tools["setpriv"]), *bwrap]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "WMRL_SPOOL": str(spool),
               "WMRL_BASE": str(self.runtime.base_prefix), "WMRL_VENV": str(self.runtime.venv)}
        with open(spool / "zygote.log", "ab") as log_file:
            try:
                self.keeper = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=log_file, pass_fds=(control_fd,), env=env,
                                               start_new_session=True)
            finally:
                inside.close()
        report = self._await_ready(time.monotonic() + start_timeout_s)
        expected = [0, 1, 2, control_fd]
        if report["threads"] != 1 or report["fds"] != expected:
            raise SandboxUnavailableError(
                f"the zygote is not safe to fork after its imports: {report['threads']} threads, open fds "
                f"{report['fds']} (expected 1 thread and fds {expected})"
            )
        if report["failed"]:
            log.warning("the warm sandbox's zygote could not preload %s", report["failed"])

    def _await_ready(self, deadline: float) -> dict:
        assert self._control is not None and self.keeper is not None
        while time.monotonic() < deadline:
            self._control.settimeout(0.2)
            try:
                message = self._control.recv(1 << 16)
            except TimeoutError:
                if self.keeper.poll() is not None:
                    break
                continue
            if message:
                self._control.settimeout(None)
                return json.loads(message)
            break
        raise SandboxUnavailableError(f"the warm sandbox did not start: {self.log_tail() or 'no output'}")

    def log_tail(self) -> str:
        """The end of what the keeper, bwrap and the zygote wrote to stderr."""
        with contextlib.suppress(OSError):
            return (self.spool / "zygote.log").read_bytes()[-2000:].decode(errors="replace").strip()
        return ""

    def alive(self, wait_s: float = 0.0) -> bool:
        """Whether the sandbox still runs (after waiting up to ``wait_s`` for it to end)."""
        if self.keeper is None:
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.keeper.wait(timeout=wait_s) if wait_s else self.keeper.poll()
        return self.keeper.returncode is None

    def bind_public(self, public_dir: Path, target: Path) -> str | None:
        """Bind ``public_dir`` on ``target`` (under the spool) in the keeper's namespace; why not, or None."""
        assert self.keeper is not None
        done = subprocess.run([self._nsenter, f"--mount=/proc/{self.keeper.pid}/ns/mnt", "mount", "--bind",
                               str(public_dir), str(target)], check=False, capture_output=True, text=True)
        return None if done.returncode == 0 else f"could not bind the public files: {done.stderr.strip()}"

    def spawn(self, job: dict, fds: list[int]) -> bool:
        """Ask the zygote for a run; False if it is gone."""
        assert self._control is not None
        try:
            socket.send_fds(self._control, [json.dumps(job).encode()], fds)
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """End the sandbox (runs in flight in it end too) and remove the spool."""
        if self._control is not None:
            self._control.close()
        if self.keeper is not None:
            with contextlib.suppress(ProcessLookupError):
                self.keeper.kill()  # bwrap's --die-with-parent ends the sandbox with it
            self.keeper.wait()
        force_remove(self.spool)


class WarmExecutor(RunExecutor):
    """Runs agent code forked from a preloaded zygote (see the module docstring for the isolation).

    Args:
        runtime: Path of the agent runtime venv (default: built by
            :func:`~wmrl_envs.sandbox.runtime.ensure_runtime` on first use).
        work_root: Where run folders are created (default: the system temp dir).
        use_cgroups: Put each run in its own cgroup when the v1 hierarchy is writable.
        handshake_timeout_s: How long a zygote may take to start a run before it counts as
            broken (killed, replaced, the run an ``INFRA_ERROR``).
        start_timeout_s: How long a zygote may take to start and preload.

    Raises :class:`SandboxUnavailableError` at construction when the host cannot run it (not
    root, a tool missing, no unprivileged user namespaces). The zygote of a runtime starts
    at its first run, or at :meth:`start`.
    """

    name = "warm"

    def __init__(self, runtime: Path | None = None, work_root: Path | None = None, use_cgroups: bool = True,
                 handshake_timeout_s: float = 60.0, start_timeout_s: float = 300.0) -> None:
        if os.geteuid() != 0:
            raise SandboxUnavailableError("the warm executor needs root (its mounts and run cgroups); use 'bwrap'")
        tools = {name: shutil.which(name) for name in TOOLS}
        missing = sorted(name for name, path in tools.items() if path is None)
        if missing:
            raise SandboxUnavailableError(f"the warm executor needs {', '.join(missing)}: install bubblewrap, "
                                          f"util-linux and mount ({INSTALL_HINT})")
        self._tools: dict[str, str] = {name: path for name, path in tools.items() if path is not None}
        _probe(self._tools["bwrap"], self._tools["setpriv"])
        # The work dir is a tmpfs the run mounts itself: no host-side mount namespace needed.
        super().__init__(runtime, work_root, use_cgroups, tmpfs_work_dir=False)
        for folder in {Path(tempfile.gettempdir()), identity.traversable_temp_dir()}:
            sweep_run_dirs(folder, SPOOL_PREFIX)  # spools of killed processes
        self.handshake_timeout_s = handshake_timeout_s
        self.start_timeout_s = start_timeout_s
        self._zygotes: dict[Runtime, Zygote] = {}
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_all, self._zygotes)

    @property
    def _namespaces(self) -> bool:
        return True

    @property
    def _private_mounts(self) -> bool:
        return True  # each run mounts its own sized work dir

    # -- public API -----------------------------------------------------------------------
    def start(self) -> Zygote:
        """Start the zygote of this executor's runtime now (building the runtime if needed)."""
        return self._zygote(self._ensure_runtime())

    def close(self) -> None:
        """Stop every zygote (runs in flight end as infrastructure failures)."""
        self._finalizer()

    # -- internals ------------------------------------------------------------------------
    def _zygote(self, runtime: Runtime) -> Zygote:
        """The live zygote of ``runtime``, started (or replaced) as needed."""
        with self._lock:
            current = self._zygotes.get(runtime)
            if current is not None and current.alive():
                return current
            if current is not None:
                log.warning("the warm sandbox's zygote died (%s); starting a new one",
                            current.log_tail() or "no output")
                current.stop()
            self._zygotes[runtime] = Zygote(runtime, preload_modules(runtime), self._tools, self.start_timeout_s)
            return self._zygotes[runtime]

    def _replace(self, broken: Zygote) -> None:
        with self._lock:
            if self._zygotes.get(broken.runtime) is broken:
                del self._zygotes[broken.runtime]
        broken.stop()

    def _launch(self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits,
                cgroup: cgroups.RunCgroup | None) -> Launch:
        stdout, stderr = OutputTail(limits.output_bytes), OutputTail(limits.output_bytes)
        try:
            zygote = self._zygote(runtime)
        except SandboxUnavailableError as exc:
            stderr.feed(f"{exc}\n".encode())
            return _unstarted(stdout, stderr, time.monotonic())
        start = time.monotonic()  # a zygote's start (its imports, once) is not the run's time
        folder = zygote.spool / "runs" / run.root.name
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        host, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Every message then carries its sender's pid as this (the host's) PID namespace sees it.
        host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        try:
            try:
                problem = self._prepare_folder(zygote, folder, run, public_dir)
                job = {"run": folder.name, "tmpfs_mb": limits.tmpfs_mb, "cpu_s": math.ceil(limits.cpu_s),
                       "as_bytes": limits.memory_mb << 20, "file_bytes": limits.file_mb << 20,
                       "user_limits": identity.per_run_user_limits(), "rlimits": identity.per_run_rlimits()}
                if problem is None and not zygote.spawn(job, [inside.fileno(), out_w, err_w]):
                    problem = "the warm sandbox's zygote is gone; the next run starts a new one"
            finally:  # the zygote holds its own copies now; ours would keep the pipes open
                for fd in (out_w, err_w):
                    os.close(fd)
                inside.close()
            init, problem = (None, problem) if problem else self._await_init(host, zygote)
            if init is None:
                _drain({out_r: stdout, err_r: stderr})
                if problem:
                    stderr.feed(f"{problem}\n".encode())
                return _unstarted(stdout, stderr, start)
            status = OutputTail(1 << 16)
            self._admit(init, host, cgroup)
            supervisor = _parent(init)
            host.setblocking(True)
            timed_out = pump_output(
                {out_r: stdout, err_r: stderr, host: status},
                deadline=start + limits.wall_s,
                on_timeout=lambda: self._on_timeout(cgroup, status, init),
                on_grace_expired=lambda: _kill(supervisor, init),
            )
            return _finished(stdout, stderr, status.text(), start, timed_out, zygote)
        finally:
            for fd in (out_r, err_r):
                os.close(fd)
            host.close()
            _collect_submission(folder, run)
            force_remove(folder)

    def _prepare_folder(self, zygote: Zygote, folder: Path, run: RunDir, public_dir: Path) -> str | None:
        """The run's spool folder: its script, the public files' bind and room for the submission."""
        folder.mkdir(mode=0o700)
        os.chown(folder, SANDBOX_ID, SANDBOX_ID)  # the supervisor writes the submission copy here
        shutil.copyfile(run.script, folder / "solution.py")
        (folder / "solution.py").chmod(0o444)
        (folder / "data").mkdir(mode=0o755)
        return zygote.bind_public(public_dir.resolve(), folder / "data")

    def _await_init(self, host: socket.socket, zygote: Zygote) -> tuple[int | None, str | None]:
        """The host pid of the run's init, from its first message; or why it never came (None:
        the supervisor ended without starting the run, and its stderr says why)."""
        host.settimeout(self.handshake_timeout_s)
        try:
            message, ancillary, _, _ = host.recvmsg(16, socket.CMSG_SPACE(_UCRED.size))
        except TimeoutError:
            self._replace(zygote)  # its sandbox goes, and with it this run's pipes
            problem = f"the warm sandbox's zygote did not start the run within {self.handshake_timeout_s:g} s"
            log.warning("%s; it is replaced", problem)
            return None, problem
        for level, kind, data in ancillary:
            if message == b"ready" and level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                return _UCRED.unpack(data[: _UCRED.size])[0], None
        return None, None

    def _admit(self, init: int, host: socket.socket, cgroup: cgroups.RunCgroup | None) -> None:
        """Move the run's init into its cgroups, then let it start the agent."""
        try:
            for procs in cgroup.procs_files if cgroup is not None else ():
                procs.write_text(str(init))
            host.send(b"go")
        except OSError:
            kill_pid_namespace(init)
            raise

    def _started(self, status_text: str) -> tuple[bool, int | None]:
        # The init reports "started" just before agent code runs; the supervisor reports the exit.
        # Once agent code may have run, an outcome the host cannot read is the run's own failure
        # (a cause on the host's side comes back as Launch.host_fault instead).
        exit_fields = _exit_fields(status_text)
        started = "started" in status_text.split("\n")
        return started, int(exit_fields[0]) if started and exit_fields is not None else None

    def _kill_sandbox(self, status_text: str, helper_pid: int) -> None:
        kill_pid_namespace(helper_pid)  # the run's init; its supervisor survives to copy the submission


def _exit_fields(status_text: str) -> list[str] | None:
    """The supervisor's ``exit CODE UTIME STIME MAXRSS`` line, split after the word; None if missing."""
    for line in status_text.split("\n"):
        if line.startswith("exit "):
            return line.split()[1:]
    return None


def _finished(stdout: OutputTail, stderr: OutputTail, status_text: str, start: float, timed_out: bool,
              zygote: Zygote | None = None) -> Launch:
    fields = _exit_fields(status_text)
    code, utime, stime, maxrss = (int(fields[0]), float(fields[1]), float(fields[2]), int(fields[3])) if fields \
        else (SETUP_FAILED, 0.0, 0.0, 0)
    host_fault = note = None
    for line in status_text.split("\n"):
        if line.startswith("spool-error "):
            host_fault = f"the warm sandbox could not copy the submission out: {line.split(' ', 1)[1]}"
    if fields is None and zygote is not None:
        if not zygote.alive(wait_s=1.0):  # the sandbox itself went away during the run (or is going)
            host_fault = f"the warm sandbox's zygote died during the run: {zygote.log_tail() or 'no output'}"
        else:
            note = "the run ended without reporting an exit status"
    return Launch(stdout=stdout, stderr=stderr, status_text=status_text, returncode=code,
                  rusage=resource.struct_rusage((utime, stime, maxrss) + (0,) * 13),
                  wall_s=time.monotonic() - start, timed_out=timed_out, host_fault=host_fault, note=note)


def _unstarted(stdout: OutputTail, stderr: OutputTail, start: float) -> Launch:
    return _finished(stdout, stderr, "", start, timed_out=False)


def _drain(streams: dict[int, OutputTail]) -> None:
    """Read what a run that never started wrote, for at most ``KILL_GRACE_S`` (its writers are gone or going)."""
    deadline = time.monotonic() + KILL_GRACE_S
    streams = dict(streams)
    while streams and (left := deadline - time.monotonic()) > 0:
        for fd in select.select(list(streams), [], [], left)[0]:
            data = os.read(fd, 1 << 16)
            if data:
                streams[fd].feed(data)
            else:
                del streams[fd]


def _collect_submission(folder: Path, run: RunDir) -> None:
    """Move the supervisor's copy of the submission (a regular file it made) into the run folder."""
    copy = folder / "submission.csv"
    if copy.is_file() and not copy.is_symlink():
        shutil.move(copy, run.submission)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


def _kill(*pids: int | None) -> None:
    for pid in pids:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _stop_all(zygotes: dict[Runtime, Zygote]) -> None:
    for zygote in list(zygotes.values()):
        zygote.stop()
    zygotes.clear()
