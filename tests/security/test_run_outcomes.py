"""No run can choose to go unscored, and runs share nothing, whatever the executor.

An infrastructure failure is not a score: it leaves a GRPO group's baseline and every
evaluation mean. So a script that could turn its own failure into one would never be penalised,
and a policy trained with RL would find that. Once agent code has started, every outcome is the
script's own, scored. And two runs, concurrent or one after the other, share no kernel object
through which one could reach the other or take what the other needs: ptys, keyrings, the
kernel's per-uid budgets; agent code is never the host's root.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from wmrl_envs.sandbox import ExecutionStatus, ExecutorPool

pytestmark = pytest.mark.security

# ctypes calls the runtime venv's Python lacks bindings for: keys, inotify and POSIX queues.
KERNEL_CALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(result):
    return result if result >= 0 else -ctypes.get_errno()
def add_key(description, payload):  # KEY_SPEC_USER_KEYRING
    return call(libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", description, payload,
                             len(payload), -4))
class QueueAttributes(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("max_messages", ctypes.c_long), ("message_size", ctypes.c_long),
                ("current", ctypes.c_long), ("reserved", ctypes.c_long * 4)]
def open_queue(name):  # O_CREAT | O_RDWR, one 64-byte message
    return call(libc.mq_open(name, 0o102, 0o600, ctypes.byref(QueueAttributes(0, 1, 64, 0))))
"""


def run_pair(arena, first: str, second: str):
    """Run two scripts at once (the second starts while the first holds what it took)."""
    with ExecutorPool(arena.executor, workers=2) as pool:
        futures = [pool.submit(textwrap.dedent(code), arena.task, arena.limits) for code in (first, second)]
        return [future.result() for future in futures]


@pytest.mark.parametrize("leftover", ["os.mkdir('submission.csv')", "os.mkfifo('submission.csv')",
                                      "os.symlink('/etc/passwd', 'submission.csv')"])
def test_a_submission_that_is_not_a_regular_file_is_the_scripts_own_failure(arena, leftover):
    result = arena.run(f"""
import os
{leftover}
raise RuntimeError("the model was weak")
""")
    assert result.status is ExecutionStatus.ERROR, result
    assert "RuntimeError: the model was weak" in result.stderr
    assert result.submission_path is None


def test_a_script_cannot_end_its_init_to_go_unscored(arena):
    """Signals sent to the run's PID 1 first thing, beside a busy run (the race's best odds)."""
    busy = "sum(i * i for i in range(30_000_000))\nprint('busy done')"
    for signame in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGINT", "SIGQUIT"):
        kill = f"import os, signal\nos.kill(1, signal.{signame})\nprint('after')"
        results = run_pair(arena, busy, kill)
        assert all(r.status is not ExecutionStatus.INFRA_ERROR for r in results), (signame, results)


def test_concurrent_runs_cannot_reach_each_others_ptys(arena):
    holder = """
    import os, time
    controller, terminal = os.openpty()
    print("PTY", os.ttyname(terminal), flush=True)
    time.sleep(4)
    """
    prober = """
    import os, time
    time.sleep(1.5)
    names = sorted(os.listdir("/dev/pts"))
    opened = []
    for name in names:
        if name.isdigit():
            try:
                os.close(os.open(f"/dev/pts/{name}", os.O_RDWR | os.O_NOCTTY))
                opened.append(name)
            except OSError:
                pass
    print("PTS", names, "OPENED", opened)
    """
    holding, probing = run_pair(arena, holder, prober)
    assert holding.status is ExecutionStatus.OK and "PTY /dev/pts/" in holding.stdout, holding
    assert probing.status is ExecutionStatus.OK, probing
    assert "OPENED []" in probing.stdout, probing.stdout
    assert not any(name.isdigit() for name in probing.stdout.split("PTS")[1].split("OPENED")[0]), probing.stdout


def test_keyrings_carry_nothing_from_run_to_run(arena):
    description = f"wmrl-{arena.marker}".encode()
    adding = arena.run(KERNEL_CALLS + f"print('ADD', add_key({description!r}, b'the secret'))")
    assert adding.status is ExecutionStatus.OK, adding
    assert "ADD -1\n" in adding.stdout, adding.stdout  # EPERM: keyring calls are denied
    reading = arena.run("print('KEYS', open('/proc/keys').read() if __import__('os').path.exists('/proc/keys') else '')")
    assert reading.status is ExecutionStatus.OK, reading
    assert arena.marker not in reading.stdout


def test_one_run_cannot_exhaust_a_concurrent_runs_kernel_budgets(arena):
    greedy = KERNEL_CALLS + """
import time
watchers = [fd for fd in (call(libc.inotify_init1(0)) for _ in range(1000)) if fd >= 0]
queues = [q for q in (open_queue(f"/wmrl-greedy-{i}".encode()) for i in range(4000)) if q >= 0]
print("TOOK", len(watchers), len(queues), flush=True)
time.sleep(4)
"""
    modest = KERNEL_CALLS + """
import time
time.sleep(1.5)
print("INOTIFY", call(libc.inotify_init1(0)) >= 0, "QUEUE", open_queue(b"/wmrl-modest") >= 0)
"""
    took, needed = run_pair(arena, greedy, modest)
    assert took.status is ExecutionStatus.OK and "TOOK" in took.stdout, took
    assert needed.status is ExecutionStatus.OK, needed
    assert "INOTIFY True QUEUE True" in needed.stdout, (took.stdout, needed.stdout)


def test_agent_code_is_never_the_hosts_root(arena):
    result_box = {}

    def read_uids_while_running():
        import threading
        import time

        worker = threading.Thread(target=lambda: result_box.update(
            result=arena.run("import time\ntime.sleep(3)\nprint('slept')", marked=True)))
        worker.start()
        deadline = time.monotonic() + 10
        uids: set[int] = set()
        while worker.is_alive() and time.monotonic() < deadline and not uids:
            time.sleep(0.2)
            for pid in arena.survivors():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                uids.add(int(status.split("Uid:")[1].split()[0]))
        worker.join()
        return uids

    uids = read_uids_while_running()
    assert result_box["result"].status is ExecutionStatus.OK, result_box["result"]
    assert uids, "no process of the run was seen"
    assert 0 not in uids, uids
