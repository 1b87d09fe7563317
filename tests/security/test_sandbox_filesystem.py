"""Agent code cannot read the answers, write outside its work dir or remount anything."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import wmrl_envs
from wmrl_envs.paths import wmrl_home
from wmrl_envs.sandbox import ExecutionStatus

pytestmark = pytest.mark.security

# Docker always creates an empty /.dockerenv and the /sys mount point (the executor mounts an
# empty tmpfs on it; test_filesystem_view_is_minimal checks that /sys shows nothing).
DOCKER_ROOT_ENTRIES = {".dockerenv", "sys"}
# Prints BLOCKED for every path it cannot read and LEAK plus the content for every one it can.
TRY_READ = """
def try_read(path):
    try:
        with open(path) as f:
            print("LEAK", path, f.read())
    except OSError as exc:
        print("BLOCKED", path, type(exc).__name__)
"""


def test_answers_unreachable_by_absolute_path(arena):
    answers = arena.task.answers_path
    result = arena.run(
        TRY_READ
        + f"""
import os
try_read({str(answers)!r})
for folder in ({str(answers.parent)!r}, {str(arena.task.root)!r}):
    try:
        print("LEAK", os.listdir(folder))
    except OSError as exc:
        print("BLOCKED", folder, type(exc).__name__)
"""
    )
    assert result.status is ExecutionStatus.OK, result
    assert arena.answers_token not in result.stdout
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") == 3


def test_answers_unreachable_by_traversal(arena):
    result = arena.run(
        TRY_READ
        + """
import os
for rel in ("data/../private/answers.csv", "data/../../private/answers.csv", "../private/answers.csv",
            "../../private/answers.csv", os.path.realpath("data") + "/../private/answers.csv"):
    try_read(rel)
# Search the whole visible filesystem by name.
hits = []
for top in ("/",):
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == "/":
            dirnames[:] = [d for d in dirnames if d not in ("proc", "sys")]
        hits += [os.path.join(dirpath, f) for f in filenames if f == "answers.csv"]
print("FOUND" if hits else "NOTFOUND", hits)
""",
        # Walking every visible file (all of site-packages) can outlast the usual 15 s on a
        # busy 2-core runner; the limits under test here are the filesystem's, not time's.
        limits=dataclasses.replace(arena.limits, wall_s=120, cpu_s=120),
    )
    assert result.status is ExecutionStatus.OK, result
    assert arena.answers_token not in result.stdout
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") == 5
    assert "NOTFOUND []" in result.stdout


def test_answers_unreachable_via_proc(arena):
    answers = str(arena.task.answers_path)
    result = arena.run(
        TRY_READ
        + f"""
import os
for path in ("/proc/1/root{answers}", "/proc/self/root{answers}", "/proc/self/cwd/../private/answers.csv",
             "/proc/1/cwd/../private/answers.csv", "/proc/self/cwd/data/../../private/answers.csv"):
    try_read(path)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try_read(f"/proc/{{pid}}/root{answers}")
print("PIDS", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
"""
    )
    assert result.status is ExecutionStatus.OK, result
    assert arena.answers_token not in result.stdout
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") >= 6
    # A private PID namespace: only the sandbox's own few processes are visible.
    pids = eval(result.stdout.split("PIDS", 1)[1])
    assert max(pids) < 100


def test_cannot_write_outside_the_work_dir(arena):
    runtime = arena.executor._ensure_runtime()
    targets = [
        "/pwned",
        "/usr/pwned",
        "/etc/pwned",
        "/opt/wmrl-runtime/pwned",
        f"{runtime.base_prefix}/pwned",
        str(arena.work_root / "pwned"),
        str(arena.canary),
        "data/train.csv",
        "data/pwned",
        "/proc/1/root/pwned",
    ]
    result = arena.run(
        f"""
for path in {targets!r}:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        print("LEAK", path)
    except OSError as exc:
        print("BLOCKED", path, type(exc).__name__)
open("inside.txt", "w").write("fine")
print("WROTE inside")
"""
    )
    assert result.status is ExecutionStatus.OK, result
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") == len(targets)
    assert "WROTE inside" in result.stdout
    for path in ("/pwned", "/usr/pwned", "/etc/pwned", f"{runtime.base_prefix}/pwned", f"{runtime.venv}/pwned"):
        assert not Path(path).exists()


def test_cannot_remount_or_mount(arena):
    result = arena.run(
        """
        import ctypes, os, subprocess
        for cmd in (["mount", "-o", "remount,rw", "/"], ["mount", "-o", "remount,rw", "/usr"],
                    ["mount", "-t", "tmpfs", "none", "/mnt"], ["mount", "--bind", "/", "/tmp"]):
            proc = subprocess.run(cmd, capture_output=True)
            print("LEAK" if proc.returncode == 0 else "BLOCKED", cmd)
        libc = ctypes.CDLL(None, use_errno=True)
        MS_REMOUNT, MS_BIND = 32, 4096
        for target, flags in ((b"/", MS_REMOUNT), (b"/usr", MS_REMOUNT | MS_BIND)):
            rc = libc.mount(None, target, None, flags, None)
            print("LEAK" if rc == 0 else "BLOCKED", target, os.strerror(ctypes.get_errno()))
        for path in ("/usr/pwned", "/pwned"):
            try:
                open(path, "w").write("x")
                print("LEAK write", path)
            except OSError:
                print("BLOCKED write", path)
        """
    )
    assert result.status is ExecutionStatus.OK, result
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") == 8
    assert not Path("/usr/pwned").exists()


def test_no_capabilities_and_no_nested_user_namespaces(arena):
    result = arena.run(
        """
        import ctypes, os, subprocess
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        print("IDS", os.getuid(), os.getgid(), status["CapEff"].strip(), status["CapBnd"].strip())
        proc = subprocess.run(["unshare", "-Ur", "true"], capture_output=True)
        print("LEAK unshare" if proc.returncode == 0 else "BLOCKED unshare")
        libc = ctypes.CDLL(None, use_errno=True)
        CLONE_NEWUSER = 0x10000000
        print("LEAK userns" if libc.unshare(CLONE_NEWUSER) == 0 else "BLOCKED userns")
        """
    )
    assert result.status is ExecutionStatus.OK, result
    # Docker runs are a host uid of their own, never root; the others are uid 65534 inside.
    ids = result.stdout.split("IDS ")[1].split()
    assert ids[0] == ids[1] and int(ids[0]) != 0 and ids[2:4] == ["0000000000000000"] * 2, result.stdout
    assert ids[0] == "65534" or arena.executor.name == "docker"
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") == 2


def test_filesystem_view_is_minimal(arena):
    runtime = arena.executor._ensure_runtime()
    # The base interpreter's prefix may live under the home dir (pyenv); nothing else there may.
    checkout = Path(wmrl_envs.__file__).resolve().parents[1]
    probes = [str(checkout), str(wmrl_home()), str(Path.home() / ".cache"), "/home", str(runtime.venv), "/sys"]
    probes += ["/var", "/run", "/root/.ssh", "/etc/ssl"]
    probes += [str(p) for p in runtime.base_site_packages]
    result = arena.run(
        f"""
import os
for path in {probes!r}:
    try:
        print("SEEN" if os.listdir(path) else "EMPTY", path)
    except OSError:
        print("ABSENT", path)
print("ROOT", sorted(os.listdir("/")))
"""
    )
    assert result.status is ExecutionStatus.OK, result
    assert "SEEN" not in result.stdout, result.stdout
    assert result.stdout.count("ABSENT") + result.stdout.count("EMPTY") == len(probes)
    root = eval(result.stdout.split("ROOT", 1)[1])
    allowed = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "etc", "opt", "proc", "dev", "tmp", "workspace"}
    allowed |= DOCKER_ROOT_ENTRIES if arena.executor.name == "docker" else set()
    assert set(root) <= allowed | {runtime.base_prefix.parts[1]}


def test_tmp_and_shm_and_work_dir_are_bounded(arena):
    result = arena.run(
        """
        import errno, os
        def fill(folder):
            written, i = 0, 0
            chunk = b"x" * (1 << 20)
            while True:
                try:
                    with open(os.path.join(folder, f"fill{i}"), "wb") as f:
                        for _ in range(16):
                            f.write(chunk)
                            f.flush()
                            written += len(chunk)
                except OSError as exc:
                    return written, errno.errorcode[exc.errno]
                i += 1
        for folder in ("/tmp", "/dev/shm", "."):
            written, err = fill(folder)
            print("FILLED", folder, written >> 20, err)
        """,
    )
    assert result.status is ExecutionStatus.OK, result
    lines = [line.split() for line in result.stdout.splitlines() if line.startswith("FILLED")]
    assert [line[1] for line in lines] == ["/tmp", "/dev/shm", "."]
    bounded = lines if result.enforced["workdir_tmpfs"] else lines[:2]
    for _, folder, mib, err in bounded:
        assert 8 <= int(mib) <= 48, (folder, mib)
        assert err == "ENOSPC"


def test_file_size_limit(arena):
    result = arena.run(
        """
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
        chunk = b"x" * (1 << 20)
        written = 0
        try:
            with open("big.bin", "wb") as f:
                while True:
                    f.write(chunk)
                    f.flush()
                    written += 1
        except OSError as exc:
            print("STOPPED", written, exc.errno)
        """
    )
    assert result.status is ExecutionStatus.OK, result
    stopped, mib, err = result.stdout.split()
    assert stopped == "STOPPED" and int(mib) <= 32 and int(err) == 27  # EFBIG
