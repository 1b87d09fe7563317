"""What a run's executions taught: the outcome of every script executed in full, by task and code.

A training policy repeats itself, and an anchor's execution is the ground truth a world model
lacks. :class:`ExecutedOutcomes` keeps each executed script's outcome under its task and its code
(:func:`~wmrl_envs.analysis.script.code_key`: the syntax tree, so whitespace and comments
do not matter). A task here is its :attr:`~wmrl_envs.task_spec.Task.data_key` (its id and a digest
of its data), the "task id" of the tables below: a task whose data changed under the same id is
another task, and is never answered with the old data's outcomes. When a world-model sample's
script was already executed on its task, the :class:`~wmrl_envs.scoring.code.CodeScorer` answers
it with that outcome (``decided_by="reuse"``): exact, up to the script's own randomness (a script
that draws without a seed scores differently run to run; the mean of its runs is kept). Its state is saved and resumed with the scoring core's.

A policy also repeats itself with other numbers: the same program with another seed, another
learning rate or another number of trees. :class:`NeighbourResiduals` keeps, for each task and
:func:`~wmrl_envs.analysis.script.shape_key` (the code up to its numeric literals), how far the
world model's raw score fell from the real one on the anchors executed so far. A new
prediction of that shape on that task moves by the neighbours' mean residual, shrunk toward
0 by empirical Bayes (:func:`prior_pairs`): ``raw + n / (n + k) * mean``. The shrinkage ``k`` is
the within-shape residual variance over the between-shape one, measured on the run's own anchors,
so a world model whose errors are shared by a shape's variants is corrected nearly in full and one
whose errors are noise is left alone. (A fallback to the residuals of the script's estimator
family on the task was judged once and removed: it moved 13-15% of anchors, changed the last
third's Spearman by +0.02 and -0.01, and the sample-run run ended 0.067 lower,
``bench/results/family_neighbours.md``.) An anchor is
corrected only from anchors of earlier batches, so the calibrator's pair for it stays out of
sample.

:class:`Experience` holds both and is asked and fed a batch at a time. A scorer holds one of its
own, or a :class:`~wmrl_envs.scoring.ray_calibrator.RemoteExperience`: the one a Ray job's
calibrator actor holds for every process, which a batch then costs one round trip.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_envs.analysis.script import KEYS_PYTHON, ScriptTable, code_key, shape_key
from wmrl_envs.scoring.results import ScoreResult

log = logging.getLogger(__name__)

#: Outcomes kept (oldest dropped first): far more distinct scripts than a run executes.
MAX_OUTCOMES = 100_000
#: 2: tables keyed by the task's data key; format 1 keyed them by the task id alone, whose data a
#: checkpoint cannot vouch for, so its rows are not loaded (:func:`_current_rows`).
_STATE_FORMAT = 2
#: Shrinkage pseudo-pairs while too few shapes have repeats to measure it (:func:`prior_pairs`).
DEFAULT_PRIOR_PAIRS = 1.0
#: Shapes with at least two anchors needed before the shrinkage is measured.
MIN_REPEATED_SHAPES = 3
#: Bounds on the measured shrinkage: never a full trust of one neighbour, never none at all.
PRIOR_PAIRS_RANGE = (0.1, 100.0)


def _current_rows(state: Mapping[str, Any], name: str) -> list:
    """A saved table's rows, or none (and one warning) when it was saved in an older format: keyed
    by task ids alone, it could answer a task whose data has changed since."""
    if state.get("format", 1) == _STATE_FORMAT:
        return state[name]
    if state[name]:
        log.warning("a checkpoint's %d %s were keyed by task ids alone (format %s): not loaded, since the "
                    "tasks' data may have changed since; the run learns them again", len(state[name]), name,
                    state.get("format", 1))
    return []


@dataclass
class ExecutedOutcome:
    """The outcome of one code on one task, over its ``runs`` full executions."""

    status: str
    exception: str | None
    error: str | None
    real_score: float
    runs: int = 1


class ExecutedOutcomes:
    """Executed outcomes by ``(task id, code key)``."""

    def __init__(self) -> None:
        self._outcomes = ScriptTable(ExecutedOutcome, MAX_OUTCOMES)

    def __len__(self) -> int:
        return len(self._outcomes)

    def record(self, task_id: str, script: str, sample: ScoreResult) -> None:
        """Keep an executed sample's outcome; an infrastructure failure says nothing and is skipped."""
        if not sample.executed or sample.infra_failure or sample.real_score is None:
            return
        key = (task_id, code_key(script))
        known = self._outcomes.get(key)
        real = float(sample.real_score)
        if known is not None:  # the running mean of the code's real scores; the latest run's words
            real = known.real_score + (real - known.real_score) / (known.runs + 1)
        self._outcomes.put(key, ExecutedOutcome(sample.status, sample.exception, sample.error, real,
                                                1 if known is None else known.runs + 1))

    def lookup(self, task_id: str, script: str) -> ExecutedOutcome | None:
        return self._outcomes.get((task_id, code_key(script)))

    def state_dict(self) -> dict[str, Any]:
        return {"format": _STATE_FORMAT, "keys_python": KEYS_PYTHON, "outcomes": self._outcomes.rows()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._outcomes.load_rows(_current_rows(state, "outcomes"), state.get("keys_python"))


@dataclass
class ResidualSummary:
    """Residuals (real minus the world model's raw score) of one shape on one task: their count,
    mean and sum of squared deviations (Welford)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, residual: float) -> None:
        self.n += 1
        delta = residual - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (residual - self.mean)


def prior_pairs(summaries: list[ResidualSummary]) -> float:
    """The empirical-Bayes shrinkage of a shape's mean residual: the pooled within-shape variance
    over the mean square of shapes' true mean residuals (method of moments), in pseudo-pairs.
    :data:`DEFAULT_PRIOR_PAIRS` until :data:`MIN_REPEATED_SHAPES` shapes have two residuals;
    the upper bound when the shapes' means differ no more than their noise explains."""
    repeated = [s for s in summaries if s.n >= 2]
    if len(repeated) < MIN_REPEATED_SHAPES:
        return DEFAULT_PRIOR_PAIRS
    within = sum(s.m2 for s in repeated) / sum(s.n - 1 for s in repeated)
    # The prior is centred on 0 (the world model unmoved): the second moment about 0, not the variance.
    means = np.array([s.mean for s in summaries])
    between = float(np.mean(means**2)) - within * float(np.mean([1.0 / s.n for s in summaries]))
    lo, hi = PRIOR_PAIRS_RANGE
    if between <= 0.0:
        return hi
    return float(np.clip(within / between, lo, hi))


class NeighbourResiduals:
    """The world model's residuals on executed anchors by ``(task id, shape key)``, and the
    correction they give a new prediction of a shape already executed on its task."""

    def __init__(self) -> None:
        self._shapes = ScriptTable(ResidualSummary, MAX_OUTCOMES)
        self._prior_pairs: float | None = None  # measured lazily, reset by every record

    def __len__(self) -> int:
        return len(self._shapes)

    def record(self, task_id: str, script: str, wm_raw: float, real: float) -> None:
        """Learn an executed anchor's residual from its world-model raw score (uncorrected)."""
        shape = shape_key(script)
        if shape is None or not (np.isfinite(wm_raw) and np.isfinite(real)):
            return
        summary = self._shapes.get((task_id, shape)) or ResidualSummary()
        summary.add(float(real) - float(wm_raw))
        self._shapes.put((task_id, shape), summary)
        self._prior_pairs = None

    @property
    def prior_pairs(self) -> float:
        """The shrinkage of a shape's mean residual (:func:`prior_pairs`)."""
        if self._prior_pairs is None:
            self._prior_pairs = prior_pairs(list(self._shapes.values()))
        return self._prior_pairs

    def correction(self, task_id: str, script: str) -> tuple[float, int]:
        """What to add to a raw prediction of ``script`` on the task, and the neighbours behind it
        (0 and 0 when no script of its shape was executed there)."""
        if not len(self._shapes):  # nothing learned yet: no need to parse the script
            return 0.0, 0
        shape = shape_key(script)
        summary = None if shape is None else self._shapes.get((task_id, shape))
        if summary is None:
            return 0.0, 0
        k = self.prior_pairs
        return summary.n / (summary.n + k) * summary.mean, summary.n

    def state_dict(self) -> dict[str, Any]:
        return {"format": _STATE_FORMAT, "keys_python": KEYS_PYTHON, "shapes": self._shapes.rows()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._shapes.load_rows(_current_rows(state, "shapes"), state.get("keys_python"))  # family residuals, if any, unused
        self._prior_pairs = None


class Experience:
    """What a run's executions taught, both parts (:class:`ExecutedOutcomes`, :class:`NeighbourResiduals`),
    asked and fed a batch at a time."""

    def __init__(self) -> None:
        self.outcomes = ExecutedOutcomes()
        self.residuals = NeighbourResiduals()

    def __len__(self) -> int:
        """Codes executed, each on its task."""
        return len(self.outcomes)

    def lookup(self, scripts: Sequence[tuple[str, str]]) -> list[ExecutedOutcome | None]:
        """The executed outcome of each ``(task id, script)``; None where that code never ran on that task."""
        return [self.outcomes.lookup(task_id, script) for task_id, script in scripts]

    def corrections(self, predictions: Sequence[tuple[str, str]]) -> list[tuple[float, int]]:
        """:meth:`NeighbourResiduals.correction` of each ``(task id, script)``."""
        return [self.residuals.correction(task_id, script) for task_id, script in predictions]

    def record(self, executed: Sequence[tuple[str, str, ScoreResult, float | None]]) -> None:
        """Learn from executed samples, each ``(task id, script, sample, uncorrected)``: its outcome
        under its code and, for an anchor, the world model's residual against ``uncorrected``, its
        raw score before any neighbour correction (None: the sample was not predicted)."""
        for task_id, script, sample, uncorrected in executed:
            self.outcomes.record(task_id, script, sample)
            if uncorrected is not None and not sample.infra_failure and sample.real_score is not None:
                self.residuals.record(task_id, script, uncorrected, sample.real_score)

    def state_dict(self) -> dict[str, Any]:
        # The keys of a CodeScorer's checkpoints since reuse came ("experience": the executed outcomes).
        return {"experience": self.outcomes.state_dict(), "residuals": self.residuals.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.outcomes.load_state_dict(state["experience"])
        self.residuals = NeighbourResiduals()
        if state.get("residuals") is not None:  # a checkpoint from before neighbour corrections has none
            self.residuals.load_state_dict(state["residuals"])
