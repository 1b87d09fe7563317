"""The default executor, ``"auto"``: warm where its zygote starts, else the cold bwrap executor.

Whether the warm sandbox can run here is known in two steps: at construction (root, the tools,
nested user namespaces) and at its zygote's first start (the spool, the binds, the preload),
which needs the runtime and so waits for the first run. A failure at either step switches this
executor to ``bwrap`` for good, with one warning that quotes the warm sandbox's own words,
instead of turning every run into an infrastructure failure.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox.base import ExecutionResult
from wmrl_envs.sandbox.bwrap import BwrapExecutor
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.warm import WarmExecutor

log = logging.getLogger(__name__)


class AutoExecutor:
    """Runs each script warm (:class:`WarmExecutor`) or, where that cannot start, cold (:class:`BwrapExecutor`).

    Takes the keyword arguments both accept (``runtime``, ``work_root``, ``use_cgroups``).
    Raises :class:`SandboxUnavailableError` when neither can run here.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._lock = threading.Lock()
        self._zygote_checked = False
        try:
            self._chosen: WarmExecutor | BwrapExecutor = WarmExecutor(**kwargs)
        except SandboxUnavailableError as why:
            self._chosen = self._cold(str(why))

    @property
    def name(self) -> str:
        """The executor that runs the scripts now: ``"warm"`` or ``"bwrap"``."""
        return self._chosen.name

    @property
    def work_root(self):
        return self._chosen.work_root

    def run(self, script: str, task: Any, limits: Limits | None = None) -> ExecutionResult:
        """Run ``script`` as ``solution.py`` against ``task``'s public files."""
        self.start()
        return self._chosen.run(script, task, limits)

    def start(self) -> None:
        """Start the warm zygote now (building the runtime if needed), or settle on bwrap."""
        with self._lock:
            if self._zygote_checked or not isinstance(self._chosen, WarmExecutor):
                return
            try:
                self._chosen.start()
            except SandboxUnavailableError as why:
                self._chosen.close()
                self._chosen = self._cold(str(why))
            self._zygote_checked = True

    def close(self) -> None:
        """Stop the warm zygote, if one runs."""
        if isinstance(self._chosen, WarmExecutor):
            self._chosen.close()

    def _cold(self, reason: str) -> BwrapExecutor:
        _warn_cold_once(reason)
        return BwrapExecutor(**self._kwargs)


@functools.cache
def _warn_cold_once(reason: str) -> None:
    log.warning("using the cold 'bwrap' executor (each run imports its libraries again): %s", reason)
