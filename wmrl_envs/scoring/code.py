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

A world model may answer exactly too (the multi-fidelity model's sample run of a failure whose
class it measured never to differ from the full run's, ``Prediction.proved``): such an anchor
sample is settled as a proof settles it, and not executed again.

Every sample's ``status`` is in the vocabulary of :mod:`wmrl_envs.outcome`, the same for an
executed run (classified here from the executor's status, the traceback and the grader), a
proof and a world-model estimate.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_envs import outcome
from wmrl_envs.analysis.code_features import solution_family
from wmrl_envs.analysis.proofs import shared_prover
from wmrl_envs.errors import ConfigError
from wmrl_envs.grading.runs import exception_message, judge_run
from wmrl_envs.sandbox import DEFAULT_EXECUTOR, ExecutorPool, make_executor
from wmrl_envs.scoring.experience import Experience
from wmrl_envs.scoring.inflight import InFlightAnchors
from wmrl_envs.scoring.results import ScoredGroup, ScoreResult, bounded, charge_world_model, tail
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models import DEFAULT_WORLD_MODEL, make_world_model
from wmrl_envs.world_models.execution_cost import ExecutionCostModel

log = logging.getLogger(__name__)
_FENCE = re.compile(r"```(?:python|py|python3)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
NO_CODE = "no fenced ```python block found in the response"


def completion_text(completion: Any) -> str:
    """The text of a chat completion: a string, or the assistant messages' contents (dicts, or
    message objects with ``role`` and ``content``), joined by newlines."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion:
        fields = message if isinstance(message, dict) else vars(message)
        if fields.get("role") in (None, "assistant") and fields.get("content"):
            parts.append(str(fields["content"]))
    return "\n".join(parts)


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
        reuse: Answer a world-model sample whose code already ran in full on its task (in
            ``experience``) with that outcome (:mod:`~wmrl_envs.scoring.experience`), before any
            world model.
        neighbours: Move a world-model prediction by the residuals the world model made on
            executed anchors of the same task whose code differs from it only in numbers
            (:class:`~wmrl_envs.scoring.experience.NeighbourResiduals`; ``decided_by="neighbours"``).
        experience: Where reuse and neighbours read and record what executions taught (None: a
            new :class:`~wmrl_envs.scoring.experience.Experience` of this scorer's own), e.g. a
            :class:`~wmrl_envs.scoring.ray_calibrator.RemoteExperience` that every process of a
            Ray job shares.
    """

    def __init__(self, world_model: Any = DEFAULT_WORLD_MODEL, world_model_kwargs: dict[str, Any] | None = None,
                 executor: str = DEFAULT_EXECUTOR, workers: int | None = None, *, prove: bool = True,
                 execute_proved: bool = False, reuse: bool = True, neighbours: bool = True,
                 experience: Experience | Any = None) -> None:
        self._world_model_spec = world_model
        self._world_model_kwargs = dict(world_model_kwargs or {})
        self._world_model = None if isinstance(world_model, str) else world_model
        self.executor_name = executor
        self.workers = workers
        self.prove = prove
        self.execute_proved = execute_proved
        self.reuse = reuse
        self.neighbours = neighbours
        self.experience = experience if experience is not None else Experience()
        self.prover = shared_prover()
        self._cost_model: ExecutionCostModel | None = None  # loaded when an informed schedule first chooses
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
            self._world_model = make_world_model(self._world_model_spec, **self._world_model_kwargs)
        return self._world_model

    @property
    def pool(self):
        with self._lock:
            if self._pool is None:
                self._pool = ExecutorPool(make_executor(self.executor_name), workers=self.workers)
            return self._pool

    # ------------------------------------------------------------------ scoring
    def score(self, groups: Sequence[CodeGroup], streams: Sequence[str],
              choose: Callable[[list[ScoredGroup]], Sequence[bool]] | None = None, *,
              price: bool = False) -> list[ScoredGroup]:
        """Raw scores of every group on its stream: one world-model batch, one execution fan-out.

        ``choose`` (an informed schedule's, through the scoring core) sees the world-model groups
        once predicted and says which of them become anchors: those are executed as if they had
        been anchors from the start (their predictions kept, proved failures exact). With
        ``price`` it sees them priced too (:meth:`_price`)."""
        out, execute, uncorrected = self._prepare(groups, streams, choose, price)
        self._execute(groups, out, execute, uncorrected)
        return out

    def score_submitting(self, groups: Sequence[CodeGroup], streams: Sequence[str],
                         choose: Callable[[list[ScoredGroup]], Sequence[bool]] | None = None, *,
                         price: bool = False, tag: Hashable = None, timeout_s: float | None = None
                         ) -> tuple[list[ScoredGroup], InFlightAnchors | None]:
        """As :meth:`score`, but the anchor groups' runs are submitted, not awaited: every group
        comes back at once (the anchors with their predictions only), with the anchors in flight
        (None when the batch has none) for :meth:`land`. Real groups still run here."""
        out, execute, uncorrected = self._prepare(groups, streams, choose, price)
        anchors = [gi for gi, g in enumerate(out) if g.stream == "anchor"]
        position = {gi: k for k, gi in enumerate(anchors)}
        self._execute(groups, out, [(gi, i) for gi, i in execute if gi not in position], uncorrected)
        if not anchors:
            return out, None
        flight = InFlightAnchors(tag, [groups[gi] for gi in anchors], [out[gi] for gi in anchors],
                                 [(position[gi], i) for gi, i in execute if gi in position],
                                 {(position[gi], i): v for (gi, i), v in uncorrected.items() if gi in position},
                                 timeout_s)
        self._submit(flight)
        return out, flight

    def land(self, flight: InFlightAnchors, wait: bool = False) -> bool:
        """Grade an in-flight batch's runs and learn from them, once every run returned (``wait``:
        block until then, or until the timeout); False while some are under way. A run past the
        timeout is an infrastructure failure; a batch restored from a checkpoint is submitted again."""
        if flight.needs_submission:
            self._submit(flight)
        if not wait and not flight.done():
            return False
        executed = []
        for (gi, i), future in zip(flight.items, flight.futures or []):
            group, sample = flight.groups[gi], flight.scored[gi].samples[i]
            try:
                run = future.result(timeout=flight.remaining_s())
            except FutureTimeout:
                _time_out(sample, flight.timeout_s)
                continue
            self._grade(group.task, sample, run)
            executed.append((group.task, group.scripts[i], sample, flight.uncorrected.get((gi, i))))
        self._learn(executed)
        flight.items, flight.futures = [], []  # landed: nothing is left to run or to submit again
        return True

    def _submit(self, flight: InFlightAnchors) -> None:
        flight.futures = [self.pool.submit(flight.groups[gi].scripts[i], flight.groups[gi].task)
                          for gi, i in flight.items]
        flight.submitted_at = time.monotonic()

    def _prepare(self, groups: Sequence[CodeGroup], streams: Sequence[str],
                 choose: Callable[[list[ScoredGroup]], Sequence[bool]] | None, price: bool = False
                 ) -> tuple[list[ScoredGroup], list[tuple[int, int]], dict[tuple[int, int], float]]:
        """Everything :meth:`score` does before the runs: the groups' samples settled by proofs and
        reuse, or predicted; anchors chosen; and the samples left to execute."""
        out = [ScoredGroup(g.task.id, g.group_id, stream,
                           [ScoreResult(task_id=g.task.id, stream=stream) for _ in g.scripts])
               for g, stream in zip(groups, streams)]
        unsettled: list[tuple[int, int]] = []
        for gi, (g, stream) in enumerate(zip(groups, streams)):
            for i, script in enumerate(g.scripts):
                sample = out[gi].samples[i]
                if script is None:
                    sample.valid, sample.error, sample.score = False, NO_CODE, 0.0
                    sample.status, sample.proved, sample.p_valid = outcome.NO_CODE, True, 0.0
                    sample.decided_by = "proof"
                    if stream != "world_model":
                        sample.real_score = 0.0
                    continue
                sample.stratum = solution_family(script)
                if self.prove and self._settle(g.task, script, sample) and not self.execute_proved:
                    continue
                unsettled.append((gi, i))
        reused = self._reuse(groups, out, [(gi, i) for gi, i in unsettled if streams[gi] == "world_model"])
        predict: list[tuple[int, int]] = []
        execute: list[tuple[int, int]] = []
        for gi, i in unsettled:
            if (gi, i) in reused:
                continue
            if streams[gi] in ("world_model", "anchor") and not out[gi].samples[i].proved:
                predict.append((gi, i))
            if streams[gi] in ("real", "anchor"):
                execute.append((gi, i))
        uncorrected = self._predict(groups, out, predict)
        if choose is not None:
            execute += self._promote(groups, out, choose, price)
        if not self.execute_proved:  # an exact prediction (a sample run's exact failure) needs no full run
            execute = [(gi, i) for gi, i in execute if not self._settled_by_prediction(out[gi].samples[i])]
        return out, execute, uncorrected

    def _promote(self, groups: Sequence[CodeGroup], out: list[ScoredGroup],
                 choose: Callable[[list[ScoredGroup]], Sequence[bool]], price: bool = False) -> list[tuple[int, int]]:
        """Turn the world-model groups ``choose`` picks into anchors; returns the samples to execute
        (a proved failure, or a reused outcome, is exact: it is not run)."""
        candidates = [gi for gi, g in enumerate(out) if g.stream == "world_model"]
        if price:
            self._price(groups, out, candidates)
        picks = list(choose([out[gi] for gi in candidates]))
        if len(picks) != len(candidates):
            raise ConfigError(f"choose() answered for {len(picks)} groups, {len(candidates)} were offered")
        execute = []
        for gi, pick in zip(candidates, picks):
            if not pick:
                continue
            out[gi].stream = "anchor"
            for i, sample in enumerate(out[gi].samples):
                sample.stream = "anchor"
                if groups[gi].scripts[i] is None or (sample.proved and not self.execute_proved):
                    # As an anchor from the start: the exact outcome is the real one.
                    sample.real_score = 0.0 if sample.decided_by == "proof" else sample.wm_score_raw
                    sample.valid = sample.status == outcome.VALID
                    if sample.wm_score_raw is None:
                        sample.wm_score_raw = sample.real_score
                else:
                    execute.append((gi, i))
        return execute

    def _price(self, groups: Sequence[CodeGroup], out: list[ScoredGroup], candidates: list[int]) -> None:
        """Give every candidate sample that would run its predicted CPU-seconds (what an informed
        schedule per cost weighs), charged as world-model time; a response without code costs 0, an
        exact outcome has no price (it is not run, unless the scorer executes proved failures)."""
        items = []
        for gi in candidates:
            for i, sample in enumerate(out[gi].samples):
                if groups[gi].scripts[i] is None:
                    sample.predicted_cpu_s = 0.0
                elif not sample.proved or (self.execute_proved and sample.decided_by == "proof"):
                    items.append((gi, i))
        if not items:
            return
        start, cpu = time.perf_counter(), time.process_time()
        if self._cost_model is None:
            self._cost_model = ExecutionCostModel.load()
        prices = self._cost_model.predict([groups[gi].task for gi, _ in items],
                                          [groups[gi].scripts[i] for gi, i in items])
        _charge(out, items, start, cpu)
        for (gi, i), price in zip(items, prices):
            out[gi].samples[i].predicted_cpu_s = float(price)

    @staticmethod
    def _settled_by_prediction(sample: ScoreResult) -> bool:
        """Settle an anchor sample whose predicted outcome is exact: its real score is the 0 that
        executing it gives (as for a proof), and the full run is saved."""
        if sample.stream != "anchor" or not sample.proved or sample.executed:
            return False
        sample.real_score, sample.valid = 0.0, False
        return True

    def execute(self, tasks: Sequence[Task], scripts: Sequence[str | None]) -> list[ScoreResult]:
        """Execute and grade scripts of any tasks in one fan-out (real scores only, no world model).
        The runs go through :meth:`_execute`, as a training batch's do, so a subclass that replays
        known runs there (the benchmarks' memo) replays these too."""
        groups = [CodeGroup(t, [s]) for t, s in zip(tasks, scripts)]
        return [g.samples[0] for g in self.score(groups, ["real"] * len(groups))]

    def execute_submitting(self, tasks: Sequence[Task], scripts: Sequence[str | None]
                           ) -> tuple[list[ScoreResult], InFlightAnchors | None]:
        """As :meth:`execute`, but the runs are submitted, not awaited: the samples come back at once
        and :meth:`land` (``wait=True``) on the batch in flight fills them in. The batch is None when
        nothing runs (no code, or a proved failure: those samples are final already)."""
        groups = [CodeGroup(t, [s]) for t, s in zip(tasks, scripts)]
        out, execute, uncorrected = self._prepare(groups, ["real"] * len(groups), None)
        samples = [g.samples[0] for g in out]
        if not execute:
            return samples, None
        flight = InFlightAnchors(None, groups, out, execute, uncorrected)
        self._submit(flight)
        return samples, flight

    def _settle(self, task: Task, script: str, sample: ScoreResult) -> bool:
        """Apply a proof of failure to the sample, as its exact outcome; False when none is found."""
        start, cpu = time.perf_counter(), time.process_time()
        proof = self.prover.prove(task, script)
        charge_world_model([sample], start, cpu)
        if proof is None:
            return False
        sample.status, sample.exception = proof.status, proof.exception
        sample.error = exception_message(1, proof.message)  # what the run's result line would say
        sample.proved, sample.valid, sample.p_valid, sample.score = True, False, 0.0, 0.0
        sample.decided_by = "proof"
        if sample.stream in ("real", "anchor"):
            sample.real_score = 0.0  # what executing it gives: a failed run scores 0
        if sample.stream in ("world_model", "anchor"):
            sample.wm_score_raw = 0.0  # what an outcome world model predicts for a proved failure
            sample.wm_status, sample.wm_stage = proof.status, "proof"
        return True

    def _reuse(self, groups: Sequence[CodeGroup], out: list[ScoredGroup],
               items: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """Answer the world-model samples whose code already ran in full on their task with that
        outcome (one lookup for the batch); returns those answered. The outcome is exact
        (``proved``): no map may move it."""
        if not (self.reuse and items):
            return set()
        start, cpu = time.perf_counter(), time.process_time()
        known = self.experience.lookup([(groups[gi].task.data_key, groups[gi].scripts[i]) for gi, i in items])
        _charge(out, items, start, cpu)
        reused = set()
        for (gi, i), executed in zip(items, known):
            if executed is None:
                continue
            sample = out[gi].samples[i]
            sample.status, sample.exception, sample.error = executed.status, executed.exception, executed.error
            sample.wm_score_raw = executed.real_score  # nothing ran now: no raw metric of this step
            sample.p_valid = 1.0 if executed.status == outcome.VALID else 0.0
            sample.proved, sample.decided_by = True, "reuse"
            reused.add((gi, i))
        return reused

    def _predict(self, groups: Sequence[CodeGroup], out: list[ScoredGroup],
                 items: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
        """Predict the items; returns each scored item's raw score before any neighbour correction."""
        uncorrected: dict[tuple[int, int], float] = {}
        if not items:
            return uncorrected
        cpu0 = time.process_time()
        predictions = self.world_model.predict([groups[gi].task for gi, _ in items],
                                               [groups[gi].scripts[i] for gi, i in items])
        cpu_each = (time.process_time() - cpu0) / len(items)
        correct: list[tuple[int, int]] = []
        for (gi, i), p in zip(items, predictions):
            sample = out[gi].samples[i]
            sample.cost["world_model_s"] = sample.cost.get("world_model_s", 0.0) + p.cost_s
            sample.cost["world_model_cpu_s"] = sample.cost.get("world_model_cpu_s", 0.0) + cpu_each + p.cpu_s
            if not p.parsed or not np.isfinite(p.score):
                # An unscorable prediction is not a score of 0: the sample has no reward.
                sample.infra_failure = True
                sample.error = bounded(f"the world model gave no score: {p.error}")
                continue
            sample.wm_score_raw = float(p.score)
            sample.wm_uncertainty = float(p.uncertainty) if np.isfinite(p.uncertainty) else None
            sample.status, sample.exception, sample.p_valid = p.status, p.exception, float(p.p_valid)
            sample.wm_status, sample.wm_stage = p.status, p.stage
            sample.proved, sample.decided_by = p.proved, p.stage
            # A parsed prediction may still carry a reason; a predicted failure says which.
            sample.error = bounded(p.message if p.status != outcome.VALID and p.message else p.error)
            uncorrected[(gi, i)] = sample.wm_score_raw
            if self.neighbours and not p.proved:
                correct.append((gi, i))
        self._correct_by_neighbours(groups, out, correct)
        return uncorrected

    def _correct_by_neighbours(self, groups: Sequence[CodeGroup], out: list[ScoredGroup],
                               items: list[tuple[int, int]]) -> None:
        """Move the raw predictions by their executed neighbours' residuals (one query for the
        batch; the scoring core maps or clips them into the reward's range, as any raw score)."""
        if not items:
            return
        start, cpu = time.perf_counter(), time.process_time()
        corrections = self.experience.corrections([(groups[gi].task.data_key, groups[gi].scripts[i]) for gi, i in items])
        _charge(out, items, start, cpu)
        for (gi, i), (shift, n) in zip(items, corrections):
            if n > 0:
                sample = out[gi].samples[i]
                sample.wm_score_raw += shift
                sample.decided_by = sample.wm_stage = "neighbours"

    def _execute(self, groups: Sequence[CodeGroup], out: list[ScoredGroup], items: list[tuple[int, int]],
                 uncorrected: Mapping[tuple[int, int], float]) -> None:
        if not items:
            return
        runs = self.pool.run_batch([(groups[gi].scripts[i], groups[gi].task) for gi, i in items])
        for (gi, i), run in zip(items, runs):
            self._grade(groups[gi].task, out[gi].samples[i], run)
        self._learn([(groups[gi].task, groups[gi].scripts[i], out[gi].samples[i], uncorrected.get((gi, i)))
                     for gi, i in items])

    def _learn(self, executed: list[tuple[Task, str, ScoreResult, float | None]]) -> None:
        """What a batch's executed samples teach, each ``(task, script, sample, uncorrected)``: the
        experience (:meth:`Experience.record`, one call), and the run's CPU to a world model that
        prices its own runs."""
        if not executed:
            return
        self.experience.record([(task.data_key, script, sample, uncorrected)
                                for task, script, sample, uncorrected in executed])
        observe = getattr(self._world_model, "observe_execution", None)
        for task, _, sample, _ in executed:
            if observe is not None and sample.executed and not sample.infra_failure:
                observe(task.id, sample.cost.get("execution_cpu_s", math.nan))

    def state_dict(self) -> dict[str, Any]:
        """What the run taught the scorer: its experience (executed outcomes, neighbour residuals)
        and its world model's state (if any)."""
        model = self._world_model if hasattr(self._world_model, "state_dict") else None
        return {**self.experience.state_dict(), "world_model": model.state_dict() if model else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.experience.load_state_dict(state)
        if state.get("world_model") is not None:
            self.world_model.load_state_dict(state["world_model"])

    def answers(self, task: Task):
        """The task's private answers, read once."""
        if task.data_key not in self._answers:
            self._answers[task.data_key] = task.answers()
        return self._answers[task.data_key]

    def _grade(self, task: Task, sample: ScoreResult, run) -> None:
        proof = (sample.status, sample.exception) if sample.proved else None
        sample.stdout, sample.stderr = tail(run.stdout), tail(run.stderr)
        sample.executed, sample.execution_status, sample.proved = True, run.status.value, False
        sample.decided_by = "execution"
        sample.cost.update(execution_s=run.wall_s, execution_cpu_s=run.cpu_s)
        try:
            verdict = judge_run(task, run, self.answers(task))
        finally:
            run.cleanup()
        # An executed sample reports its run, not the world model's prediction.
        sample.status, sample.exception, sample.error = verdict.status, verdict.exception, verdict.error
        sample.infra_failure = verdict.infra_failure
        if not verdict.infra_failure:  # an infrastructure failure says nothing of the script: no validity, no score
            sample.valid = verdict.valid
            sample.real_score = sample.score = verdict.score  # an executed sample's reward is its real score
        if verdict.valid:
            sample.raw_score, sample.leaderboard = verdict.raw_score, verdict.leaderboard
        if proof is not None and not sample.infra_failure and (sample.valid or proof != (sample.status, sample.exception)):
            log.warning("task %s: the run ended %s (%s), its proof said %s: %s", task.id, sample.status,
                        sample.exception, proof, sample.error)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._world_model is not None and hasattr(self._world_model, "close"):
            self._world_model.close()  # a multi-fidelity world model holds a sandbox pool of its own


def _charge(out: Sequence[ScoredGroup], items: Sequence[tuple[int, int]], start: float, cpu: float) -> None:
    """Charge the time since ``start`` and ``cpu`` to ``items`` evenly, as world-model time (keying
    a script for reuse or its neighbours costs a parse)."""
    charge_world_model((out[gi].samples[i] for gi, i in items), start, cpu)


def _time_out(sample: ScoreResult, timeout_s: float | None) -> None:
    """An anchor's run that did not return in time: an infrastructure failure, never a reward."""
    sample.infra_failure, sample.status, sample.decided_by = True, outcome.INFRA_FAILURE, "execution"
    sample.error = bounded(f"infrastructure failure (not a score): the anchor's run did not return within "
                           f"{timeout_s:g} s of its submission")
