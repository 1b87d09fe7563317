"""The one ``info`` shape of every WMRL env: its keys, their types, and the one builder.

Every env (``wmrl/MLEDojo-v0``, ``wmrl/DSBench-v0``, ``wmrl/LIBERO-Long-v0``) returns from
``step`` an ``info`` that holds every key of :class:`EnvInfo`, with these types, made by
:func:`env_info` from the step's :class:`~wmrl_envs.scoring.ScoreResult`. Each env adds a few
keys of its own after them (``docs/environments.md`` lists them all), so a trainer or tool that
reads only these keys works on every env unchanged.

``status`` says how the sample ended, in its family's vocabulary: a code env's is the script's
outcome (:data:`wmrl_envs.outcome.STATUSES`), a simulated episode's one of
:data:`EPISODE_STATUSES`. In every env ``""`` means not scored yet (a LIBERO episode before its
last step) and :data:`~wmrl_envs.outcome.INFRA_FAILURE` that nothing could be said: never a score.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, TypedDict

from wmrl_envs import outcome

if TYPE_CHECKING:
    from wmrl_envs.scoring.results import ScoreResult

#: The simulator's success check held (on any stream: a success ends every episode).
SUCCESS = "success"
#: The episode ran all its steps without success.
FAILURE = "failure"
#: A world-model episode stopped at the model's horizon: the model scores what the rest would do.
UNFINISHED = "unfinished"
#: The outcomes of a simulated episode.
EPISODE_STATUSES: tuple[str, ...] = (SUCCESS, FAILURE, UNFINISHED)


class Cost(TypedDict):
    """What a step's sample cost, by the ledger's kinds: wall and CPU seconds of each (0 where the
    sample spent nothing of that kind), and the simulator steps."""

    execution_s: float
    execution_cpu_s: float
    simulation_s: float
    simulation_cpu_s: float
    simulation_steps: int
    world_model_s: float
    world_model_cpu_s: float


class EnvInfo(TypedDict):
    """The keys every env's ``step`` info holds (field meanings: :class:`~wmrl_envs.scoring.ScoreResult`
    and ``docs/environments.md``)."""

    task_id: str
    group_id: Hashable
    stream: str
    status: str
    decided_by: str
    score: float | None
    raw_score: float | None
    real_score: float | None
    wm_score_raw: float | None
    wm_score_calibrated: float | None
    valid: bool | None
    error: str | None
    infra_failure: bool
    fusion_weight: float
    reward_error_bound: float | None
    cost: Cost | None


INFO_KEYS: tuple[str, ...] = tuple(EnvInfo.__annotations__)
COST_KEYS: tuple[str, ...] = tuple(Cost.__annotations__)


def cost_info(cost: Mapping[str, float]) -> Cost:
    """``cost`` (a :class:`ScoreResult`'s) on every key of :class:`Cost`.

    Raises:
        KeyError: For a kind of cost the shape does not have; add it to :class:`Cost` rather than
            let one env's cost drift from the others'.
    """
    unknown = set(cost) - set(COST_KEYS)
    if unknown:
        raise KeyError(f"cost kinds outside wmrl_envs.info.Cost: {sorted(unknown)}")
    return Cost(**{key: int(cost.get(key, 0)) if key == "simulation_steps" else float(cost.get(key, 0.0))
                   for key in COST_KEYS})


def env_info(result: ScoreResult, group_id: Hashable, *, scored: bool = True) -> EnvInfo:
    """The shape's keys for one step, read from its sample's result.

    ``scored=False`` is a step of an episode still running: no score and no cost yet, so that
    equal seeds and actions give equal infos, as Gymnasium's checker demands. Numbers and words
    come out as Python ``float`` and ``str``: a NumPy scalar (a world model's predicted status is
    one) would type differently in one env than in another.
    """
    return EnvInfo(
        task_id=str(result.task_id),
        group_id=group_id,
        stream=str(result.stream),
        # A world model that gave no number leaves the status unset; it is an infrastructure failure.
        status=outcome.INFRA_FAILURE if result.infra_failure else str(result.status),
        decided_by=str(result.decided_by),
        score=_number(result.score) if scored else None,
        raw_score=_number(result.raw_score),
        real_score=_number(result.real_score),
        wm_score_raw=_number(result.wm_score_raw),
        wm_score_calibrated=_number(result.wm_score_calibrated),
        valid=None if result.valid is None else bool(result.valid),
        error=None if result.error is None else str(result.error),
        infra_failure=bool(result.infra_failure),
        fusion_weight=float(result.fusion_weight),
        reward_error_bound=_number(result.reward_error_bound),
        cost=cost_info(result.cost) if scored else None,
    )


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)
