"""Run many scripts at once through one executor.

A thread pool is enough: each run's work happens in child processes, and its thread only
waits on pipes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from types import TracebackType
from typing import Any

from wmrl_envs.sandbox.base import ExecutionResult, Executor
from wmrl_envs.sandbox.limits import Limits


class ExecutorPool:
    """Runs scripts in parallel through ``executor``, at most ``workers`` at a time.

    Args:
        executor: Any :class:`Executor`.
        workers: Concurrent runs (default: ``os.cpu_count()``).

    Example::

        with ExecutorPool(make_executor("bwrap"), workers=2) as pool:
            results = pool.run_batch([(script, task) for script in scripts])
    """

    def __init__(self, executor: Executor, workers: int | None = None) -> None:
        self.executor = executor
        self.workers = workers or os.cpu_count() or 1
        self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="wmrl-exec")

    def submit(self, script: str, task: Any, limits: Limits | None = None) -> Future[ExecutionResult]:
        """Schedule one run; the future resolves to its :class:`ExecutionResult`."""
        return self._threads.submit(self.executor.run, script, task, limits)

    def run_batch(
        self, items: Sequence[tuple[str, Any]], limits: Limits | None = None, progress: bool = False
    ) -> list[ExecutionResult]:
        """Run every ``(script, task)`` pair; results come back in input order."""
        futures = [self.submit(script, task, limits) for script, task in items]
        if progress:
            from tqdm.auto import tqdm  # noqa: PLC0415 - only a progress bar needs it; gym.make imports this module

            for _ in tqdm(as_completed(futures), total=len(futures), desc=f"{self.executor.name} runs"):
                pass
        return [f.result() for f in futures]

    def close(self) -> None:
        """Wait for running work and stop the threads."""
        self._threads.shutdown(wait=True)

    def __enter__(self) -> ExecutorPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
