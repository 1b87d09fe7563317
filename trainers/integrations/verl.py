"""WMRL from verl 0.9.1: a fused reward manager (``wmrl``) and an anchor-weighted GRPO estimator (``wmrl_grpo``).

verl runs in its own virtualenv (``bash scripts/setup_verl.sh``: verl pins transformers<5.11).
Point verl at both pieces (``docs/examples/verl_example.md``)::

    VERL_USE_EXTERNAL_MODULES=trainers.integrations.verl python -m verl.trainer.main_ppo \\
        reward.reward_manager.name=wmrl algorithm.adv_estimator=wmrl_grpo \\
        +algorithm.wmrl.anchor_fraction=0.1 ...

``VERL_USE_EXTERNAL_MODULES`` makes every verl process (trainer, reward workers) import this
module on ``import verl``, which registers both names. The one settings block is
``algorithm.wmrl`` (:class:`VerlSettings`): the reward workers read it from the full config and
the estimator from ``config.algorithm``, which is all verl hands an estimator, so both build the
same schedule and anchor weight from it.

How groups are scored (``docs/architecture.md`` §2; nothing here scores on its own):

* **The group id** is verl's ``uid``: verl draws a fresh ``uuid4`` per prompt per step, so it
  already names one (step, prompt) group, and it is the only group key the estimator receives
  (verl passes it ``token_level_rewards``, ``response_mask``, ``index=uid`` and ``config``; the
  global step reaches neither the estimator nor the streaming reward path). The core's
  :class:`~wmrl_envs.scoring.HashSchedule` on it gives every reward worker and the estimator the
  same stream, with no coordination. A dataset that sets its own ``uid`` column must keep it
  unique per step.
* **Batching.** verl calls ``run_single`` once per sample, concurrently (``asyncio.gather`` over
  a worker's chunk, or one call per finished rollout in streaming mode). The manager queues
  the calls that arrive within ``batch_window_s`` and scores them in one ``ScoringCore.score``
  call: one world-model batch and one sandbox fan-out, the samples of one uid forming one
  :class:`~wmrl_envs.scoring.CodeGroup`. Within that call the core's ordering holds: every
  anchor pair enters the calibrator before any world-model sample is calibrated.
* **Across workers** a uid's samples may be split between reward workers. World-model samples
  are scored one by one anyway; each anchor sample is executed where it lands, and its pair
  reaches the one calibrator, a named Ray actor (:mod:`wmrl_envs.scoring.ray_calibrator`), when
  its batch is fused. A world-model sample is calibrated with the pairs that arrived before
  its batch, so it may miss the pairs of anchors of the same step still running elsewhere:
  the trainer's step-level ordering holds per batch, not per step. The same actor holds the
  run's experience: a world-model sample whose code an anchor ran on any worker reuses its
  outcome, and its neighbours' residuals correct predictions on every worker.
* **Anchors execute through** ``make_executor(settings.executor)`` (``"ray"`` by default:
  :mod:`wmrl_envs.sandbox.ray_executor`, bubblewrap on the cluster's nodes).
* **Held-out tasks** (the validation set of ``scripts/prepare_verl_data.py``) are always
  executed: held-out numbers come from real execution only (``docs/architecture.md`` §9).
* **An infrastructure failure** returns NaN (not a score). ``wmrl_grpo`` gives such a row
  advantage 0 and leaves it out of its group's statistics; verl's built-in estimators do not,
  so use this manager with ``wmrl_grpo``.
* **The anchor weight** trains through the estimator: ``sample_weights(is_anchor, w_A)`` over
  the batch's scored rows (mean 1) multiplies each row's GRPO advantage, which equals weighting
  that row's policy-loss term (PPO's clip is invariant to a positive factor). ``w_A`` is the
  estimator's core's ``anchor_weight()`` at update time, after the step's anchors entered the
  calibrator (as the WMRL trainer). ``reward_extra_info["fusion_weight"]`` records the weight a
  reward worker saw when scoring. With ``c`` unset every process fixes ``c = 1/η̂²`` at the first
  residual it reads; set ``c`` for a run whose processes must agree on it exactly.

The estimator follows verl's GRPO conventions: ``(r - mean)/(std + eps)`` per uid with the
unbiased std and ``eps = 1e-6``, mean-only when ``algorithm.norm_adv_by_std_in_grpo=False``,
and a uid with one scored row gets mean 0 and std 1. Groups of two or more go through
:func:`trainers.grpo.group_advantages`, which returns exact zeros for a constant group where
verl's float32 arithmetic leaves rounding noise (up to about 1e-2 after dividing by 1e-6).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np

from trainers.grpo import group_advantages
from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.errors import ConfigError, MissingDependencyError
from wmrl_envs.scoring import (
    CodeGroup,
    CodeScorer,
    FusionConfig,
    HashSchedule,
    InFlightAnchors,
    ScoredGroup,
    ScoreResult,
    ScoringCore,
    extract_code,
    sample_weights,
    shared_calibrator,
)
from wmrl_envs.scoring.ray_calibrator import RemoteCalibrator, RemoteExperience, calibrator_actor
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.base import DEFAULT_WORLD_MODEL

try:
    import torch
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import register
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
    from verl.trainer.ppo.core_algos import register_adv_est
except ImportError as exc:  # verl lives in its own venv
    raise MissingDependencyError(f"the verl integration runs in verl's virtualenv: bash scripts/setup_verl.sh "
                                 f"({exc})") from exc

#: The verl version this module was written and tested against.
TESTED_VERL = "0.9.1"
#: ``reward.reward_manager.name`` of the fused reward manager.
MANAGER_NAME = "wmrl"
#: ``algorithm.adv_estimator`` of the anchor-weighted GRPO estimator.
ESTIMATOR_NAME = "wmrl_grpo"
#: The settings block under verl's ``algorithm`` config.
SETTINGS_KEY = "wmrl"
#: The calibrator actor's default name (:func:`wmrl_envs.scoring.ray_calibrator.calibrator_actor`).
CALIBRATOR_ACTOR = "wmrl-calibrator"
#: verl's GRPO epsilon.
VERL_EPS = 1e-6


@dataclass(frozen=True)
class VerlSettings:
    """WMRL's settings of a verl run: the ``algorithm.wmrl`` block, shared by manager and estimator.

    Attributes:
        anchor_fraction: Share of uid groups executed as anchors (the hash schedule).
        seed: Seed of the hash schedule.
        world_model: World-model registry name (``wmrl_envs.world_models``).
        executor: Sandbox backend of anchor runs (``"ray"``, ``"bwrap"``).
        workers: Parallel executions per reward worker (default: one per core).
        calibrator: Name of the calibrator actor every process shares, with the run's experience
            (executed outcomes, neighbour residuals) it holds. None: the process-wide
            calibrator of ``verl/<world model>``, for a single process only (tests): verl's
            reward workers are separate processes and would each get their own.
        calibration: The calibrator's settings (``CalibratorConfig`` fields; None: defaults).
        fusion_rule, w_max, c: The anchor weight's rule, clip and slope (:class:`FusionConfig`;
            the default rule ``none`` weighs anchors as world-model samples; under ``eta2``,
            ``clip(1 + c·η̂², 1, w_max)`` with c None: ``1/η̂²`` at the first residual).
        debias: Reward world-model samples with calibrated scores (False: raw scores).
        denoise: Give anchor samples the weight ``w_A`` (False: weight 1).
        eps: The GRPO epsilon (verl's 1e-6).
        batch_window_s: How long the first queued sample waits for others before a batch is
            scored (0: those already queued in the same event-loop turn).
        async_anchors: A batch's world-model and held-out samples are answered at once and its
            anchor groups when their runs return (issue 47), so verl's fully asynchronous trainer
            keeps generating meanwhile; anchor batches land in the order they were scored.
            verl trains a late sample whatever its age (``fully_async/count/stale_trajectory_processed``
            counts them): bound it with ``async_training.staleness_threshold``.
        anchor_timeout_s: With ``async_anchors``: a run not back this many seconds after its batch
            was scored is an infrastructure failure (None: the sandbox's own limits end it).
    """

    anchor_fraction: float = 0.1
    seed: int = 0
    world_model: str = DEFAULT_WORLD_MODEL
    executor: str = "ray"
    workers: int | None = None
    calibrator: str | None = CALIBRATOR_ACTOR
    calibration: CalibratorConfig | None = None
    fusion_rule: str = FusionConfig.rule
    w_max: float = 4.0
    c: float | None = None
    debias: bool = True
    denoise: bool = True
    eps: float = VERL_EPS
    batch_window_s: float = 0.0
    async_anchors: bool = False
    anchor_timeout_s: float | None = None

    def __post_init__(self) -> None:
        HashSchedule(self.anchor_fraction, self.seed)  # validates the fraction
        FusionConfig(self.fusion_rule, w_max=self.w_max, c=self.c)
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise ConfigError(f"eps must be finite and >= 0, got {self.eps}")
        if not (math.isfinite(self.batch_window_s) and self.batch_window_s >= 0):
            raise ConfigError(f"batch_window_s must be finite and >= 0, got {self.batch_window_s}")
        if self.anchor_timeout_s is not None and not self.anchor_timeout_s > 0:
            raise ConfigError(f"anchor_timeout_s must be None or > 0, got {self.anchor_timeout_s}")

    @classmethod
    def from_config(cls, algorithm: Mapping[str, Any] | None) -> VerlSettings:
        """The settings in verl's ``algorithm`` config (its ``wmrl`` block; absent: defaults)."""
        block = (algorithm or {}).get(SETTINGS_KEY) or {}
        if hasattr(block, "items") and not isinstance(block, dict):  # an OmegaConf node
            from omegaconf import OmegaConf  # noqa: PLC0415 - verl's config library, only in verl's venv

            block = OmegaConf.to_container(block, resolve=True)
        if not isinstance(block, dict):
            raise ConfigError(f"algorithm.{SETTINGS_KEY} must be a mapping, got {block!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(block) - known)
        if unknown:
            raise ConfigError(f"unknown algorithm.{SETTINGS_KEY} keys {unknown}; known: {sorted(known)}")
        values = dict(block)
        if values.get("calibration") is not None:
            values["calibration"] = CalibratorConfig.from_dict(values["calibration"])
        return cls(**values)


def group_id(uid: Any) -> str:
    """The scoring group id of a verl ``uid``: a plain ``str``, so the hash schedule, which hashes
    ``repr(group_id)``, decides alike for a numpy string and a Python one."""
    return str(uid)


def make_calibrator(settings: VerlSettings) -> Any:
    """The run's calibrator: the named Ray actor's client, or the process-wide one (``calibrator=None``)."""
    if settings.calibrator is None:
        return shared_calibrator(f"verl/{settings.world_model}", settings.calibration)

    return RemoteCalibrator(calibrator_actor(settings.calibrator, settings.calibration))


def make_core(settings: VerlSettings, calibrator: Calibrator | Any | None = None, executor: str | None = None,
              scorer: bool = True) -> ScoringCore:
    """A scoring core from the settings: hash schedule, calibrator, fusion and (``scorer``) a code scorer.

    ``calibrator`` and ``executor`` override the settings' (a local Calibrator, ``"bwrap"``). With
    the calibrator actor, the scorer's experience is the one the actor holds too, so that every
    reward worker reuses and is corrected by the anchors any of them executed.
    """
    if calibrator is None:
        calibrator = make_calibrator(settings)
    code_scorer = None
    if scorer:
        experience = RemoteExperience(calibrator.handle) if isinstance(calibrator, RemoteCalibrator) else None
        code_scorer = CodeScorer(settings.world_model, executor=executor or settings.executor,
                                 workers=settings.workers, experience=experience)
    return ScoringCore(HashSchedule(settings.anchor_fraction, settings.seed), calibrator,
                       FusionConfig(settings.fusion_rule, w_max=settings.w_max, c=settings.c),
                       debias=settings.debias, denoise=settings.denoise, scorer=code_scorer)


# --------------------------------------------------------------------------- reward manager


@dataclass
class _Pending:
    uid: str
    task_id: str
    response: str
    future: asyncio.Future


@register(MANAGER_NAME)
class WMRLRewardManager(RewardManagerBase):
    """verl's reward-manager contract over the WMRL scoring core (see the module docstring).

    verl builds it with ``(config, tokenizer, compute_score, reward_router_address=...,
    reward_model_tokenizer=...)``; the keyword-only arguments are for use outside verl's loader:

    Args:
        core: A ready scoring core (it replaces the one the settings describe).
        calibrator: The calibrator of the settings' core (e.g. a local Calibrator).
        executor: The sandbox backend of the settings' core (e.g. ``"bwrap"``).
    """

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, reward_router_address: str | None = None,
                 reward_model_tokenizer: Any = None, *, core: ScoringCore | None = None,
                 calibrator: Calibrator | Any | None = None, executor: str | None = None) -> None:
        super().__init__(config, tokenizer, compute_score)
        self.settings = VerlSettings.from_config(config.get("algorithm") if config is not None else None)
        self.core = core if core is not None else make_core(self.settings, calibrator, executor)
        if self.core.scorer is None:
            raise ConfigError("WMRLRewardManager needs a scoring core with a scorer")
        self._tasks: dict[str, Task] = {}
        self._pending: list[_Pending] = []
        self._drainer: asyncio.Task | None = None
        self._landing: asyncio.Task | None = None  # the last anchor batch's landing (async_anchors)

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        """``{"reward_score", "reward_extra_info"}`` of one sample, scored in a batch with its neighbours."""
        # Multi-turn trajectories arrive as several rows; the last one carries the reward (as verl's managers).
        item = data[len(data) - 1]
        extra = item.non_tensor_batch.get("extra_info")
        if not isinstance(extra, Mapping) or "task_id" not in extra:
            raise ConfigError("a WMRL sample needs extra_info.task_id (write the dataset with scripts/prepare_verl_data.py)")
        if "uid" not in item.non_tensor_batch:
            raise ConfigError("a WMRL sample needs verl's uid (its group id)")
        loop = asyncio.get_running_loop()
        pending = _Pending(group_id(item.non_tensor_batch["uid"]), str(extra["task_id"]), self._decode(item),
                           loop.create_future())
        self._pending.append(pending)
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await pending.future

    def _decode(self, item: Any) -> str:
        responses = item.batch["responses"]
        length = int(item.batch["attention_mask"][-responses.shape[-1]:].sum())
        return self.tokenizer.decode(responses[:length], skip_special_tokens=True)

    async def _drain(self) -> None:
        await asyncio.sleep(self.settings.batch_window_s)
        loop = asyncio.get_running_loop()
        # Samples that arrive while a batch is scored form the next batch.
        while self._pending:
            batch, self._pending = self._pending, []
            samples = [(p.uid, p.task_id, p.response) for p in batch]
            try:
                if self.settings.async_anchors:
                    results, flight = await loop.run_in_executor(None, self.submit_batch, samples)
                else:
                    results, flight = await loop.run_in_executor(None, self.score_batch, samples), None
            except Exception as exc:
                for p in batch:
                    p.future.set_exception(exc)
                continue
            for p, result in zip(batch, results):
                if result is not None:
                    p.future.set_result(result)
            if flight is not None:
                self._landing = loop.create_task(self._land(flight, batch, self._landing))

    async def _land(self, flight: InFlightAnchors, batch: list[_Pending], previous: asyncio.Task | None) -> None:
        """Answer a batch's anchor samples once its runs return, after the batch scored before it landed."""
        loop = asyncio.get_running_loop()
        if previous is not None and not previous.done() and previous.get_loop() is loop:
            await asyncio.shield(previous)  # a landing of an earlier event loop ended with it
        try:
            landed = await loop.run_in_executor(None, self.core.land, flight, True)
        except Exception as exc:
            for i in flight.tag:
                batch[i].future.set_exception(exc)
            return
        rows = iter(flight.tag)
        for group in landed:
            for result in group.samples:
                batch[next(rows)].future.set_result(_verl_result(result))

    def score_batch(self, samples: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """Score ``(uid, task_id, response)`` samples in one core call; one result dict per sample, in order."""
        members, groups, streams = self._groups(samples)
        return self._results(len(samples), members, self.core.score(groups, streams))

    def submit_batch(self, samples: Sequence[tuple[str, str, str]]
                     ) -> tuple[list[dict[str, Any] | None], InFlightAnchors | None]:
        """As :meth:`score_batch`, but the anchor groups' runs are submitted, not awaited: a result
        dict per sample, None for an anchor sample, and the anchors in flight, tagged with their
        samples' positions in group order (None without any)."""
        members, groups, streams = self._groups(samples)
        now, flight = self.core.score_async(groups, streams, timeout_s=self.settings.anchor_timeout_s)
        if flight is not None:
            flight.tag = [i for group in flight.scored for i in members[(group.task_id, group.group_id)]]
        return self._results(len(samples), members, now), flight

    def _groups(self, samples: Sequence[tuple[str, str, str]]):
        """The samples as code groups by (task, uid), their rows, and each group's stream (a held-out
        task's is always executed)."""
        members: dict[tuple[str, str], list[int]] = {}
        for i, (uid, task_id, _) in enumerate(samples):
            members.setdefault((task_id, uid), []).append(i)
        groups, streams = [], []
        for (task_id, uid), rows in members.items():
            task = self._task(task_id)
            groups.append(CodeGroup(task, [extract_code(samples[i][2]) for i in rows], uid))
            streams.append("real" if task.spec.is_heldout else self.core.streams([uid])[0])
        return members, groups, streams

    @staticmethod
    def _results(size: int, members: Mapping[tuple[str, str], list[int]],
                 scored: Sequence[ScoredGroup]) -> list[dict[str, Any] | None]:
        """One result dict per sample of the scored groups, by row; None for the others."""
        out: list[dict[str, Any] | None] = [None] * size
        for group in scored:
            for i, result in zip(members[(group.task_id, group.group_id)], group.samples):
                out[i] = _verl_result(result)
        return out

    def _task(self, task_id: str) -> Task:
        if task_id not in self._tasks:
            self._tasks[task_id] = get_task(task_id)
        return self._tasks[task_id]


def _verl_result(result: ScoreResult) -> dict[str, Any]:
    score = math.nan if result.infra_failure else float(result.score)
    return {"reward_score": score, "reward_extra_info": {
        "stream": result.stream,
        "wm_score_raw": result.wm_score_raw,
        "real_score": None if result.infra_failure else result.real_score,
        "fusion_weight": float(result.fusion_weight),
        "task_id": result.task_id,
    }}


# --------------------------------------------------------------------------- advantage estimator


def wmrl_advantages(scores: torch.Tensor, uids: Sequence[Hashable], core: ScoringCore, norm_by_std: bool = True,
                    eps: float = VERL_EPS) -> torch.Tensor:
    """Per-row GRPO advantages by uid (verl's conventions), times the anchor weights; float64 ``[B]``.

    Rows with a non-finite score (an infrastructure failure) get 0 and stay out of the group
    statistics and the weight normalisation.
    """
    r = torch.as_tensor(scores, dtype=torch.float64).reshape(-1)
    gids = [group_id(u) for u in uids]
    if len(gids) != r.numel():
        raise ConfigError(f"{r.numel()} scores but {len(gids)} uids")
    advantage = torch.zeros_like(r)
    rows = torch.isfinite(r).nonzero().flatten().tolist()
    if not rows:
        return advantage
    size = Counter(gids[i] for i in rows)
    grouped = [i for i in rows if size[gids[i]] > 1]
    if grouped:
        advantage[grouped] = group_advantages(r[grouped], [gids[i] for i in grouped],
                                              mode="std" if norm_by_std else "mean", eps=eps, std="unbiased")
    # verl's convention where WMRL's differs: a uid with one scored row has mean 0 and std 1.
    single = [i for i in rows if size[gids[i]] == 1]
    if single:
        advantage[single] = r[single] / (1.0 + eps) if norm_by_std else r[single]
    is_anchor = np.array([stream == "anchor" for stream in core.streams([gids[i] for i in rows])])
    advantage[rows] *= torch.as_tensor(sample_weights(is_anchor, core.anchor_weight()), dtype=torch.float64)
    return advantage


@lru_cache(maxsize=8)
def estimator_core(settings: VerlSettings) -> ScoringCore:
    """The estimator's core for these settings, one per process: schedule, calibrator, fusion (no scorer)."""
    return make_core(settings, scorer=False)


@register_adv_est(ESTIMATOR_NAME)
def compute_wmrl_grpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray,
                                config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator contract: ``(advantages, returns)``, both ``[B, T]``, the row's weighted
    GRPO advantage on each response token (see :func:`wmrl_advantages`)."""
    settings = VerlSettings.from_config(config)
    norm_by_std = bool((config or {}).get("norm_adv_by_std_in_grpo", True))
    with torch.no_grad():
        advantage = wmrl_advantages(token_level_rewards.sum(dim=-1), list(index), estimator_core(settings),
                                    norm_by_std, settings.eps)
        advantages = advantage.to(token_level_rewards.dtype).unsqueeze(-1) * response_mask
    return advantages, advantages
