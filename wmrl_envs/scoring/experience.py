"""What a run's executions taught: the outcome of every script executed in full, by task and code.

A training policy repeats itself, and an anchor's execution is the ground truth a world model
lacks. :class:`ExecutedOutcomes` keeps each executed script's outcome under its task and its code
(:func:`~wmrl_envs.analysis.script.code_key`: the syntax tree, so whitespace and comments
do not matter). When a world-model sample's script was already executed on its task, the
:class:`~wmrl_envs.scoring.code.CodeScorer` answers it with that outcome (``decided_by="reuse"``):
exact, up to the script's own randomness (a script that draws without a seed scores differently
run to run; the mean of its runs is kept). Its state is saved and resumed with the scoring core's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from wmrl_envs.analysis.script import code_key
from wmrl_envs.scoring.results import ScoreResult

#: Outcomes kept (oldest dropped first): far more distinct scripts than a run executes.
MAX_OUTCOMES = 100_000
_STATE_FORMAT = 1


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
        self._outcomes: OrderedDict[tuple[str, str], ExecutedOutcome] = OrderedDict()

    def __len__(self) -> int:
        return len(self._outcomes)

    def record(self, task_id: str, script: str, sample: ScoreResult) -> None:
        """Keep an executed sample's outcome; an infrastructure failure says nothing and is skipped."""
        if not sample.executed or sample.infra_failure or sample.real_score is None:
            return
        key = (task_id, code_key(script))
        known = self._outcomes.pop(key, None)
        real = float(sample.real_score)
        if known is not None:  # the running mean of the code's real scores; the latest run's words
            real = known.real_score + (real - known.real_score) / (known.runs + 1)
        self._outcomes[key] = ExecutedOutcome(sample.status, sample.exception, sample.error, real,
                                              1 if known is None else known.runs + 1)
        while len(self._outcomes) > MAX_OUTCOMES:
            self._outcomes.popitem(last=False)

    def lookup(self, task_id: str, script: str) -> ExecutedOutcome | None:
        return self._outcomes.get((task_id, code_key(script)))

    def state_dict(self) -> dict[str, Any]:
        return {"format": _STATE_FORMAT,
                "outcomes": [[task, key, asdict(o)] for (task, key), o in self._outcomes.items()]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._outcomes = OrderedDict(((task, key), ExecutedOutcome(**o)) for task, key, o in state["outcomes"])
