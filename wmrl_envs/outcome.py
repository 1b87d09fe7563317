"""The outcome of a solution script: one vocabulary for executed runs, proofs and world models.

Every stream reports how a script ended with the same words (``info["status"]``), whether the
script ran in the sandbox, a static proof settled it without running, or a world model
estimated it:

========================  =============================================================
status                    meaning
========================  =============================================================
``no_code``               the response holds no fenced Python block
``syntax_error``          Python refuses to compile the script
``import_error``          an import fails (``ModuleNotFoundError``, ``ImportError``)
``runtime_error``         the script raises (``exception`` names the class) or is killed
                          for memory
``timeout``               the wall-clock limit killed the script
``no_submission``         the script exits cleanly without writing ``submission.csv``
``invalid_submission``    the grader rejects the submission (``reason`` says why)
``valid``                 a valid, graded submission
========================  =============================================================

Every status but ``valid`` scores 0. ``infra_failure`` is not an outcome of the script (the
sandbox could not run it, the world model gave no number): it is never a score.

This module is pure: it classifies what executors and graders report and knows nothing of them.
"""

from __future__ import annotations

import re

NO_CODE = "no_code"
SYNTAX_ERROR = "syntax_error"
IMPORT_ERROR = "import_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
NO_SUBMISSION = "no_submission"
INVALID_SUBMISSION = "invalid_submission"
VALID = "valid"
#: Not an outcome of the script: nothing could be said about it (never a score).
INFRA_FAILURE = "infra_failure"

#: Every outcome a script can have, failures first in the order a run meets them.
STATUSES: tuple[str, ...] = (NO_CODE, SYNTAX_ERROR, IMPORT_ERROR, RUNTIME_ERROR, TIMEOUT, NO_SUBMISSION,
                             INVALID_SUBMISSION, VALID)
FAILURES: tuple[str, ...] = STATUSES[:-1]

_SYNTAX_CLASSES = {"SyntaxError", "IndentationError", "TabError"}
_IMPORT_CLASSES = {"ImportError", "ModuleNotFoundError"}
# The first line of an exception report: ``[package.module.]ClassName[: message]``.
_EXCEPTION_LINE = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*)(?::\s|:?$)")
# A SyntaxError report has no "Traceback" header; it starts at the file and line.
_FILE_LINE = re.compile(r'^  File ".*", line \d+')
# Without a header (cut from a long tail), only a last line that names an exception class counts.
_BARE_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)(?::\s|$)")


def exception_from_stderr(stderr: str) -> tuple[str | None, str | None]:
    """The uncaught exception's short class name and its first line, read from a run's stderr.

    Python ends a run that raised with the last traceback: a ``Traceback`` header, indented
    frame lines, then ``[module.]ClassName: message`` (the message may span lines, and a
    ``SyntaxError`` report has no header). Output printed before the traceback or after it
    (warnings at exit) is not the exception. Returns ``(None, None)`` when there is none.
    """
    lines = stderr.splitlines()
    start = next((i for i in range(len(lines) - 1, -1, -1)
                  if lines[i].startswith("Traceback (most recent call last)")), None)
    if start is None:
        start = next((i for i in range(len(lines) - 1, -1, -1) if _FILE_LINE.match(lines[i])), None)
    if start is None:
        last = next((line for line in reversed(lines) if line.strip()), "")
        if not _BARE_EXCEPTION.match(last):
            return None, None
        start, lines = -1, [last]
    for line in lines[start + 1:]:
        if line and not line[0].isspace():
            match = _EXCEPTION_LINE.match(line)
            if match is None:
                return None, None
            return match.group("cls").rsplit(".", 1)[-1], line.rstrip()
    return None, None


def status_of_exception(exception: str | None) -> str:
    """The status a script that raised ``exception`` (a short class name) ends with."""
    if exception in _SYNTAX_CLASSES:
        return SYNTAX_ERROR
    if exception in _IMPORT_CLASSES:
        return IMPORT_ERROR
    return RUNTIME_ERROR
