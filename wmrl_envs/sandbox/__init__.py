"""Executors that run agent code under resource limits, isolated from the host.

::

    from wmrl_envs.sandbox import ExecutorPool, make_executor

    executor = make_executor()                   # the default: "warm" where the host allows it, else "bwrap"
    result = executor.run(script, task)          # -> ExecutionResult
    with ExecutorPool(executor, workers=2) as pool:
        results = pool.run_batch([(script, task) for script in scripts])

Executors, the runtime builder and the pool load on first use, so importing this package
stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox.base import ExecutionResult, ExecutionStatus, Executor
from wmrl_envs.sandbox.limits import Limits

if TYPE_CHECKING:
    from wmrl_envs.sandbox.auto import AutoExecutor
    from wmrl_envs.sandbox.bwrap import BwrapExecutor
    from wmrl_envs.sandbox.docker_executor import DockerExecutor
    from wmrl_envs.sandbox.pool import ExecutorPool
    from wmrl_envs.sandbox.ray_executor import RayExecutor
    from wmrl_envs.sandbox.runtime import ensure_runtime
    from wmrl_envs.sandbox.unsafe import UnsafeSubprocessExecutor
    from wmrl_envs.sandbox.warm import WarmExecutor

__all__ = [
    "AutoExecutor",
    "BwrapExecutor",
    "DockerExecutor",
    "ExecutionResult",
    "ExecutionStatus",
    "Executor",
    "DEFAULT_EXECUTOR",
    "EXECUTOR_HELP",
    "ExecutorPool",
    "Limits",
    "RayExecutor",
    "UnsafeSubprocessExecutor",
    "WarmExecutor",
    "ensure_runtime",
    "make_executor",
]

_LAZY = {
    "AutoExecutor": "wmrl_envs.sandbox.auto",
    "BwrapExecutor": "wmrl_envs.sandbox.bwrap",
    "DockerExecutor": "wmrl_envs.sandbox.docker_executor",
    "ExecutorPool": "wmrl_envs.sandbox.pool",
    "RayExecutor": "wmrl_envs.sandbox.ray_executor",
    "UnsafeSubprocessExecutor": "wmrl_envs.sandbox.unsafe",
    "WarmExecutor": "wmrl_envs.sandbox.warm",
    "ensure_runtime": "wmrl_envs.sandbox.runtime",
}

EXECUTOR_NAMES = ("auto", "bwrap", "warm", "unsafe-subprocess", "ray", "docker")
#: The executor every env, scorer, trainer and CLI uses unless told otherwise.
DEFAULT_EXECUTOR = "auto"
#: What a ``--executor`` option says about the choice.
EXECUTOR_HELP = ("sandbox backend: auto (the default: warm where the host allows it, else bwrap), warm, bwrap, "
                 "docker, ray or unsafe-subprocess")

def make_executor(name: str = DEFAULT_EXECUTOR, **kwargs: Any) -> Executor:
    """Build an executor by name: ``"auto"`` (default), ``"bwrap"``, ``"warm"``, ``"unsafe-subprocess"``, ``"ray"``
    or ``"docker"``.

    ``"warm"`` runs each script forked from a zygote that has already imported the runtime's
    heavy modules, as isolated as ``"bwrap"`` (see :class:`~wmrl_envs.sandbox.warm.WarmExecutor`)
    and about 5x cheaper per typical run (``bench/results/sandbox_overhead.md``). ``"auto"`` is
    ``"warm"`` where the host allows it and its zygote starts (root, unprivileged nested user
    namespaces), and the cold ``"bwrap"`` elsewhere, with one warning that says why (see
    :class:`~wmrl_envs.sandbox.auto.AutoExecutor`); it takes the keyword arguments both accept
    (``runtime``, ``work_root``, ``use_cgroups``).
    ``kwargs`` go to the executor (``runtime``, ``work_root``, ``use_cgroups``, and for bwrap
    ``tmpfs_work_dir``; for ``"ray"`` see :class:`~wmrl_envs.sandbox.ray_executor.RayExecutor`,
    which runs bwrap on the nodes of an initialised Ray cluster; ``"docker"`` takes ``runtime``,
    ``work_root`` and ``host``, see :class:`~wmrl_envs.sandbox.docker_executor.DockerExecutor`).
    Raises :class:`SandboxUnavailableError` when the backend cannot run here.
    """
    if name == "auto":
        from wmrl_envs.sandbox.auto import AutoExecutor  # noqa: PLC0415 - executors load on first use, so importing the package stays cheap

        return AutoExecutor(**kwargs)
    if name == "bwrap":
        from wmrl_envs.sandbox.bwrap import BwrapExecutor  # noqa: PLC0415 - executors load on first use, so importing the package stays cheap

        return BwrapExecutor(**kwargs)
    if name == "warm":
        from wmrl_envs.sandbox.warm import WarmExecutor  # noqa: PLC0415 - executors load on first use, so importing the package stays cheap

        return WarmExecutor(**kwargs)
    if name == "unsafe-subprocess":
        from wmrl_envs.sandbox.unsafe import UnsafeSubprocessExecutor  # noqa: PLC0415 - executors load on first use, so importing the package stays cheap

        return UnsafeSubprocessExecutor(**kwargs)
    if name == "ray":
        from wmrl_envs.sandbox.ray_executor import RayExecutor  # noqa: PLC0415 - executors load on first use, so importing the package stays cheap

        return RayExecutor(**kwargs)
    if name == "docker":
        from wmrl_envs.sandbox.docker_executor import DockerExecutor  # noqa: PLC0415 - executors load on first use, so importing the package stays cheap

        return DockerExecutor(**kwargs)
    raise SandboxUnavailableError(f"unknown executor {name!r}; choose one of {EXECUTOR_NAMES}")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
