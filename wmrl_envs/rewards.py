"""Reward sources: how a solution script becomes a reward.

Every source returns the same quantity for a task (position score in [0, 1] for MLE
tasks, RPG for DSBench tasks), so an environment can switch between ``real``,
``world_model`` and ``fused`` rewards without changing its interface.

A :class:`ScoreResult` separates three outcomes that must never be confused:

* a valid submission, scored;
* an invalid submission or a crashing script: a legitimate score of 0 (``valid=False``);
* an infrastructure failure (the sandbox could not start): **not a score**
  (``infra_failure=True``). It is reported, gets reward 0 in the env, and trainers and the
  calibrator must drop it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import pandas as pd

from wmrl_envs.errors import InvalidSubmissionError
from wmrl_envs.tasks.spec import Task

STREAMS = ("real", "world_model", "anchor")

_FENCE = re.compile(r"```(?:python|py|python3)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(response: str) -> str | None:
    """Return the last fenced Python block of an agent response, or None if there is none.

    The response format is a short analysis followed by one fenced block; taking the last
    block lets an agent quote code in its analysis without that code being run.
    """
    blocks = _FENCE.findall(response or "")
    return blocks[-1] if blocks else None


@dataclass
class ScoreResult:
    """What scoring one solution produced. ``score`` is the reward quantity."""

    task_id: str
    stream: str
    score: float = 0.0
    raw_score: float | None = None
    real_score: float | None = None
    wm_score_raw: float | None = None
    wm_score_calibrated: float | None = None
    valid: bool = False
    error: str | None = None
    infra_failure: bool = False
    fusion_weight: float = 1.0
    stdout: str = ""
    stderr: str = ""
    status: str = ""
    leaderboard: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=lambda: {"execution_s": 0.0, "world_model_s": 0.0})


class RewardSource(Protocol):
    """Scores a group of scripts for one task. ``group_id`` lets fused sources pick a stream."""

    name: str

    def score_group(self, task: Task, scripts: Sequence[str | None], group_id: Any = None) -> list[ScoreResult]: ...


def reward_from_raw(task: Task, raw_score: float) -> tuple[float, dict[str, Any]]:
    """Turn a task's raw metric value into its reward quantity and the details to report.

    MLE tasks use the MLE-Dojo position score on the task's leaderboard. Tasks whose spec
    carries ``meta["reward"] == "rpg"`` use DSBench's relative performance gap, with the
    perfect (``g``) and baseline (``b``) scores recorded in the spec's meta.
    """
    from wmrl_envs.grading import get_metric, relative_performance_gap

    metric = get_metric(task.spec.metric)
    if task.spec.meta.get("reward") == "rpg":
        g, b = task.spec.meta["rpg_perfect"], task.spec.meta["rpg_baseline"]
        rpg = relative_performance_gap(raw_score, g, b, metric.higher_is_better)
        return float(rpg), {"rpg": float(rpg)}
    report = task.leaderboard().report(raw_score)
    # MLE-Dojo averages the position score over every board a task has (public and private).
    report["position_score"] = task.position_score(raw_score)
    return float(report["position_score"]), report


class RealReward:
    """Executes each script in a sandbox and grades its submission against private answers."""

    name = "real"

    def __init__(self, executor: str = "bwrap", workers: int | None = None) -> None:
        self.executor_name = executor
        self.workers = workers
        self._pool = None
        self._answers: dict[str, pd.DataFrame] = {}
        self._lock = threading.Lock()

    # Executors hold threads and subprocess state: rebuild them after unpickling.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_pool=None, _answers={}, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def pool(self):
        with self._lock:
            if self._pool is None:
                from wmrl_envs.sandbox import ExecutorPool, make_executor

                self._pool = ExecutorPool(make_executor(self.executor_name), workers=self.workers)
            return self._pool

    def answers(self, task: Task) -> pd.DataFrame:
        if task.id not in self._answers:
            self._answers[task.id] = task.answers()
        return self._answers[task.id]

    def score_group(self, task: Task, scripts: Sequence[str | None], group_id: Any = None) -> list[ScoreResult]:
        """Execute one group's scripts in parallel and grade each."""
        return self.score_batch([task] * len(scripts), scripts)

    def score_batch(self, tasks: Sequence[Task], scripts: Sequence[str | None]) -> list[ScoreResult]:
        """Execute scripts of any tasks in one parallel fan-out; ``None`` means no code was given."""
        runnable = [i for i, s in enumerate(scripts) if s is not None]
        runs = self.pool.run_batch([(scripts[i], tasks[i]) for i in runnable]) if runnable else []
        results = [
            ScoreResult(task_id=t.id, stream="real", real_score=0.0,
                        error="no fenced ```python block found in the response")
            for t in tasks
        ]
        for i, run in zip(runnable, runs):
            results[i] = self._grade_run(tasks[i], run)
        return results

    def _grade_run(self, task: Task, run) -> ScoreResult:
        from wmrl_envs.grading import grade, read_submission
        from wmrl_envs.sandbox import ExecutionStatus

        result = ScoreResult(
            task_id=task.id,
            stream="real",
            stdout=run.stdout,
            stderr=run.stderr,
            status=run.status.value,
            cost={"execution_s": run.wall_s, "execution_cpu_s": run.cpu_s, "world_model_s": 0.0},
        )
        try:
            if run.status is ExecutionStatus.INFRA_ERROR:
                result.infra_failure = True
                result.error = f"infrastructure failure (not a score): {run.error}"
            elif run.status is not ExecutionStatus.OK:
                result.error = _failure_message(run)
            elif run.submission_path is None:
                result.error = "the script finished but wrote no submission.csv in the working directory"
            else:
                submission = read_submission(run.submission_path)
                raw = grade(submission, self.answers(task), task.spec)
                score, details = reward_from_raw(task, raw)
                result.raw_score, result.real_score, result.score = raw, score, score
                result.valid, result.leaderboard = True, details
        except InvalidSubmissionError as exc:
            result.error = f"invalid submission: {exc}"
        finally:
            run.cleanup()
        if not result.valid and not result.infra_failure:
            result.real_score = 0.0  # an invalid or failed submission is a real score of 0
        return result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _failure_message(run) -> str:
    from wmrl_envs.sandbox import ExecutionStatus

    if run.status is ExecutionStatus.TIMEOUT:
        return f"the script exceeded its wall-clock limit and was killed after {run.wall_s:.0f}s"
    if run.status is ExecutionStatus.MEMORY:
        return "the script exceeded its memory limit and was killed"
    return f"the script failed with exit code {run.returncode}"
