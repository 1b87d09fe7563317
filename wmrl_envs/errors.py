"""Typed errors shared by every part of WMRL.

Every error a user can trigger with bad input derives from :class:`WMRLError`, so a
training loop can catch the family without a catch-all ``except``. Messages that quote user
data (column names, ids, values) go through :func:`preview` so they stay short.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


class WMRLError(Exception):
    """Base class of every error WMRL raises on purpose."""


class InvalidSubmissionError(WMRLError):
    """A submission does not match the task's expected format.

    The message names the problem precisely (missing column, row count, ids, NaN,
    values out of range). An invalid submission scores 0; it is not an infra failure.
    """


class TaskFormatError(WMRLError):
    """A task folder is corrupt or incomplete; the message names the missing piece.

    A loader that checks several pieces at once raises one error naming them all:
    ``TaskFormatError(message, problems)``, each problem in :attr:`problems`.
    """

    def __str__(self) -> str:  # the message alone, also when the problems ride along
        return str(self.args[0]) if self.args else ""

    @property
    def problems(self) -> tuple[str, ...]:
        """Every problem found (the message itself when it names one)."""
        return tuple(self.args[1]) if len(self.args) > 1 else (str(self),)


class TaskNotFoundError(WMRLError, KeyError):
    """No task with the requested id exists in any configured tasks directory."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SandboxUnavailableError(WMRLError):
    """The requested sandbox backend cannot run on this machine (message says how to fix)."""


class ConfigError(WMRLError, ValueError):
    """A configuration value is invalid."""


class CalibrationDataError(WMRLError, ValueError):
    """Scores or a saved state handed to a calibrator are not valid data: a non-finite score, a
    real score outside ``score_range``, mismatched lengths, or a state of an unknown format.

    Its settings (:class:`~wmrl_envs.calibration.CalibratorConfig`) raise :class:`ConfigError`.
    """


class MissingDependencyError(WMRLError):
    """An optional package that one feature needs (e.g. a suite's data source) is not installed."""


class MissingExtraError(MissingDependencyError):
    """A feature needs one of wmrl's optional extras, which is not installed:
    ``MissingExtraError(extra, feature, reason)``. Its message is one line that names the feature,
    the extra and the command that installs it. Raised where the import happens, mostly by
    :func:`wmrl_envs.extras.requires_extra`; the ``wmrl`` command prints it and exits non-zero.
    """

    def __str__(self) -> str:  # built from the args, so the error pickles (Ray, worker pipes)
        extra, feature, reason = self.args
        return f"{feature} needs the {extra} extra: pip install 'wmrl[{extra}]' ({reason})"

    @property
    def extra(self) -> str:
        """The extra to install, as pyproject.toml's ``[project.optional-dependencies]`` names it."""
        return self.args[0]


class CalibratorLostError(WMRLError):
    """A calibrator that lives in a Ray actor is gone, and Ray could not restart it from its saved
    state: what it learnt since this process last read it is lost (an infrastructure failure)."""


class InfraFailureError(WMRLError):
    """Too many executions failed for infrastructure reasons (the sandbox could not start, a
    worker was lost) for the numbers to mean anything: an evaluated task past its allowed share,
    or a training run whose recent steps had no real signal. The message names the first cause
    (the sandbox's own message); a run stopped by it leaves a resumable checkpoint."""


class SimulationWorkerError(WMRLError):
    """An episode raised inside a simulation worker (:mod:`wmrl_envs.libero.workers`); the message
    carries the worker's traceback. A worker that dies is an infrastructure failure instead, and
    never raises this."""


#: How many items :func:`preview` shows by default.
PREVIEW_ITEMS = 5
# Longest repr of one shown item: a single huge cell or column name must not blow up a message either.
_PREVIEW_ITEM_CHARS = 80


def preview(items: Iterable[Any], limit: int = PREVIEW_ITEMS) -> str:
    """A bounded, list-like text of ``items`` for error messages built from user data.

    At most ``limit`` items are shown (each repr cut to a few dozen characters), followed by how
    many were left out: ``preview(["a", "b"])`` is ``['a', 'b']`` and
    ``preview(range(10), 3)`` is ``[0, 1, 2, ...] (7 more)``. A submission with 200,000 columns
    thus yields a message of a few hundred characters, not megabytes.
    """
    values = list(items)
    numpy = sys.modules.get("numpy")  # only loaded numpy can have produced numpy scalars
    shown = []
    for value in values[:limit]:
        if numpy is not None and isinstance(value, numpy.generic):
            value = value.item()  # 1, not np.int64(1)
        text = repr(value)
        shown.append(text if len(text) <= _PREVIEW_ITEM_CHARS else f"{text[:_PREVIEW_ITEM_CHARS - 3]}...")
    left_out = len(values) - len(shown)
    if not left_out:
        return f"[{', '.join(shown)}]"
    return f"[{', '.join([*shown, '...'])}] ({left_out:,} more)"
