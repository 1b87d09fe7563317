"""The world-model interface: predict how a solution script ends and what it scores, without running it.

A world model maps ``(task, script)`` pairs to :class:`Prediction` objects, in batches: an
outcome in the vocabulary of :mod:`wmrl_envs.outcome` (proved or estimated) and a score, the
same quantity an executed script earns (the position score in [0, 1] for MLE tasks, RPG in
[0, 1] for DSBench tasks), so environments can swap them freely. A predicted failure's score
is the expected reward, ``P(valid) x`` the predicted valid score; a proved failure's is 0.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from wmrl_envs import outcome
from wmrl_envs.errors import ConfigError
from wmrl_envs.task_spec import Task


@dataclass(frozen=True)
class Prediction:
    """One world-model estimate.

    Attributes:
        score: Predicted score in the task's reward range; ``nan`` when ``parsed`` is False.
        uncertainty: Standard deviation of the estimate in score units; ``nan`` when the model
            gives no way to estimate it.
        parsed: False when the model answered but no score could be read from the answer, or
            the model could not be queried at all. Such a prediction is not a score of 0: callers
            must drop or re-query it.
        error: Why ``parsed`` is False (or a warning); None for a clean prediction.
        cost_s: Wall-clock seconds spent producing this prediction.
        status: The predicted outcome (:mod:`wmrl_envs.outcome`); a model that predicts only a
            score says ``valid``.
        exception: The predicted exception's short class, for an error status.
        message: Feedback as the sandbox would print it: a proved failure's exact last line,
            or the predicted exception class.
        proved: The outcome is proved (:mod:`wmrl_envs.analysis.proofs`), not estimated.
        p_valid: Probability of a valid submission (1 for a model that predicts only a score).
        stage: What answered: ``"proof"`` (a static proof), ``"sample_run"`` (the script's run on
            a sample of the task, or that run memoised) or ``"world_model"`` (an estimate from the
            script's text).
        cpu_s: CPU seconds spent outside the calling process (a sample run's sandbox), which the
            caller's own CPU clock does not see.
    """

    score: float
    uncertainty: float
    parsed: bool = True
    error: str | None = None
    cost_s: float = 0.0
    status: str = outcome.VALID
    exception: str | None = None
    message: str | None = None
    proved: bool = False
    p_valid: float = 1.0
    stage: str = "world_model"
    cpu_s: float = 0.0

    @classmethod
    def failed(cls, error: str, cost_s: float = 0.0) -> Prediction:
        """A prediction that carries no score, only the reason why."""
        return cls(score=math.nan, uncertainty=math.nan, parsed=False, error=error, cost_s=cost_s,
                   status=outcome.INFRA_FAILURE, p_valid=math.nan)

    @classmethod
    def from_proof(cls, proof: Any, cost_s: float = 0.0) -> Prediction:
        """The exact prediction of a proved failure: score 0, no uncertainty."""
        return cls(score=0.0, uncertainty=0.0, cost_s=cost_s, status=proof.status, exception=proof.exception,
                   message=proof.message, proved=True, p_valid=0.0, stage="proof")


@runtime_checkable
class WorldModel(Protocol):
    """Anything that scores solution scripts for tasks, in batches."""

    name: str

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        """One prediction per ``(tasks[i], scripts[i])``; ``len(tasks) == len(scripts)``."""
        ...


#: The world model every path uses unless told otherwise: envs, the trainer, TRL, verl, OpenEnv.
DEFAULT_WORLD_MODEL = "surrogate"

# Implementations are imported lazily so that choosing one never pulls in another's heavy
# dependencies (torch, transformers, llama.cpp).
_REGISTRY: dict[str, tuple[str, str]] = {
    "corrupted": ("wmrl_envs.world_models.corrupted", "CorruptedWorldModel.from_options"),
    "llm": ("wmrl_envs.world_models.llm", "LLMWorldModel.from_options"),
    "llm_outcome": ("wmrl_envs.world_models.llm_outcome", "LLMOutcomeWorldModel.from_options"),
    "sample_run": ("wmrl_envs.world_models.sample_run", "SampleRunWorldModel"),
    "surrogate": ("wmrl_envs.world_models.surrogate", "SurrogateWorldModel"),
}


def make_world_model(name: str, **kwargs: Any) -> WorldModel:
    """Build a world model by name (``"llm"``, ``"llm_outcome"``, ``"surrogate"``, ``"sample_run"``
    or ``"corrupted"``) with its keyword options.

    ``"llm"`` takes the options of :meth:`LLMWorldModel.from_options`, ``"llm_outcome"`` those of
    :meth:`LLMOutcomeWorldModel.from_options`; ``"surrogate"`` those of
    ``SurrogateWorldModel``; ``"sample_run"`` those of ``SampleRunWorldModel`` (the multi-fidelity
    model: proofs, a run on a sample of the task, the surrogate); ``"corrupted"`` (a stress test) those of
    :meth:`CorruptedWorldModel.from_options`.
    """
    try:
        module_name, attr_path = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown world model {name!r}; known: {sorted(_REGISTRY)}") from None
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"world model {name!r} is not available: cannot import {module_name} ({exc})"
        ) from exc
    for attr in attr_path.split("."):
        try:
            target = getattr(target, attr)
        except AttributeError:
            raise ConfigError(f"world model {name!r} is not available: {module_name} has no {attr_path}") from None
    return target(**kwargs)
