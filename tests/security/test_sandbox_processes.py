"""Runaway processes, escapes, signals, secrets and floods stay inside the sandbox."""

from __future__ import annotations

import dataclasses
import json
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wmrl_envs.sandbox import ExecutionStatus, Limits, make_executor
from wmrl_envs.sandbox.base import RUN_DIR_PREFIX
from wmrl_envs.sandbox.dockerd import mount_points

pytestmark = pytest.mark.security

SHORT = Limits(wall_s=4, cpu_s=15, memory_mb=512, max_processes=64, tmpfs_mb=48, file_mb=32, output_bytes=8192)


def test_fork_bomb_is_contained(arena):
    result = arena.run(
        """
        import os
        print("bombing", flush=True)
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        limits=SHORT,
        marked=True,
    )
    assert result.status in (ExecutionStatus.TIMEOUT, ExecutionStatus.ERROR), result
    assert "bombing" in result.stdout
    assert arena.survivors() == []


def test_infinite_loop_with_children_is_killed(arena):
    result = arena.run(
        f"""
        import subprocess
        for _ in range(3):
            subprocess.Popen(["sh", "-c", "while true; do sleep 0.2; done", "{arena.marker}"])
        print("spawned", flush=True)
        while True:
            pass
        """,
        limits=SHORT,
        marked=True,
    )
    assert result.status is ExecutionStatus.TIMEOUT, result
    assert "spawned" in result.stdout
    assert arena.survivors() == []


def test_double_fork_setsid_escape_dies_with_the_sandbox(arena, tmp_path):
    heartbeat = tmp_path / "heartbeat"
    result = arena.run(
        f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                beat = "sleep 1; echo alive >> {heartbeat}; echo alive >> /workspace/hb; sleep 30"
                os.execv("/bin/sh", ["sh", "-c", beat, "{arena.marker}"])
            os._exit(0)
        os.wait()
        print("parent exits", flush=True)
        """,
        limits=SHORT,
    )
    assert result.status is ExecutionStatus.OK, result
    assert "parent exits" in result.stdout
    assert arena.survivors() == []
    time.sleep(1.5)  # longer than the escapee's first sleep: it would have written by now
    assert not heartbeat.exists()
    assert arena.survivors() == []


def test_cannot_signal_host_processes(arena):
    bystander = subprocess.Popen(["sh", "-c", "sleep 60", arena.marker])
    try:
        result = arena.run(
            f"""
            import os, signal, subprocess
            for pid in ({bystander.pid}, os.getppid(), 1):
                try:
                    os.kill(pid, signal.SIGKILL)
                    print("SENT", pid)
                except OSError as exc:
                    print("BLOCKED", pid, type(exc).__name__)
            print("PPID", os.getppid(), flush=True)
            subprocess.run(["kill", "-9", "-1"])
            """,
        )
        assert bystander.poll() is None, "a host process was killed from inside the sandbox"
    finally:
        bystander.kill()
        bystander.wait()
    assert result.status in (ExecutionStatus.OK, ExecutionStatus.ERROR), result
    assert f"BLOCKED {bystander.pid} ProcessLookupError" in result.stdout
    assert "PPID 1" in result.stdout  # the parent is the sandbox's own init, not a host process


def test_host_environment_secrets_are_not_visible(arena, monkeypatch):
    secret = f"SECRET{arena.marker}"
    monkeypatch.setenv("WMRL_TEST_SECRET", secret)
    result = arena.run(
        """
        import json, os
        print(json.dumps(dict(os.environ)))
        for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
            try:
                print("ENVIRON", pid, open(f"/proc/{pid}/environ", "rb").read())
            except OSError as exc:
                print("BLOCKED", pid, type(exc).__name__)
        """
    )
    assert result.status is ExecutionStatus.OK, result
    assert secret not in result.stdout
    env = json.loads(result.stdout.splitlines()[0])
    assert "WMRL_TEST_SECRET" not in env
    assert "ENVIRON" in result.stdout


def test_hundred_megabytes_of_stdout_is_bounded(arena):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = arena.run(
        """
        import sys
        line = "y" * 1023 + "\\n"
        for _ in range(100 * 1024):
            sys.stdout.write(line)
        print("END")
        """,
    )
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.status is ExecutionStatus.OK, result
    assert result.stdout_truncated
    assert len(result.stdout.encode()) <= arena.limits.output_bytes
    assert result.stdout.endswith("y\nEND\n")
    assert grown_mib < 50


def test_memory_hog_of_4_gib(arena):
    result = arena.run("blob = bytearray(4 << 30)\nprint('LEAK allocated')")
    assert result.status is ExecutionStatus.MEMORY, result
    assert "LEAK" not in result.stdout


def test_memory_spread_over_processes_hits_the_cgroup(arena):
    result = arena.run(
        f"""
        import subprocess, sys
        code = "b = bytearray(200 << 20); import time; time.sleep(3)"
        procs = [subprocess.Popen([sys.executable, "-c", code, "{arena.marker}"]) for _ in range(4)]
        codes = [p.wait() for p in procs]
        print(codes)
        sys.exit(1 if any(codes) else 0)
        """
    )
    if not result.enforced["memory_cgroup"]:
        pytest.skip("no writable memory cgroup on this host: only per-process RLIMIT_AS applies")
    assert result.status is ExecutionStatus.MEMORY, result
    assert result.peak_rss_mb <= arena.limits.memory_mb + 1


def test_forged_status_cannot_fake_success_or_infra_error(arena):
    result = arena.run(
        """
        import os, sys
        for fd in range(3, 256):
            try:
                os.write(fd, b'{ "exit-code": 0 }\\n')
                print("WROTE", fd)
            except OSError:
                pass
        sys.stderr.write("bwrap: Can't mount tmpfs on /newroot: Operation not permitted\\n")
        sys.exit(1)
        """
    )
    assert result.status is ExecutionStatus.ERROR, result
    assert result.returncode == 1
    assert "WROTE" not in result.stdout


def test_setup_failure_is_infra_error_not_agent_error(arena, monkeypatch):
    # A base interpreter that is not there: the sandbox cannot mount it, whichever executor builds it.
    runtime = arena.executor._ensure_runtime()
    broken = dataclasses.replace(runtime, base_prefix=Path("/nonexistent-wmrl-source"))
    monkeypatch.setattr(arena.executor, "_runtime", broken)
    result = arena.run("print('never runs')")
    monkeypatch.undo()
    assert result.status is ExecutionStatus.INFRA_ERROR, result
    assert "nonexistent-wmrl-source" in result.error
    assert result.returncode is None


def test_sandbox_dies_with_its_host_process(arena, executor_spec, tmp_path):
    """If the process that launched a run is killed, nothing of the run survives it."""
    name, kwargs = executor_spec
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from types import SimpleNamespace
            from wmrl_envs.sandbox import Limits, make_executor
            executor = make_executor({name!r}, work_root=Path({str(tmp_path)!r}), **{kwargs!r})
            task = SimpleNamespace(public_dir=Path({str(arena.task.public_dir)!r}), limits=Limits(wall_s=60))
            executor.run('import subprocess; subprocess.run(["sh", "-c", "sleep 60", "{arena.marker}"])', task)
            """
        )
    )
    host = subprocess.Popen([sys.executable, str(driver)])
    try:
        deadline = time.monotonic() + 30
        while not arena.survivors() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert arena.survivors(), "the sandboxed sleeper never started"
    finally:
        host.kill()
        host.wait()
    deadline = time.monotonic() + 10
    while arena.survivors() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert arena.survivors() == []
    left = list(tmp_path.glob(f"{RUN_DIR_PREFIX}*"))
    assert left, "the killed host left no run folder"
    # A new executor removes what the killed one left behind: its run folder (docker: also its
    # container and work-dir mount).
    make_executor(name, work_root=tmp_path, **kwargs)
    assert [point for point in mount_points() if point.startswith(str(tmp_path))] == []
    assert not any(path.exists() for path in left)
