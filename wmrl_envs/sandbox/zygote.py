"""The warm executor's zygote: imports the runtime's heavy modules once, then forks one run per request.

It runs inside the warm sandbox (:mod:`wmrl_envs.sandbox.warm`) as
``python zygote.py CONTROL_FD MODULES_JSON``, with the runtime venv's interpreter and the agent's
environment, and never runs agent code itself. A request on the control socket is a JSON job
with three fds (the run's status socket, stdout and stderr); for each one::

    zygote        preloaded, single-threaded; forks and goes back to waiting
      supervisor  new user namespace (twice, see _isolate), then new mount, pid, net, ipc and
                  uts namespaces; mounts the run's own /workspace, /tmp and /dev/shm; after the
                  run, copies submission.csv out and reports the exit status
        init      PID 1 of the run: a fresh /proc, waits while the host moves it into the run's
                  cgroups, drops every capability, reaps, exits with the agent's status
          agent   fresh fds, rlimits, RNGs, signal dispositions, argv and __main__; it leaves
                  the zygote's loop and runs solution.py at this module's top level, so the
                  interpreter ends it exactly as it ends ``python solution.py``

Standard library only: the runtime venv has no WMRL.
"""

import builtins
import ctypes
import fcntl
import gc
import importlib
import importlib.machinery
import json
import os
import random
import resource
import select
import signal
import socket
import stat
import struct
import sys
import types

WORKSPACE = "/workspace"
SCRIPT = f"{WORKSPACE}/solution.py"
SPOOL = "/opt/wmrl-runs"  # the host's per-run folders (hidden from each run once it is set up)
SANDBOX_ID = 65534
SETUP_FAILED = 125

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class _SeccompProgram(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source, target, fstype, flags, data=None) -> None:
    encode = lambda text: text.encode() if text is not None else None  # noqa: E731
    _check(libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


# ---------------------------------------------------------------------- zygote
def _zygote(argv: list[str]) -> str:
    """Preload, report, serve; returns only in an agent process (the script's path)."""
    control = socket.socket(fileno=int(argv[1]))
    # A fresh interpreter's dispositions, taken before any preloaded module could change them.
    dispositions = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}
    seccomp_program = bytes.fromhex(argv[3])
    failed = {}
    for name in json.loads(argv[2]):
        try:
            importlib.import_module(name)
        except Exception as exc:  # the host reports it; the zygote still serves
            failed[name] = f"{type(exc).__name__}: {exc}"
    gc.collect()
    gc.freeze()  # a run's collections then leave the preloaded objects' pages shared, uncopied
    fds = []
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:  # the listing's own folder fd, closed by now
            continue
    threads = len(os.listdir("/proc/self/task"))
    control.send(json.dumps({"failed": failed, "threads": threads, "fds": fds}).encode())
    if threads != 1:  # never fork a threaded process; the host refuses this zygote too
        os._exit(SETUP_FAILED)
    return _serve(control, {s: h for s, h in dispositions.items() if h is not None}, seccomp_program)


def _serve(control: socket.socket, dispositions: dict, seccomp_program: bytes) -> str:
    # Each finished supervisor is reaped at once (through its pidfd): a zombie would keep its
    # run's namespaces, and what the kernel keeps in them, alive while the pool is idle.
    supervisors: dict[int, int] = {}  # pidfd -> pid
    while True:
        ready = select.select([control, *supervisors], [], [])[0]
        for pidfd in [fd for fd in ready if fd in supervisors]:
            os.waitpid(supervisors.pop(pidfd), 0)
            os.close(pidfd)
        if control not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
        if not message:  # the host closed the control socket
            os._exit(0)
        job = json.loads(message)
        sys.stdout.flush()  # nothing buffered may reach a run's output
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            control.close()
            for pidfd in supervisors:
                os.close(pidfd)
            return _supervise(job, fds, dispositions, seccomp_program)
        supervisors[os.pidfd_open(pid)] = pid
        for fd in fds:
            os.close(fd)


def _fail(err_fd: int, what: str, exc: BaseException) -> None:
    """Say on the run's stderr why it could not start, and end this process."""
    try:
        os.write(err_fd, f"wmrl-zygote: {what}: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(SETUP_FAILED)


# ---------------------------------------------------------------------- supervisor
def _supervise(job: dict, fds: list[int], dispositions: dict, seccomp_program: bytes) -> str:
    """The run's supervisor; returns only in the agent process.

    After the run it always reports ``exit ...``: nothing agent code leaves behind (a folder, a
    FIFO or a link named ``submission.csv``) can keep that line from the host, which would read
    its absence as the sandbox's failure. Only a failure to write the host's spool is reported
    as the host's (``spool-error``).
    """
    status_fd, out_fd, err_fd = fds
    try:
        spool = _isolate(job)
        pid = os.fork()
    except BaseException as exc:
        _fail(err_fd, "could not set up the run", exc)
    if pid == 0:
        os.close(spool)
        return _init(job, status_fd, out_fd, err_fd, dispositions, seccomp_program)
    try:
        os.close(out_fd)
        os.close(err_fd)
        _, wait_status, usage = os.wait4(pid, 0)
        # Every process of the run is gone now: the kernel empties a PID namespace when its init ends.
        spool_error = _copy_submission(spool)
        if spool_error:
            os.write(status_fd, f"spool-error {spool_error}\n".encode())
        code = _shell_code(wait_status)
        os.write(status_fd, f"exit {code} {usage.ru_utime} {usage.ru_stime} {usage.ru_maxrss}\n".encode())
    finally:
        os._exit(0)


def _isolate(job: dict) -> int:
    """Give this process the run's namespaces and filesystem view; a fd of its spool folder."""
    _enter_user_namespace()
    # Nested user namespaces are refused below this one (the kernel counts this limit against
    # every ancestor), so agent code cannot regain capabilities in a namespace of its own.
    _write("/proc/sys/user/max_user_namespaces", "1")
    # Every run is the host's uid 65534, and the kernel counts some objects per uid across all of
    # them: each run gets its share, so that no run can take a concurrent run's.
    for name, value in job["user_limits"].items():
        _write(f"/proc/sys/user/{name}", str(value))
    _enter_user_namespace()
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # the host's later mounts stay out of this run
    spool = os.open(f"{SPOOL}/{job['run']}", os.O_RDONLY | os.O_DIRECTORY)
    tmpfs = f"size={job['tmpfs_mb']}m"
    owner = f"uid={SANDBOX_ID},gid={SANDBOX_ID}"
    _mount("wmrl-work", WORKSPACE, "tmpfs", MS_NOSUID | MS_NODEV, f"{tmpfs},mode=0755,{owner}")
    os.mkdir(f"{WORKSPACE}/data", 0o755)
    os.close(os.open(SCRIPT, os.O_WRONLY | os.O_CREAT, 0o644))
    _bind_read_only(f"{SPOOL}/{job['run']}/data", f"{WORKSPACE}/data")
    _bind_read_only(f"{SPOOL}/{job['run']}/solution.py", SCRIPT)
    for folder in ("/tmp", "/dev/shm"):
        _mount("wmrl-tmp", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"{tmpfs},mode=1777")
    # A devpts instance of the run's own (/dev/ptmx links into it): no run reaches another's ptys.
    _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    _mount("wmrl-hidden", SPOOL, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
    _loopback_up()  # as bwrap does: a loopback of the run's own, reachable from nowhere else
    return spool


def _enter_user_namespace() -> None:
    """A new user namespace that maps this process's ids to themselves (full capabilities in it)."""
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWUSER), "unshare user namespace")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND)
    # A mount from a more privileged namespace keeps its nosuid/nodev/noexec/atime flags locked:
    # a read-only remount must repeat them or the kernel refuses it.
    flags = os.statvfs(target).f_flag
    keep = flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if flags & os.ST_NOATIME:
        keep |= MS_NOATIME
    elif flags & os.ST_RELATIME:
        keep |= MS_RELATIME
    else:
        keep |= MS_STRICTATIME
    if flags & os.ST_NODIRATIME:
        keep |= MS_NODIRATIME
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _copy_submission(spool: int) -> str | None:
    """Copy ``submission.csv`` into the spool folder if it is a regular file (never a folder, link
    or FIFO); anything else, or a file that cannot be read, is no submission. Returns why the
    spool could not be written (the host's fault), else None."""
    try:
        source = os.open(f"{WORKSPACE}/submission.csv", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(source).st_mode):
            return None
        try:
            target = os.open("submission.csv", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=spool)
        except OSError as exc:
            return f"could not create the submission copy: {exc}"
        try:
            while True:
                try:
                    chunk = os.read(source, 1 << 20)
                except OSError:  # the run's file, the run's failure: no submission
                    os.unlink("submission.csv", dir_fd=spool)
                    return None
                if not chunk:
                    return None
                os.write(target, chunk)
        except OSError as exc:
            return f"could not write the submission copy: {exc}"
        finally:
            os.close(target)
    finally:
        os.close(source)


def _shell_code(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else 128 - code


# ---------------------------------------------------------------------- init
def _init(job: dict, status_fd: int, out_fd: int, err_fd: int, dispositions: dict, seccomp_program: bytes) -> str:
    """PID 1 of the run; returns only in the agent process.

    Its signal handlers are all the default ones: the kernel then drops every signal that agent
    code sends to its PID 1, so no script can end its init early (before or after "started")
    and make its own run look like the sandbox's failure. Agent code runs only once "started"
    has been sent: the agent waits for this process's word that it was.
    """
    try:
        for signum in dispositions:
            signal.signal(signum, signal.SIG_IGN if signum == signal.SIGPIPE else signal.SIG_DFL)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        os.setsid()
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # agent code may not ptrace or read its init
        os.write(status_fd, b"ready")  # the host learns this process's pid from the credentials
        if os.read(status_fd, 16) != b"go":  # the host moved it into the run's cgroups, or gave up
            os._exit(SETUP_FAILED)
        _check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup namespace")  # rooted at the run's group
        _drop_capabilities()
        _install_seccomp(seccomp_program)
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
    except BaseException as exc:
        _fail(err_fd, "could not start the run", exc)
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        return _agent(job, out_fd, err_fd, ready_w, go_r, dispositions)
    try:
        for fd in (ready_w, go_r, out_fd, err_fd):
            os.close(fd)
        started = os.read(ready_r, 1) == b"1"
        os.close(ready_r)
        os.write(status_fd, b"started\n" if started else b"failed\n")
        os.close(status_fd)
        if started:
            os.write(go_w, b"1")
        os.close(go_w)
        while True:
            child, wait_status = os.wait()
            if child == pid:
                os._exit(_shell_code(wait_status))
    finally:
        os._exit(SETUP_FAILED)


def _drop_capabilities() -> None:
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a bounding capability")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    _check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")


def _install_seccomp(program: bytes) -> None:
    """Install the host's seccomp filter (``wmrl_envs/sandbox/seccomp.py``); it needs no_new_privs."""
    instructions = ctypes.create_string_buffer(program, len(program))
    fprog = _SeccompProgram(len(program) // 8, ctypes.addressof(instructions))
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "install seccomp")


# ---------------------------------------------------------------------- agent
def _agent(job: dict, out_fd: int, err_fd: int, ready_w: int, go_r: int, dispositions: dict) -> str:
    """Make this process look like a fresh ``python solution.py``; the script's path."""
    try:
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        keep = sorted((ready_w, go_r))
        os.closerange(3, keep[0])  # nothing of the zygote's reaches agent code
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir(WORKSPACE)
        for signum, handler in dispositions.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        _fresh_interpreter_state()
        limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, job["cpu_s"]),
                  (resource.RLIMIT_FSIZE, job["file_bytes"]), (resource.RLIMIT_AS, job["as_bytes"])]
        limits += [(getattr(resource, name), value) for name, value in job["rlimits"].items()]
        for limit, value in limits:
            resource.setrlimit(limit, (value, value))
        os.write(ready_w, b"1")
        os.close(ready_w)
        if os.read(go_r, 1) != b"1":  # init could not report the start: no agent code runs
            os._exit(SETUP_FAILED)
        os.close(go_r)
    except BaseException as exc:
        _fail(2, "could not start agent code", exc)
    return SCRIPT


def _fresh_interpreter_state() -> None:
    """What a fresh interpreter would differ in: RNG states, argv, sys.path[0], ``__main__``."""
    random.seed()  # from os.urandom, as at interpreter start-up
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # the legacy global RandomState, from os.urandom as at import
    process = sys.modules.get("multiprocessing.process")
    if process is not None:  # its authentication key is drawn at import
        process.current_process().authkey = os.urandom(32)
    sys.argv[:] = ["solution.py"]
    sys.orig_argv[:] = ["python", "solution.py"]
    sys.path[0] = WORKSPACE
    importlib.invalidate_caches()
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=SCRIPT, __cached__=None, __package__=None, __spec__=None, __annotations__={},
                         __builtins__=builtins, __loader__=importlib.machinery.SourceFileLoader("__main__", SCRIPT))
    sys.modules["__main__"] = main
    sys.excepthook = _excepthook


def _excepthook(kind, value, traceback) -> None:
    """Print an uncaught exception as ``python solution.py`` would: without this file's frame."""
    while traceback is not None and traceback.tb_frame.f_code.co_filename == __file__:
        traceback = traceback.tb_next
    sys.__excepthook__(kind, value.with_traceback(traceback), traceback)  # it prints value's own


if __name__ == "__main__":
    _script = _zygote(sys.argv)  # returns only in an agent process
    with open(_script, "rb") as _file:
        _source = _file.read()
    exec(compile(_source, _script, "exec", dont_inherit=True), sys.modules["__main__"].__dict__)
