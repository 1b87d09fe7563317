"""Typed errors shared by every part of WMRL.

Every error a user can trigger with bad input derives from :class:`WMRLError`, so a
training loop can catch the family without a catch-all ``except``.
"""


class WMRLError(Exception):
    """Base class of every error WMRL raises on purpose."""


class InvalidSubmissionError(WMRLError):
    """A submission does not match the task's expected format.

    The message names the problem precisely (missing column, row count, ids, NaN,
    values out of range). An invalid submission scores 0; it is not an infra failure.
    """


class TaskFormatError(WMRLError):
    """A task folder is corrupt or incomplete; the message names the missing piece."""


class TaskNotFoundError(WMRLError, KeyError):
    """No task with the requested id exists in any configured tasks directory."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SandboxUnavailableError(WMRLError):
    """The requested sandbox backend cannot run on this machine (message says how to fix)."""


class ConfigError(WMRLError, ValueError):
    """A configuration value is invalid."""
