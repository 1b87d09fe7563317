"""A plain-subprocess executor for debugging and for hosts without bubblewrap.

Agent code runs as the calling user with full access to the host's files and network; only
rlimits, a cleared environment and (when writable) per-run cgroups apply. Use it only for
code you trust, and only by naming it explicitly: ``make_executor("unsafe-subprocess")``.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from wmrl_envs.sandbox.launcher import HelperExecutor, RunDir, agent_env, kill_group
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.runtime import Runtime

log = logging.getLogger(__name__)


class UnsafeSubprocessExecutor(HelperExecutor):
    """Runs agent code with the runtime venv's python in a work dir on the host. NOT contained.

    The work dir holds a ``data`` symlink to the task's public files. Its size is checked
    after the run (``limits.tmpfs_mb``); a run that overflows it is reported as an error.
    """

    name = "unsafe-subprocess"

    def __init__(self, runtime: Path | None = None, work_root: Path | None = None, use_cgroups: bool = True) -> None:
        log.warning("unsafe-subprocess executor: agent code is NOT contained (host files and network are reachable)")
        # A host-side work dir: the data symlink and the script are placed in it before launch.
        super().__init__(runtime, work_root, use_cgroups, tmpfs_work_dir=False)

    def _prepare(self, run: RunDir, public_dir: Path) -> None:
        (run.work / "data").symlink_to(public_dir.resolve(), target_is_directory=True)
        shutil.copyfile(run.script, run.work / "solution.py")

    def _command(self, runtime: Runtime, run: RunDir, public_dir: Path, limits: Limits) -> list[str]:
        env = agent_env(path=f"{runtime.venv}/bin:/usr/bin:/bin", home=str(run.work), tmpdir=str(run.work))
        return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), str(runtime.python), "solution.py"]

    def _started(self, status_text: str) -> tuple[bool, int | None]:
        # The helper reports the start itself; the exit status is the helper's.
        return "started" in status_text, None

    def _kill_sandbox(self, status_text: str, helper_pid: int) -> None:
        # Without a cgroup this also kills the helper, so no submission is copied out.
        if not self._cgroup_parents:
            kill_group(helper_pid)
