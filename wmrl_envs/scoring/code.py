"""Raw scores for code tasks (MLE-Dojo, DSBench): one world-model batch and one sandbox fan-out.

:class:`CodeScorer` is the code families' scorer for :class:`~wmrl_envs.scoring.core.ScoringCore`.
Given groups (task, scripts, group id) and their streams, it

* world-model scores every script of the ``world_model`` and ``anchor`` groups in **one**
  batch (:meth:`WorldModel.predict` over all of them);
* executes every script of the ``real`` and ``anchor`` groups in **one** parallel fan-out
  through the executor pool, and grades each submission against the private answers here,
  in the calling process (agent code never sees the answers).

Before either, every script meets the static prover (:mod:`wmrl_envs.analysis.proofs`). A
script proved to fail is neither predicted nor executed, on any stream: its outcome is exact,
so its reward (0) and, on an anchor, its calibrator pair (the world model's proved 0, the real
0) are what executing it gives. The proof's seconds are charged as world-model time. A
response without a fenced Python block is the simplest such proof; it enters no pair, since it
tells the calibrator nothing about the world model.

Every sample's ``status`` is in the vocabulary of :mod:`wmrl_envs.outcome`, the same for an
executed run (classified here from the executor's status, the traceback and the grader), a
proof and a world-model estimate.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_envs import outcome
from wmrl_envs.analysis.code_features import solution_family
from wmrl_envs.analysis.proofs import Prover
from wmrl_envs.errors import InvalidSubmissionError
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.scoring.results import ScoredGroup, ScoreResult, bounded, tail
from wmrl_envs.task_spec import Task

log = logging.getLogger(__name__)
_FENCE = re.compile(r"```(?:python|py|python3)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
NO_CODE = "no fenced ```python block found in the response"
#: Longest exception line a failed run's result quotes (characters).
MAX_EXCEPTION_CHARS = 300


def extract_code(response: str) -> str | None:
    """The last fenced Python block of an agent response, or None if there is none.

    The response format is a short analysis followed by one fenced block; taking the last
    block lets an agent quote code in its analysis without that code being run.
    """
    blocks = _FENCE.findall(response or "")
    return blocks[-1] if blocks else None


@dataclass
class CodeGroup:
    """One GRPO group of a code task: the members' scripts (None: the response had no code)."""

    task: Task
    scripts: list[str | None]
    group_id: Hashable = None


class CodeScorer:
    """Executes and world-model scores code-task groups (see the module docstring).

    Args:
        world_model: A :class:`~wmrl_envs.world_models.WorldModel` or a registry name
            (built on first use, so an execution-only scorer never loads one).
        world_model_kwargs: Options for :func:`~wmrl_envs.world_models.make_world_model`.
        executor: Sandbox backend name (:data:`~wmrl_envs.sandbox.DEFAULT_EXECUTOR` by default).
        workers: Parallel executions (default: one per core).
        prove: Run the static prover first and settle proved failures without predicting or
            executing them (False: every script is predicted or executed).
        execute_proved: Execute proved failures all the same, and take their outcome from the
            run (an audit of the prover: a run that contradicts a proof is logged).
    """

    def __init__(self, world_model: Any = "surrogate", world_model_kwargs: dict[str, Any] | None = None,
                 executor: str = DEFAULT_EXECUTOR, workers: int | None = None, *, prove: bool = True,
                 execute_proved: bool = False) -> None:
        self._world_model_spec = world_model
        self._world_model_kwargs = dict(world_model_kwargs or {})
        self._world_model = None if isinstance(world_model, str) else world_model
        self.executor_name = executor
        self.workers = workers
        self.prove = prove
        self.execute_proved = execute_proved
        self.prover = Prover()
        self._pool = None
        self._answers: dict[str, Any] = {}
        self._lock = threading.Lock()

    # Pools hold threads and a loaded model is large: both are rebuilt after unpickling.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_pool=None, _answers={}, _lock=None)
        if isinstance(self._world_model_spec, str):
            state["_world_model"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def world_model_name(self) -> str:
        spec = self._world_model_spec
        return spec if isinstance(spec, str) else getattr(spec, "name", type(spec).__name__)

    @property
    def world_model(self):
        if self._world_model is None:
            from wmrl_envs.world_models import make_world_model

            self._world_model = make_world_model(self._world_model_spec, **self._world_model_kwargs)
        return self._world_model

    @property
    def pool(self):
        with self._lock:
            if self._pool is None:
                from wmrl_envs.sandbox import ExecutorPool, make_executor

                self._pool = ExecutorPool(make_executor(self.executor_name), workers=self.workers)
            return self._pool

    # ------------------------------------------------------------------ scoring
    def score(self, groups: Sequence[CodeGroup], streams: Sequence[str]) -> list[ScoredGroup]:
        """Raw scores of every group on its stream: one world-model batch, one execution fan-out."""
        out = [ScoredGroup(g.task.id, g.group_id, stream,
                           [ScoreResult(task_id=g.task.id, stream=stream) for _ in g.scripts])
               for g, stream in zip(groups, streams)]
        predict: list[tuple[int, int]] = []
        execute: list[tuple[int, int]] = []
        for gi, (g, stream) in enumerate(zip(groups, streams)):
            for i, script in enumerate(g.scripts):
                sample = out[gi].samples[i]
                if script is None:
                    sample.valid, sample.error, sample.score = False, NO_CODE, 0.0
                    sample.status, sample.proved, sample.p_valid = outcome.NO_CODE, True, 0.0
                    if stream != "world_model":
                        sample.real_score = 0.0
                    continue
                sample.stratum = solution_family(script)
                if self.prove and self._settle(g.task, script, sample) and not self.execute_proved:
                    continue
                if stream in ("world_model", "anchor") and not sample.proved:
                    predict.append((gi, i))
                if stream in ("real", "anchor"):
                    execute.append((gi, i))
        self._predict(groups, out, predict)
        self._execute(groups, out, execute)
        return out

    def execute(self, tasks: Sequence[Task], scripts: Sequence[str | None]) -> list[ScoreResult]:
        """Execute and grade scripts of any tasks in one fan-out (real scores only, no world model)."""
        groups = [CodeGroup(t, [s]) for t, s in zip(tasks, scripts)]
        return [g.samples[0] for g in self.score(groups, ["real"] * len(groups))]

    def _settle(self, task: Task, script: str, sample: ScoreResult) -> bool:
        """Apply a proof of failure to the sample, as its exact outcome; False when none is found."""
        start, cpu = time.perf_counter(), time.process_time()
        proof = self.prover.prove(task, script)
        sample.cost["world_model_s"] = sample.cost.get("world_model_s", 0.0) + time.perf_counter() - start
        sample.cost["world_model_cpu_s"] = sample.cost.get("world_model_cpu_s", 0.0) + time.process_time() - cpu
        if proof is None:
            return False
        sample.status, sample.exception = proof.status, proof.exception
        sample.error = exception_message(1, proof.message)  # what the run's result line would say
        sample.proved, sample.valid, sample.p_valid, sample.score = True, False, 0.0, 0.0
        if sample.stream in ("real", "anchor"):
            sample.real_score = 0.0  # what executing it gives: a failed run scores 0
        if sample.stream in ("world_model", "anchor"):
            sample.wm_score_raw = 0.0  # what an outcome world model predicts for a proved failure
        return True

    def _predict(self, groups: Sequence[CodeGroup], out: list[ScoredGroup], items: list[tuple[int, int]]) -> None:
        if not items:
            return
        cpu0 = time.process_time()
        predictions = self.world_model.predict([groups[gi].task for gi, _ in items],
                                               [groups[gi].scripts[i] for gi, i in items])
        cpu_each = (time.process_time() - cpu0) / len(items)
        for (gi, i), p in zip(items, predictions):
            sample = out[gi].samples[i]
            sample.cost["world_model_s"] = sample.cost.get("world_model_s", 0.0) + p.cost_s
            sample.cost["world_model_cpu_s"] = sample.cost.get("world_model_cpu_s", 0.0) + cpu_each
            if not p.parsed or not np.isfinite(p.score):
                # An unscorable prediction is not a score of 0: the sample has no reward.
                sample.infra_failure = True
                sample.error = bounded(f"the world model gave no score: {p.error}")
                continue
            sample.wm_score_raw = float(p.score)
            sample.status, sample.exception, sample.p_valid = p.status, p.exception, float(p.p_valid)
            sample.proved = p.proved
            # A parsed prediction may still carry a reason; a predicted failure says which.
            sample.error = bounded(p.message if p.status != outcome.VALID and p.message else p.error)

    def _execute(self, groups: Sequence[CodeGroup], out: list[ScoredGroup], items: list[tuple[int, int]]) -> None:
        if not items:
            return
        runs = self.pool.run_batch([(groups[gi].scripts[i], groups[gi].task) for gi, i in items])
        for (gi, i), run in zip(items, runs):
            self._grade(groups[gi].task, out[gi].samples[i], run)

    def answers(self, task: Task):
        """The task's private answers, read once."""
        if task.id not in self._answers:
            self._answers[task.id] = task.answers()
        return self._answers[task.id]

    def _grade(self, task: Task, sample: ScoreResult, run) -> None:
        from wmrl_envs.grading import grade_file, submission_cap, task_reward
        from wmrl_envs.sandbox import ExecutionStatus

        proof = (sample.status, sample.exception) if sample.proved else None
        sample.stdout, sample.stderr = tail(run.stdout), tail(run.stderr)
        sample.executed, sample.execution_status, sample.proved = True, run.status.value, False
        sample.error = None  # an executed sample reports its run, not the world model's prediction
        sample.cost.update(execution_s=run.wall_s, execution_cpu_s=run.cpu_s)
        sample.status, sample.exception = run_outcome(run)
        try:
            if run.status is ExecutionStatus.INFRA_ERROR:
                sample.infra_failure = True
                sample.error = bounded(f"infrastructure failure (not a score): {run.error}")
            elif run.status is not ExecutionStatus.OK:
                sample.error = failure_message(run)
            elif run.submission_path is None:
                sample.error = "the script finished but wrote no submission.csv in the working directory"
            else:
                raw = grade_file(run.submission_path, self.answers(task), task.spec,
                                 max_bytes=submission_cap(task.sample_submission_path))
                score, details = task_reward(task, raw)
                sample.raw_score, sample.real_score, sample.valid, sample.leaderboard = raw, score, True, details
                sample.status = outcome.VALID
        except InvalidSubmissionError as exc:
            sample.error = bounded(f"invalid submission: {exc}")
            sample.status = outcome.INVALID_SUBMISSION
        finally:
            run.cleanup()
        if not sample.valid and not sample.infra_failure:
            sample.valid, sample.real_score = False, 0.0  # an invalid or failed submission scores 0
        if not sample.infra_failure:
            sample.score = sample.real_score  # an executed sample's reward is its real score
        if proof is not None and not sample.infra_failure and (sample.valid or proof != (sample.status, sample.exception)):
            log.warning("task %s: the run ended %s (%s), its proof said %s: %s", task.id, sample.status,
                        sample.exception, proof, sample.error)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def run_outcome(run) -> tuple[str, str | None]:
    """The status (:mod:`wmrl_envs.outcome`) and exception class of a run, before grading: an
    exit 0 says ``no_submission`` here, and grading turns it into ``valid`` or
    ``invalid_submission`` when a submission exists."""
    from wmrl_envs.sandbox import ExecutionStatus

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


def failure_message(run) -> str:
    """One bounded line saying why a run failed, with the exception's line when there is one."""
    from wmrl_envs.sandbox import ExecutionStatus

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
