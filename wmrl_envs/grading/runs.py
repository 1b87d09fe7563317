"""What an executed run earns: its outcome, the line that says why, and its grade.

One home for judging a sandbox run, used wherever a script is executed and graded: the scoring
core's real and anchor runs (:class:`~wmrl_envs.scoring.code.CodeScorer`) and the world model's
run on a sample of the task (:mod:`wmrl_envs.world_models.sample_run`). The submission is graded
here, in the calling process, against answers that never enter the sandbox.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wmrl_envs import outcome
from wmrl_envs.errors import InvalidSubmissionError
from wmrl_envs.grading.grader import grade_file, submission_cap
from wmrl_envs.grading.reward import task_reward
from wmrl_envs.sandbox.base import ExecutionResult, ExecutionStatus

if TYPE_CHECKING:
    import pandas as pd

    from wmrl_envs.task_spec import Task

#: Longest error message a result keeps (characters); the middle of a longer one is cut.
MAX_MESSAGE_CHARS = 1_000
#: Longest stdout/stderr tail a result keeps (characters).
MAX_OUTPUT_CHARS = 4_000
#: Longest exception line a failed run's result quotes (characters).
MAX_EXCEPTION_CHARS = 300


def bounded(text: str | None, limit: int = MAX_MESSAGE_CHARS) -> str | None:
    """``text`` cut to at most ``limit`` characters, keeping its head and tail and saying how much
    was left out (a message's start names the problem, its end often the decisive detail)."""
    if text is None or len(text) <= limit:
        return text
    marker = f" [... {len(text) - limit:,} characters left out ...] "
    keep = max(limit - len(marker), 0)
    head = keep * 2 // 3
    return text[:head] + marker + text[len(text) - (keep - head):]


def tail(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """The last ``limit`` characters of program output, marked when cut."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit:,} earlier characters left out ...]\n" + text[-limit:]


@dataclass
class RunVerdict:
    """How one executed run ended and what it earned.

    Attributes:
        status: The outcome (:mod:`wmrl_envs.outcome`): ``infra_failure`` when the sandbox could
            not run the script (never a score).
        exception: The short class of the exception the script raised, if any.
        error: Why the run did not score (bounded); None for a valid submission.
        raw_score: The metric value of a valid submission.
        score: The reward quantity: the task reward of a valid submission, 0 for any failure of
            the script, NaN for an infrastructure failure.
        leaderboard: The grading report of a valid submission (position, medal, rpg).
    """

    status: str
    exception: str | None = None
    error: str | None = None
    raw_score: float | None = None
    score: float = 0.0
    leaderboard: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.status == outcome.VALID

    @property
    def infra_failure(self) -> bool:
        return self.status == outcome.INFRA_FAILURE


def judge_run(task: Task, run: ExecutionResult, answers: pd.DataFrame,
              sample_submission: str | os.PathLike[str] | None = None) -> RunVerdict:
    """Grade ``run`` of a script for ``task`` against ``answers``.

    ``sample_submission`` sizes the largest submission read (default: the task's own); a run on a
    sample of the task passes the sample's. The run's files are left to the caller to clean up.
    """
    status, exception = run_outcome(run)
    if run.status is ExecutionStatus.INFRA_ERROR:
        return RunVerdict(status, error=bounded(f"infrastructure failure (not a score): {run.error}"),
                          score=math.nan)
    if run.status is not ExecutionStatus.OK:
        return RunVerdict(status, exception, failure_message(run))
    if run.submission_path is None:
        return RunVerdict(status, error="the script finished but wrote no submission.csv in the working directory")
    cap = submission_cap(sample_submission if sample_submission is not None else task.sample_submission_path)
    try:
        raw = grade_file(run.submission_path, answers, task.spec, max_bytes=cap)
    except InvalidSubmissionError as exc:
        return RunVerdict(outcome.INVALID_SUBMISSION, error=bounded(f"invalid submission: {exc}"))
    score, details = task_reward(task, raw)
    return RunVerdict(outcome.VALID, raw_score=raw, score=score, leaderboard=details)


def run_outcome(run: ExecutionResult) -> tuple[str, str | None]:
    """The status (:mod:`wmrl_envs.outcome`) and exception class of a run, before grading: an
    exit 0 says ``no_submission`` here, and grading turns it into ``valid`` or
    ``invalid_submission`` when a submission exists."""
    if run.status is ExecutionStatus.INFRA_ERROR:
        return outcome.INFRA_FAILURE, None
    if run.status is ExecutionStatus.TIMEOUT:
        return outcome.TIMEOUT, None
    if run.status is ExecutionStatus.MEMORY:
        return outcome.RUNTIME_ERROR, "MemoryError"
    if run.status is ExecutionStatus.OK:
        return outcome.NO_SUBMISSION, None
    exception, _ = outcome.exception_from_stderr(run.stderr)
    return outcome.status_of_exception(exception), exception


def failure_message(run: ExecutionResult) -> str:
    """One bounded line saying why a run failed, with the exception's line when there is one."""
    if run.status is ExecutionStatus.TIMEOUT:
        return f"the script exceeded its wall-clock limit and was killed after {run.wall_s:.0f}s"
    if run.status is ExecutionStatus.MEMORY:
        return "the script exceeded its memory limit and was killed"
    _, line = outcome.exception_from_stderr(run.stderr)
    last = line or next((line.strip() for line in reversed(run.stderr.splitlines()) if line.strip()), "")
    return exception_message(run.returncode, last)


def exception_message(returncode: int | None, line: str) -> str:
    """A failed run's result line: its exit code and the exception's line (Python exits 1 on one)."""
    message = f"the script failed with exit code {returncode}"
    return f"{message}: {bounded(line.strip(), MAX_EXCEPTION_CHARS)}" if line.strip() else message
