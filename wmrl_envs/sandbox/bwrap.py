"""The default executor: agent code in a bubblewrap sandbox.

Inside, agent code sees a read-only root made only of the OS runtime (``/usr`` and the
``/lib*``, ``/bin`` links), the dynamic-linker cache, the base interpreter's prefix (its
site-packages hidden), the dedicated runtime venv at ``/opt/wmrl-runtime``, and::

    /workspace              the run's writable work dir (cwd)
    /workspace/data         the task's public files, read-only
    /workspace/solution.py  the agent's script, read-only
    /tmp, /dev/shm          separate tmpfs mounts of ``limits.tmpfs_mb`` each

The work dir's total size is bounded too: when the host runs as root, the launcher mounts a
``limits.tmpfs_mb`` tmpfs on it in a private mount namespace (its pages also count against
the memory cgroup, and it vanishes with the run); otherwise it is a host folder whose size is
checked after the run (a run that overflowed it is an error). ``RLIMIT_FSIZE`` bounds single
files either way.

Every namespace is unshared (no network at all, not even the host's loopback), the process
runs as uid/gid 65534 with no capabilities and cannot create nested user namespaces, and
the environment is rebuilt from scratch. Private answers, the repository, the project's own
environment and home directories are never mounted; the one exception is the base
interpreter's prefix, which may live in a home directory (pyenv), with its site-packages hidden.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import identity
from wmrl_envs.sandbox.launcher import STATUS_FD, HelperExecutor, RunDir, agent_env, kill_group
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.runtime import Runtime
from wmrl_envs.sandbox.seccomp import filter_program
from wmrl_envs.sandbox.sweep import force_remove, sweep_run_dirs

log = logging.getLogger(__name__)

WORKSPACE = "/workspace"
RUNTIME_MOUNT = "/opt/wmrl-runtime"
SANDBOX_ID = "65534"  # nobody/nogroup
OS_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")
# PID 1 of the sandbox: a shell that runs the agent as its child. bwrap's parent reaps it, so
# the agent's CPU time reaches the host through wait4 even without a cpuacct cgroup (bwrap's
# own init is never reaped). The trailing ``exit`` keeps dash from exec'ing python as PID 1,
# which would give agent code init's odd signal semantics. When PID 1 exits, the kernel kills
# every process left in the sandbox.
AGENT_COMMAND = ["/bin/sh", "-c", 'python solution.py; exit "$?"']
# On a wall-clock kill, how long PID 1 gets to reap the agent before it is killed too.
REAP_WAIT_S = 0.5
INSTALL_HINT = "install it with `apt-get install bubblewrap` (or run `bash scripts/setup.sh`)"
SECCOMP_FD = "9"  # the helper opens the run's filter file on it (see launcher.HELPER_SCRIPT)
SECCOMP_FILE = "seccomp.bpf"


def isolation_args(nested_userns: bool = False) -> list[str]:
    """Namespaces, identity and the read-only OS runtime: the part every run shares.

    ``nested_userns`` leaves nested user namespaces allowed: the warm executor's zygote needs
    them to isolate each run, and forbids them to the run itself.
    """
    args = [
        "--unshare-all",
        "--unshare-user",  # --unshare-all only *tries* the user namespace
        *([] if nested_userns else ["--disable-userns"]),  # nested ones would regain capabilities
        "--uid", SANDBOX_ID,
        "--gid", SANDBOX_ID,
        "--cap-drop", "ALL",  # bwrap started by root would otherwise keep every capability
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",  # our own trusted init, see AGENT_COMMAND
        "--hostname", "sandbox",
        "--clearenv",
    ]  # fmt: skip
    for path in OS_DIRS:
        if os.path.islink(path):  # merged-/usr systems: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args + ["--proc", "/proc", "--dev", "/dev"]


@functools.cache
def _probe(bwrap: str) -> None:
    """Fail early, with bwrap's own words, where it cannot create the namespaces."""
    cmd = [bwrap, *isolation_args(), "--remount-ro", "/", "--", "/bin/true"]
    probe = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if probe.returncode != 0:
        raise SandboxUnavailableError(
            f"bubblewrap cannot create its sandbox here: {probe.stderr.strip()} "
            "(bwrap >= 0.8 and unprivileged user namespaces, or root, are required)"
        )


class BwrapExecutor(HelperExecutor):
    """Runs agent code in a bubblewrap sandbox (see the module docstring for what it sees).

    Raises :class:`SandboxUnavailableError` at construction when ``bwrap`` is missing or
    cannot create namespaces on this machine. Per run, rlimits and the seccomp filter
    (:mod:`~wmrl_envs.sandbox.seccomp`) always apply; a per-run cgroup (memory, pids, cpuacct)
    and a sized tmpfs work dir apply where the host allows, as recorded in
    :attr:`ExecutionResult.enforced`.

    Started by root, bwrap would map agent code to the host's root (no capabilities, but root's
    keyrings and per-uid budgets, and root after any escape). So as root each run's bwrap starts
    as a host uid of its own (drawn from :data:`~wmrl_envs.sandbox.identity.RUN_UIDS`), never 0.
    That uid may not reach the run's sources by their own paths (a private ``TMPDIR``, a runtime
    under root's home), so the helper binds them, in its private mount namespace, into a view
    folder that every uid can enter (:func:`~wmrl_envs.sandbox.identity.traversable_temp_dir`).
    Where unprivileged user namespaces are refused, it warns and keeps root.
    """

    name = "bwrap"

    def __init__(
        self,
        runtime: Path | None = None,
        work_root: Path | None = None,
        use_cgroups: bool = True,
        tmpfs_work_dir: bool = True,
    ) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailableError(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        _probe(bwrap)
        self.bwrap = bwrap
        as_root = os.geteuid() == 0
        super().__init__(runtime, work_root, use_cgroups, tmpfs_work_dir)
        self._seccomp = filter_program()
        self._unprivileged = as_root and self._unshare is not None and self._setpriv is not None
        if self._unprivileged:
            why = _unprivileged_refused(bwrap, self._setpriv)
            if why:
                log.warning("bwrap: agent code runs as the host's root (no capabilities): %s", why)
                self._unprivileged = False
            else:
                self._views = identity.traversable_temp_dir()
                sweep_run_dirs(self._views)  # views of killed processes

    @property
    def _namespaces(self) -> bool:
        return True

    def _view(self, run: RunDir) -> Path:
        """Where the helper binds the run's sources for its unprivileged sandbox (named after the run)."""
        return self._views / f"{run.root.name}.view"

    def _prepare(self, run: RunDir, public_dir: Path) -> None:
        (run.root / SECCOMP_FILE).write_bytes(self._seccomp)
        if self._unprivileged:
            view = self._view(run)
            view.mkdir(mode=0o711)  # the run's uid enters it, and lists nothing
            view.chmod(0o711)
            for mount_point in ("work", "data", "base", "venv"):
                (view / mount_point).mkdir()
            (view / "solution.py").touch()

    def _finish(self, run: RunDir) -> None:
        if self._unprivileged:
            force_remove(self._view(run))  # its mounts ended with the helper's mount namespace

    def _helper_env(self, runtime: Runtime, run: RunDir, public_dir: Path) -> dict[str, str]:
        env = {"WMRL_SECCOMP": str(run.root / SECCOMP_FILE)}
        if self._unprivileged:
            env |= {"WMRL_RUN_UID": str(identity.run_uid(run.root.name)), "WMRL_VIEW": str(self._view(run)),
                    "WMRL_PUBLIC": str(public_dir.resolve()), "WMRL_BASE": str(runtime.base_prefix),
                    "WMRL_VENV": str(runtime.venv)}
        return env

    def _command(self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits) -> list[str]:
        tmpfs_bytes = str(limits.tmpfs_mb << 20)
        work, script = run.work, run.script
        sources = (None, None)
        if self._unprivileged:  # the helper binds them all into the run's view
            view = self._view(run)
            work, script, public_dir, sources = view / "work", view / "solution.py", view / "data", \
                (view / "base", view / "venv")
        args = [self.bwrap, *isolation_args(), *runtime_args(runtime, *sources)]
        # Sized tmpfs everywhere: tmpfs pages escape RLIMIT_AS.
        args += ["--size", tmpfs_bytes, "--tmpfs", "/tmp", "--size", tmpfs_bytes, "--tmpfs", "/dev/shm"]
        args += ["--bind", str(work), WORKSPACE, "--ro-bind", str(public_dir), f"{WORKSPACE}/data"]
        args += ["--ro-bind", str(script), f"{WORKSPACE}/solution.py"]
        args += ["--chdir", WORKSPACE, "--remount-ro", "/dev", "--remount-ro", "/", "--seccomp", SECCOMP_FD]
        args += ["--json-status-fd", str(STATUS_FD), "--", *AGENT_COMMAND]
        if self._unprivileged:
            uid = str(identity.run_uid(run.root.name))
            args = [str(self._setpriv), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *args]
        return args

    def _started(self, status_text: str) -> tuple[bool, int | None]:
        # bwrap writes "exit-code" only when its setup finished and the command was executed.
        status = _json_documents(status_text)
        exit_code = status.get("exit-code")
        return exit_code is not None, exit_code

    def _kill_sandbox(self, status_text: str, helper_pid: int) -> None:
        init = _json_documents(status_text).get("child-pid")
        if init is None:  # bwrap never got as far as starting the sandbox
            kill_group(helper_pid)
            return
        kill_pid_namespace(init)  # the helper survives to copy the submission out


@functools.cache
def _unprivileged_refused(bwrap: str, setpriv: str) -> str | None:
    """Why an unprivileged uid cannot start bwrap here (user namespaces refused), or None."""
    uid = str(identity.RUN_UIDS[0])
    cmd = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", bwrap, *isolation_args(),
           "--remount-ro", "/", "--", "/bin/true"]
    probe = subprocess.run(cmd, check=False, capture_output=True, text=True)
    return None if probe.returncode == 0 else probe.stderr.strip() or f"exit status {probe.returncode}"


def runtime_args(runtime: Runtime, base_source: Path | None = None, venv_source: Path | None = None) -> list[str]:
    """The agent's environment and interpreter: ``--setenv``s, the base interpreter's prefix with
    its site-packages hidden, and the runtime venv at :data:`RUNTIME_MOUNT`.

    ``base_source`` and ``venv_source`` are where to bind the two from (default: their own paths).
    """
    env = agent_env(path=f"{RUNTIME_MOUNT}/bin:/usr/local/bin:/usr/bin:/bin", home="/tmp", tmpdir="/tmp")
    args = []
    for key, value in env.items():
        args += ["--setenv", key, value]
    # The venv's python is a symlink into the base prefix, so mount it at the same path,
    # but hide its site-packages: agent code must not import the host's packages.
    args += ["--ro-bind", str(base_source or runtime.base_prefix), str(runtime.base_prefix)]
    for site in runtime.base_site_packages:
        if site.is_dir():
            args += ["--size", "4096", "--tmpfs", str(site), "--remount-ro", str(site)]
    return args + ["--ro-bind", str(venv_source or runtime.venv), RUNTIME_MOUNT]


def kill_pid_namespace(init: int) -> None:
    """Kill everything in the PID namespace whose init has host pid ``init``.

    PID 1's children go first, and PID 1 gets a moment to reap them, so that their CPU time is
    accounted even without a cgroup. Then PID 1 is killed: the kernel kills everything left in
    the namespace, double-forked daemons included.
    """
    for pid in _children(init):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + REAP_WAIT_S
    while _running(init) and time.monotonic() < deadline:
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(init, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    """Host pids of ``pid``'s children (empty if it is gone)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _json_documents(text: str) -> dict:
    """Merge the JSON documents bwrap wrote one after another (a cut-off last one is ignored)."""
    decoder = json.JSONDecoder()
    merged: dict = {}
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return merged
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return merged
        merged.update(doc)
