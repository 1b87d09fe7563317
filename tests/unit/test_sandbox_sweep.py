"""The sweep of run folders that killed processes left (``wmrl_envs.sandbox.sweep``), with real
processes as owners: a live one, one that died, and a pid that lives on in another process.

A killed launcher with a real sandbox is ``tests/security/test_sandbox_processes.py``'s
``test_sandbox_dies_with_its_host_process``; a killed Ray worker is ``tests/integration/test_ray.py``'s.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from wmrl_envs.sandbox.base import RUN_DIR_PREFIX
from wmrl_envs.sandbox.sweep import owned_prefix, owner_tag, sweep_run_dirs


def started(pid: int) -> int:
    """``pid``'s start time in clock ticks (``/proc/<pid>/stat`` field 22)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def run_folder(root: Path, name: str) -> Path:
    """A folder as a run leaves it, with a subfolder agent code made unreadable."""
    path = root / name
    (path / "work" / "locked").mkdir(parents=True)
    (path / "submission.csv").write_text("id,y\n1,2\n")
    (path / "work" / "locked").chmod(0)
    return path


def test_only_folders_of_owners_that_are_gone_are_removed(tmp_path):
    namespace = owner_tag().split("-")[0]
    owner = subprocess.Popen(["sleep", "60"])
    try:
        tag = f"{namespace}-{owner.pid}-{started(owner.pid)}"
        live = run_folder(tmp_path, f"{RUN_DIR_PREFIX}{tag}-live0001")
        mine = run_folder(tmp_path, f"{owned_prefix()}mine0001")
        # The pid is alive, but it started at another time: its owner is gone and the pid reused.
        reused = run_folder(tmp_path, f"{RUN_DIR_PREFIX}{namespace}-{owner.pid}-{started(owner.pid) - 1}-reus0001")
        kept = [
            run_folder(tmp_path, f"{RUN_DIR_PREFIX}{int(namespace) + 1}-{owner.pid}-1-otherns1"),  # cannot be seen
            run_folder(tmp_path, f"{RUN_DIR_PREFIX}abcd1234"),  # no owner in its name
            run_folder(tmp_path, f"wmrl-runner-{tag}-x"),  # not WMRL's prefix
            run_folder(tmp_path, f"{RUN_DIR_PREFIX}docker-{tag}-x"),  # the docker executor's, not this prefix
        ]
        outside = run_folder(tmp_path / "elsewhere", "target")
        link = tmp_path / f"{RUN_DIR_PREFIX}{namespace}-{owner.pid}-1-link0001"
        link.symlink_to(outside, target_is_directory=True)  # named like a dead run's: never followed

        assert sweep_run_dirs(tmp_path) == [reused]
        assert live.is_dir() and mine.is_dir() and link.is_symlink() and outside.is_dir()
        assert all(path.is_dir() for path in kept)
    finally:
        owner.kill()
        owner.wait()
    # Now the owner is gone: its folder goes, unreadable subfolder and all.
    assert sweep_run_dirs(tmp_path) == [live]
    assert not live.exists() and mine.is_dir() and (outside / "submission.csv").is_file()
    assert sweep_run_dirs(tmp_path / "missing") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's needs root")
def test_another_users_folder_is_left_alone(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    foreign = run_folder(tmp_path, f"{RUN_DIR_PREFIX}{owner_tag().split('-')[0]}-{dead.pid}-1-theirs01")
    os.chown(foreign, 65534, 65534)
    assert sweep_run_dirs(tmp_path) == [] and foreign.is_dir()
