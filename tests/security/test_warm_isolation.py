"""What a warm sandbox could carry from one run to the next: nothing.

The warm executor forks every run from one long-lived zygote, so a run that tampers with what
it shares with later runs (files, processes, module state, environment, signal dispositions,
shared memory, its parent) must leave the next run on the same zygote as a fresh one finds it.
Every test runs against each contained executor, so the warm one is held to the cold one's
standard; the tests at the end are about the zygote itself (warm only).
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from wmrl_envs.sandbox import ExecutionStatus, ExecutorPool, make_executor
from wmrl_envs.sandbox.bwrap import _children

pytestmark = pytest.mark.security

SYSV_KEY = 0x574D524C  # "WMRL"
# Everything a run could see of an earlier run's leftovers, as JSON on stdout.
PROBE = f"""
import ctypes, json, os, resource, signal, sys
import numpy as np, pandas as pd
libc = ctypes.CDLL(None, use_errno=True)
print(json.dumps({{
    "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")), "work": sorted(os.listdir(".")),
    "processes": sum(p.isdigit() for p in os.listdir("/proc")),
    "fds": sorted(os.listdir("/proc/self/fd")), "threads": len(os.listdir("/proc/self/task")),
    "env": dict(os.environ), "umask": os.umask(0o022), "cwd": os.getcwd(), "argv": sys.argv, "path0": sys.path[0],
    "signals": {{int(s): str(signal.getsignal(s)) for s in signal.valid_signals()
                if s not in (signal.SIGKILL, signal.SIGSTOP)}},
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "numpy": [float(np.mean([1.0, 2.0])), np.pi, hasattr(np, "leaked"), float(np.linalg.norm([3.0, 4.0]))],
    "pandas": [hasattr(pd, "leaked"), pd.DataFrame({{"a": [1, 2]}})["a"].sum().item()],
    "marked_modules": sorted(n for n, m in list(sys.modules.items()) if getattr(m, "wmrl_leaked", False)),
    "builtins": hasattr(__builtins__, "leaked"), "excepthook": sys.excepthook.__module__,
    "sysv_shm": libc.shmget({SYSV_KEY}, 0, 0) >= 0,
    "rlimits": [resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE)],
    "no_capabilities": open("/proc/self/status").read().count("CapEff:\\t0000000000000000"),
}}))
"""
# Leaves all it can behind: files, processes, fds, module state, environment, signals, shared memory.
LEAVE = f"""
import builtins, ctypes, os, signal, subprocess, sys, time
import numpy as np, pandas as pd
from multiprocessing import shared_memory
for path in ("/tmp/leak", "/dev/shm/leak", "leak"):
    open(path, "w").write("left behind")
np.mean = lambda *args, **kwargs: 42.0
np.pi, np.leaked, pd.leaked, builtins.leaked = 3.0, True, True, True
for module in list(sys.modules.values()):
    try:
        module.wmrl_leaked = True
    except Exception:
        pass
sys.path.insert(0, "/tmp")
sys.excepthook = lambda *args: None
os.environ["WMRL_LEAK"] = "1"
os.putenv("WMRL_LEAK2", "1")
os.umask(0o077)
signal.signal(signal.SIGTERM, lambda *args: None)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR2}})
shared = shared_memory.SharedMemory(name="wmrl_leak", create=True, size=4096)
libc = ctypes.CDLL(None, use_errno=True)
print("SYSV", libc.shmget({SYSV_KEY}, 4096, 0o1000 | 0o666))  # IPC_CREAT
files = [open("/dev/null") for _ in range(20)]
subprocess.Popen(["sh", "-c", "sleep 60", "{{marker}}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sh", ["sh", "-c", "sleep 60", "{{marker}}"])
time.sleep(0.5)
print("LEFT", flush=True)
"""
# Goes for its parent (the run's init), the zygote beyond it and what the zygote shares with runs.
TAMPER = """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):  # the kernel drops these for PID 1
    os.kill(os.getppid(), sig)
print("PTRACE", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH
for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/root/", "/opt/wmrl-zygote.py"):
    try:
        open(path, "r+b").write(b"x")
        print("LEAK write", path)
    except OSError as exc:
        print("BLOCKED write", path, type(exc).__name__)
print("RUNS", os.listdir("/opt/wmrl-runs") if os.path.isdir("/opt/wmrl-runs") else "absent")
print("UMOUNT", libc.umount2(b"/opt/wmrl-runs", 2), libc.umount2(b"/proc", 2), libc.umount2(b"/tmp", 2))
print("TAMPERED", flush=True)
"""


def probe(arena) -> dict:
    result = arena.run(PROBE)
    assert result.status is ExecutionStatus.OK, result
    return json.loads(result.stdout)


def zygote_of(arena):
    """The warm executor's live zygote (None for a cold executor): the same object means the same zygote."""
    return arena.executor.start() if arena.executor.name == "warm" else None


def test_a_run_leaves_nothing_for_the_next(arena):
    zygote = zygote_of(arena)
    before = probe(arena)
    left = arena.run(LEAVE.replace("{marker}", arena.marker))
    assert left.status is ExecutionStatus.OK, left
    assert "LEFT" in left.stdout
    assert arena.survivors() == []  # the background processes died with the run
    after = probe(arena)
    assert after == before
    assert before["tmp"] == before["shm"] == [] and before["work"] == ["data", "solution.py"]
    assert before["numpy"] == [1.5, 3.141592653589793, False, 5.0] and not before["builtins"]
    assert before["marked_modules"] == [] and "WMRL_LEAK" not in after["env"] and not after["sysv_shm"]
    # A fresh interpreter's SIGINT: Python's handler, unless SIGINT was ignored when this one
    # started (a job started with `&` and no job control), which every child inherits. A Docker
    # container is no child of this process: dockerd starts it, so it never inherits that.
    inherits = arena.executor.name != "docker" and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    fresh_sigint = signal.SIG_IGN if inherits else signal.default_int_handler
    assert before["signals"][str(int(signal.SIGINT))] == str(fresh_sigint)
    assert before["signals"][str(int(signal.SIGTERM))] == str(signal.SIG_DFL) and before["blocked"] == []
    assert zygote_of(arena) is zygote  # the same zygote served every run


def test_unseeded_random_numbers_differ_between_runs(arena):
    code = "import random, numpy as np\nprint(random.random(), np.random.rand(), np.random.randint(1 << 30))"
    outputs = []
    for _ in range(3):
        result = arena.run(code)
        assert result.status is ExecutionStatus.OK, result
        outputs.append(result.stdout.split())
    for i in range(3):  # no generator repeats another run's draw
        assert len({out[i] for out in outputs}) == 3, outputs


def test_concurrent_runs_cannot_reach_each_other(arena):
    listener = """
    import os, socket, time
    tcp = socket.create_server(("127.0.0.1", 45873))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\\0wmrl-leak")
    unix.listen()
    open("/tmp/mine", "w").write("x")
    open("/dev/shm/mine", "w").write("x")
    print("LISTENING", os.getpid(), flush=True)
    time.sleep(4)
    """
    prober = """
    import os, socket, time
    time.sleep(1.5)
    for family, address in ((socket.AF_INET, ("127.0.0.1", 45873)), (socket.AF_UNIX, "\\0wmrl-leak")):
        try:
            socket.socket(family).connect(address)
            print("LEAK", address)
        except OSError as exc:
            print("BLOCKED", type(exc).__name__)
    print("SEEN", os.listdir("/tmp"), os.listdir("/dev/shm"), sorted(p for p in os.listdir("/proc") if p.isdigit()))
    """
    with ExecutorPool(arena.executor, workers=2) as pool:
        first = pool.submit(textwrap.dedent(listener), arena.task, arena.limits)
        second = pool.submit(textwrap.dedent(prober), arena.task, arena.limits)
        results = [first.result(), second.result()]
    assert all(r.status is ExecutionStatus.OK for r in results), results
    assert "LISTENING" in results[0].stdout
    assert "LEAK" not in results[1].stdout and results[1].stdout.count("BLOCKED") == 2
    assert "SEEN [] [] " in results[1].stdout


# -- the zygote itself (warm only) -------------------------------------------------------------


@pytest.fixture
def warm_only(arena):
    if arena.executor.name != "warm":
        pytest.skip("about the warm executor's zygote")


def _zygote_pid(zygote) -> int:
    (pid,) = _children(zygote.keeper.pid)  # bwrap's only child: the zygote, PID 1 of its sandbox
    return pid


def test_a_dead_zygote_is_replaced(arena, warm_only):
    zygote = arena.executor.start()
    os.kill(_zygote_pid(zygote), signal.SIGKILL)
    zygote.keeper.wait(timeout=10)  # bwrap ends with its child
    result = arena.run("print('fresh')")
    assert result.status is ExecutionStatus.OK, result
    assert result.stdout == "fresh\n"
    assert arena.executor.start() is not zygote
    assert not zygote.spool.exists()


def test_a_stuck_zygote_is_replaced_and_its_run_is_an_infra_error(arena, warm_only, tmp_path):
    executor = make_executor("warm", work_root=arena.work_root, handshake_timeout_s=3)
    try:
        zygote = executor.start()
        os.kill(_zygote_pid(zygote), signal.SIGSTOP)
        start = time.monotonic()
        stuck = executor.run("print('never')", arena.task, arena.limits)
        assert stuck.status is ExecutionStatus.INFRA_ERROR, stuck
        assert "did not start the run within 3 s" in stuck.error
        assert stuck.returncode is None and time.monotonic() - start < 30
        assert not zygote.alive()
        again = executor.run("print('fresh')", arena.task, arena.limits)
        assert again.status is ExecutionStatus.OK and again.stdout == "fresh\n", again
    finally:
        executor.close()


def test_a_run_the_sandbox_cannot_set_up_is_an_infra_error(arena, warm_only, monkeypatch):
    # A run folder without the script: the supervisor cannot mount it, the run never starts.
    prepare = arena.executor._prepare_folder

    def without_script(zygote, folder, run, public_dir):
        problem = prepare(zygote, folder, run, public_dir)
        (folder / "solution.py").unlink()
        return problem

    monkeypatch.setattr(arena.executor, "_prepare_folder", without_script)
    result = arena.run("print('never')")
    monkeypatch.undo()
    assert result.status is ExecutionStatus.INFRA_ERROR, result
    assert "could not set up the run" in result.error
    assert result.returncode is None
    assert arena.executor.start().alive()  # the zygote itself is fine


def test_a_run_cannot_tamper_with_its_init_or_the_zygote(arena, warm_only):
    # The cold sandbox's init is a shell that agent code may ptrace (same uid); the warm one's is not.
    zygote = arena.executor.start()
    before = probe(arena)
    tampered = arena.run(TAMPER)
    assert tampered.status is ExecutionStatus.OK, tampered
    assert "TAMPERED" in tampered.stdout and "LEAK" not in tampered.stdout
    assert "PTRACE -1 1" in tampered.stdout  # EPERM: the init is not dumpable
    assert "RUNS []" in tampered.stdout  # the other runs' folders are hidden
    assert "UMOUNT -1 -1 -1" in tampered.stdout
    assert probe(arena) == before
    assert arena.executor.start() is zygote and zygote.alive()


def test_the_zygote_is_single_threaded_and_not_visible_to_runs(arena, warm_only):
    zygote = arena.executor.start()
    pid = _zygote_pid(zygote)
    assert len(os.listdir(f"/proc/{pid}/task")) == 1
    result = arena.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.getppid())")
    assert result.stdout == "[1, 2] 1\n", result  # its init and itself, nothing of the zygote's sandbox
    assert Path(f"/proc/{pid}").exists()
