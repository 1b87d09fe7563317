"""The default sandbox starts wherever the cold one does, and falls back loudly where it cannot.

A private ``TMPDIR`` (mode 0700, what ``mktemp -d``, per-job temp dirs on clusters and systemd's
PrivateTmp give) once made every warm run an infrastructure failure: bubblewrap, started as an
unprivileged uid, could not reach its spool. These run the real executors under such a TMPDIR.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import ExecutionStatus, Limits, make_executor

pytestmark = pytest.mark.security

LIMITS = Limits(wall_s=30, cpu_s=30, memory_mb=1024, tmpfs_mb=32, file_mb=8, output_bytes=4096)
SCRIPT = "import pandas as pd\nprint(pd.read_csv('data/train.csv').shape)\nopen('submission.csv', 'w').write('id\\n1\\n')"


@pytest.fixture
def private_tmpdir(tmp_path, monkeypatch) -> Path:
    private = tmp_path / "private-tmp"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == str(private)
    return private


@pytest.fixture
def task(tmp_path) -> SimpleNamespace:
    public = tmp_path / "task" / "public"
    public.mkdir(parents=True)
    (public / "train.csv").write_text("id,x\n1,2\n3,4\n")
    for folder in (public, public.parent):
        folder.chmod(0o755)  # the task's files are readable by others, as the warm executor needs
    return SimpleNamespace(public_dir=public, limits=LIMITS)


def _runs_cleanly(executor, task) -> None:
    result = executor.run(SCRIPT, task)
    try:
        assert result.status is ExecutionStatus.OK, result
        assert result.stdout == "(2, 2)\n"
        assert result.submission_path is not None and result.submission_path.read_text() == "id\n1\n"
    finally:
        result.cleanup()


@pytest.mark.parametrize("name", ["warm", "bwrap", "auto"])
def test_every_executor_runs_under_a_private_tmpdir(private_tmpdir, task, name):
    try:
        executor = make_executor(name)
    except SandboxUnavailableError as exc:
        pytest.fail(f"{name} must run here: {exc}")
    try:
        _runs_cleanly(executor, task)
        if name == "auto":
            assert executor.name == "warm"  # the warm sandbox itself started, no fallback was needed
    finally:
        if hasattr(executor, "close"):
            executor.close()
    assert os.listdir(private_tmpdir) == []


def test_auto_falls_back_to_bwrap_with_one_warning_when_the_zygote_cannot_start(task, caplog):
    from wmrl_envs.sandbox import auto

    executor = make_executor("auto")
    assert executor.name == "warm"
    executor._chosen.start_timeout_s = 0.001  # a zygote that cannot start in time: a host-side failure
    auto._warn_cold_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="wmrl_envs.sandbox"):
        _runs_cleanly(executor, task)
        _runs_cleanly(executor, task)
    assert executor.name == "bwrap"
    warnings = [r for r in caplog.records if "using the cold 'bwrap' executor" in r.getMessage()]
    assert len(warnings) == 1 and "did not start" in warnings[0].getMessage(), caplog.text
