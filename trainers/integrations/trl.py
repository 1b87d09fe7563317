"""WMRL from TRL 1.16: a fused reward function, a GRPO trainer that weights anchors, a checkpoint callback.

::

    from trainers.integrations.prompts import code_tasks
    from trainers.integrations.trl import (WMRLGRPOTrainer, WMRLReward, WMRLStateCallback,
                                           build_dataset, make_code_core)

    tasks = code_tasks("wmrl/MLEDojo-v0")
    core = make_code_core(anchor_fraction=0.1, seed=0)
    reward = WMRLReward(core, tasks, num_generations=8)
    trainer = WMRLGRPOTrainer(model, reward_funcs=reward, args=GRPOConfig(num_generations=8, ...),
                              train_dataset=build_dataset(tasks), processing_class=tokenizer,
                              callbacks=[WMRLStateCallback(core)])

The pieces and who owns what (``docs/architecture.md`` §2):

* :func:`build_dataset`: one row per task, ``prompt`` (the LM policy's chat messages,
  :func:`agents.code.lm_policy.build_messages`), ``task_id`` and ``prompt_uid`` (a stable hash
  of both).
* :class:`WMRLReward`: TRL's reward-function contract. The rows TRL hands it come in groups of
  ``num_generations`` consecutive rows (its ``RepeatSampler``). Each group's id is
  ``(trainer_state.global_step, prompt_uid)``, so the core's :class:`HashSchedule` gives every
  process the same stream for it. All groups of a call are scored by the one
  :class:`~wmrl_envs.scoring.ScoringCore`. An infrastructure failure returns ``None``: TRL then
  gives the row advantage 0 and leaves it out of the group's statistics.
* :class:`WMRLGRPOTrainer`: TRL's ``GRPOTrainer``. Its only change: after TRL has computed the
  advantages, every row's advantage is multiplied by its weight,
  ``sample_weights(is_anchor, w_A)`` over the scored rows of the whole batch (all processes),
  mean 1, as ``trainers/wmrl.py`` weights its loss. TRL's KL term stays unweighted, as in the
  WMRL trainer. Multiplying the advantage is the same as weighting each row's policy term.
  TRL's loss normaliser counts tokens without weights, and since the weights have mean 1 its
  total is the same.
* :class:`WMRLStateCallback`: writes ``ScoringCore.state_dict()`` (calibrator pairs, ``c``) into
  every TRL checkpoint folder and restores it when training resumes from one.
* Asynchronous anchors (``WMRLGRPOTrainer(..., max_staleness=K)``, one process): the reward
  submits a training batch's anchor groups and returns None for their rows; the trainer holds those
  rows (with the policy's log-probabilities at generation as ``old_per_token_logps``, so TRL's
  clipped ratio corrects for the policy having moved) and adds them, with TRL's group advantages,
  to the batch ``K`` steps later, when they land (:func:`land_in_order`; the last step lands all;
  with ``final_anchors='skip'`` the last ``K`` steps choose none). A checkpoint holds them
  (:data:`IN_FLIGHT_FILE`) and a resumed run submits them again.

Several processes. Each process scores its own groups (its own executions and world-model
batch). The raw scored groups are then gathered, and every process fuses the same list in the
same order, so every process's calibrator takes the same pairs and stays identical. A group
must not span two processes. The generation batch of one process is
``per_device_train_batch_size * steps_per_generation`` rows (``per_device_eval_batch_size`` in
evaluation), and it must be a multiple of ``num_generations``. Otherwise :class:`WMRLReward`
(and the trainer, already at construction) raises :class:`ConfigError`. Giving both processes
a part of one group would mean scoring that group in two halves, and an anchor group's pairs
must enter the calibrator together.

Not included: a multi-turn ``environment_factory``. TRL 1.16 calls ``reset(**row)`` on one
environment per rollout and passes no training step, so a rollout cannot name its group by
``(step, uid)`` without reaching into the trainer. ``get_reward()`` scores one rollout at a
time, so a group is never scored as one batch. And its tools need a tool-calling chat template,
which the offline models here (SmolLM2-135M, the toy tokenizer) lack, so it could not be tested.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_envs.extras import requires_extra

with requires_extra("trl", "the TRL integration"):  # before the LM policy below, which needs torch too
    import datasets
    import torch
    import transformers
    import trl

from agents.code.lm_policy import CausalLMPolicyConfig, build_messages
from trainers.integrations.prompts import prompt_uid
from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.errors import ConfigError, MissingDependencyError
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.scoring import (
    CodeGroup,
    CodeScorer,
    FusionConfig,
    HashSchedule,
    InFlightAnchors,
    ScoredGroup,
    ScoringCore,
    completion_text,
    extract_code,
    land_in_order,
    sample_weights,
)
from wmrl_envs.scoring.schedule import anchor_steps, check_final_anchors
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.base import DEFAULT_WORLD_MODEL

#: The TRL minor version this module was written and tested against (its private hooks change).
TESTED_TRL = "1.16"
#: The file a checkpoint folder holds the scoring state in.
STATE_FILE = "wmrl_scoring.json"
#: The file a checkpoint folder holds the anchor batches in flight in (asynchronous anchors).
IN_FLIGHT_FILE = "wmrl_in_flight.pt"


class TRLVersionError(MissingDependencyError):
    """The installed TRL is not the minor version :class:`WMRLGRPOTrainer` was tested with."""


def check_trl_version(version: str | None = None) -> str:
    """``version`` (default: the installed TRL's) if it is a :data:`TESTED_TRL` release, else :class:`TRLVersionError`."""
    version = trl.__version__ if version is None else version
    if version.split(".")[:2] != TESTED_TRL.split("."):
        raise TRLVersionError(f"WMRLGRPOTrainer overrides GRPOTrainer internals of TRL {TESTED_TRL}.x; the installed "
                              f"TRL is {version}. Install it with: pip install 'trl=={TESTED_TRL}.0'")
    return version


# --------------------------------------------------------------------------- dataset


def build_dataset(tasks: Iterable[Task], config: CausalLMPolicyConfig | None = None) -> datasets.Dataset:
    """One row per task: ``prompt`` (chat messages, as the LM policy prompts), ``task_id``, ``prompt_uid``."""
    config = config or CausalLMPolicyConfig()
    rows = []
    for task in tasks:
        messages = build_messages(task, config)
        rows.append({"prompt": messages, "task_id": task.id, "prompt_uid": prompt_uid(task.id, messages)})
    if not rows:
        raise ConfigError("build_dataset got no tasks")
    return datasets.Dataset.from_list(rows)


def make_code_core(anchor_fraction: float = 0.1, seed: int = 0, world_model: Any = DEFAULT_WORLD_MODEL,
                   executor: str = DEFAULT_EXECUTOR, workers: int | None = None, calibration: CalibratorConfig | None = None,
                   fusion: FusionConfig | None = None) -> ScoringCore:
    """A run's scoring core for code tasks: the hash schedule, a calibrator of its own and a code scorer.

    ``fusion`` sets the anchor weight (default rule ``none``: weight 1); under ``eta2`` or
    ``sampling``, ``c`` is ``1/η̂²`` at the first residual unless ``fusion`` sets it (there is no
    warmup here).
    """
    return ScoringCore(HashSchedule(anchor_fraction, seed), Calibrator(calibration), fusion,
                       scorer=CodeScorer(world_model, executor=executor, workers=workers))


# --------------------------------------------------------------------------- reward function


@dataclass(frozen=True)
class BatchRecord:
    """What one call of :class:`WMRLReward` scored, one entry per row of the process's batch.

    Attributes:
        group_ids: Each row's group id, ``(global_step, prompt_uid)``.
        streams: Each row's stream (``"anchor"`` or ``"world_model"``).
        is_anchor: Whether the row is an anchor sample.
        rewards: Each row's reward, NaN for an infrastructure failure (returned as None).
        scored: Whether the row has a reward.
        fusion_weights: The core's weight of each row (``w_A`` for anchors, 1 otherwise), before
            normalisation.
        w_anchor: The core's anchor weight after the call (the same on every process).
        in_flight: Whether the row's anchor group was submitted and has not landed (asynchronous
            anchors; its reward is NaN until then).
    """

    group_ids: list[tuple[int, str]]
    streams: list[str]
    is_anchor: np.ndarray
    rewards: np.ndarray
    scored: np.ndarray
    fusion_weights: np.ndarray
    w_anchor: float
    in_flight: np.ndarray | None = None

    def rows(self, keep: np.ndarray) -> BatchRecord:
        """The record of the rows where ``keep`` is true."""
        index = np.flatnonzero(keep)
        return BatchRecord([self.group_ids[i] for i in index], [self.streams[i] for i in index],
                           self.is_anchor[index], self.rewards[index], self.scored[index], self.fusion_weights[index],
                           self.w_anchor, None if self.in_flight is None else self.in_flight[index])


def _world() -> tuple[int, int]:
    """(rank, world size) of the torch.distributed group, (0, 1) without one."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class WMRLReward:
    """The fused WMRL reward as a TRL reward function (see the module docstring).

    Args:
        core: The run's scoring core (a code scorer; schedule, calibrator and weight).
        tasks: The tasks the dataset's ``task_id`` column names.
        num_generations: TRL's ``num_generations``: rows per group.

    After each call, :attr:`last` holds the call's :class:`BatchRecord` (for
    :class:`WMRLGRPOTrainer`). With asynchronous anchors (``WMRLGRPOTrainer(max_staleness=K)``
    sets :attr:`hold_anchors` on training batches), a call answers its world-model groups at once,
    submits its anchor groups' runs and returns None for their rows; :attr:`flight` holds the
    submitted batch until the trainer takes it. A training batch with :attr:`choose_anchors` False
    (the trainer's last ``max_staleness`` steps under ``final_anchors='skip'``) has no anchor group.
    """

    def __init__(self, core: ScoringCore, tasks: Iterable[Task], num_generations: int) -> None:
        if core.scorer is None:
            raise ConfigError("WMRLReward needs a scoring core with a scorer (make_code_core builds one)")
        if num_generations < 2:
            raise ConfigError(f"num_generations must be >= 2 (a group needs a baseline), got {num_generations}")
        self.core = core
        self.tasks = {t.id: t for t in tasks}
        self.num_generations = num_generations
        self.last: BatchRecord | None = None
        self.hold_anchors = False
        self.anchor_timeout_s: float | None = None
        self.choose_anchors = True
        self.flight: InFlightAnchors | None = None

    def groups(self, completions: Sequence[Any], task_id: Sequence[str], prompt_uid: Sequence[str],
               step: int) -> list[CodeGroup]:
        """The batch's code groups: ``num_generations`` consecutive rows each, id ``(step, prompt_uid)``."""
        n, g = len(completions), self.num_generations
        if not (len(task_id) == len(prompt_uid) == n):
            raise ConfigError(f"{n} completions but {len(task_id)} task ids and {len(prompt_uid)} prompt uids")
        if n % g:
            raise ConfigError(
                f"this process got {n} rows, not a multiple of num_generations={g}: a group would span two "
                "processes. Make per_device_train_batch_size * steps_per_generation (and the eval batch) "
                "a multiple of num_generations")
        out = []
        for start in range(0, n, g):
            rows = range(start, start + g)
            uids = {prompt_uid[i] for i in rows}
            tasks = {task_id[i] for i in rows}
            if len(uids) != 1 or len(tasks) != 1:
                raise ConfigError(f"rows {start}..{start + g - 1} do not share one prompt (uids {sorted(uids)}): "
                                  "the batch is not in TRL's groups of num_generations consecutive rows")
            (tid,) = tasks
            if tid not in self.tasks:
                raise ConfigError(f"task {tid!r} of the dataset is not among the reward's {len(self.tasks)} tasks")
            scripts = [extract_code(completion_text(completions[i])) for i in rows]
            out.append(CodeGroup(self.tasks[tid], scripts, (int(step), uids.pop())))
        return out

    def score(self, groups: Sequence[CodeGroup]) -> list[ScoredGroup]:
        """Score this process's groups through the core. With several processes, each scores its
        own groups and every process fuses all of them, in rank order (the module docstring)."""
        rank, world = _world()
        if world == 1:
            return self.core.score(groups)
        core = self.core
        raw = core.scorer.score(groups, core.streams([g.group_id for g in groups]))
        gathered: list[list[ScoredGroup] | None] = [None] * world
        torch.distributed.all_gather_object(gathered, raw)
        offset = sum(len(part) for part in gathered[:rank])
        fused = core.fuse([g for part in gathered for g in part])
        return fused[offset:offset + len(groups)]

    def submit(self, groups: Sequence[CodeGroup], step: int) -> list[ScoredGroup]:
        """Asynchronous anchors (one process): the world-model groups fused now, the anchor groups'
        runs submitted (:attr:`flight`) and scored provisionally until they land, in batch order."""
        if self.flight is not None:
            raise ConfigError("the previous batch's anchors in flight were never taken: asynchronous anchors need "
                              "WMRLGRPOTrainer, which lands them")
        now, self.flight = self.core.score_async(groups, tag=step, timeout_s=self.anchor_timeout_s,
                                                 anchors=self.choose_anchors)
        held = {id(g) for g in self.flight.groups} if self.flight is not None else set()
        answered, submitted = iter(now), iter(self.flight.scored if self.flight is not None else [])
        return [next(submitted) if id(g) in held else next(answered) for g in groups]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, *,
                 task_id: Sequence[str], prompt_uid: Sequence[str], trainer_state: Any = None,
                 log_metric: Any = None, log_extra: Any = None, **_: Any) -> list[float | None]:
        """One reward per row, ``None`` for an infrastructure failure (TRL's reward-function signature)."""
        step = trainer_state.global_step if trainer_state is not None else 0
        groups = self.groups(completions, task_id, prompt_uid, step)
        scored = self.submit(groups, step) if self.hold_anchors else self.score(groups)
        samples = [(g, s) for g in scored for s in g.samples]
        in_flight = np.array([self.hold_anchors and g.stream == "anchor" for g, _ in samples], dtype=bool)
        rewards = np.array([r for g in scored for r in g.rewards], dtype=float)
        rewards[in_flight] = np.nan
        self.last = BatchRecord(
            group_ids=[g.group_id for g, _ in samples], streams=[g.stream for g, _ in samples],
            is_anchor=np.array([g.stream == "anchor" for g, _ in samples], dtype=bool),
            rewards=rewards, scored=np.isfinite(rewards), fusion_weights=np.array([s.fusion_weight for _, s in samples]),
            w_anchor=self.core.anchor_weight(), in_flight=in_flight)
        if log_metric is not None:
            for name, value in self.metrics(scored).items():
                log_metric(name, value)
        if log_extra is not None:
            log_extra("wmrl/stream", self.last.streams)
            log_extra("wmrl/wm_score_raw", [s.wm_score_raw for _, s in samples])
            log_extra("wmrl/real_score", [s.real_score for _, s in samples])
            log_extra("wmrl/fusion_weight", self.last.fusion_weights.tolist())
        return [float(r) if np.isfinite(r) else None for r in rewards]

    def metrics(self, scored: Sequence[ScoredGroup]) -> dict[str, float]:
        """``calibration/*`` and ``fusion/*`` from the core, the batch's anchor share, and ``cost/*``
        (this process's seconds and counts)."""
        out = dict(self.core.metrics())
        samples = [s for g in scored for s in g.samples]
        out["anchors/group_share"] = float(np.mean([g.stream == "anchor" for g in scored]))
        out["reward/dropped"] = float(sum(s.infra_failure for s in samples))
        out["cost/execution_s"] = float(sum(s.cost.get("execution_s", 0.0) for s in samples))
        out["cost/world_model_s"] = float(sum(s.cost.get("world_model_s", 0.0) for s in samples))
        out["cost/executions"] = float(sum(s.executed for s in samples))
        out["cost/proved_unexecuted"] = float(sum(s.proved and not s.executed and s.stream != "world_model"
                                                  for s in samples))
        out["cost/predictions"] = float(sum(s.wm_score_raw is not None for s in samples))
        return out


# --------------------------------------------------------------------------- trainer


def _wmrl_reward(reward_funcs: Sequence[Any]) -> WMRLReward:
    found = [f for f in reward_funcs if isinstance(f, WMRLReward)]
    if len(found) != 1:
        raise ConfigError(f"WMRLGRPOTrainer needs exactly one WMRLReward among its reward functions, got {len(found)}")
    return found[0]


@dataclass
class HeldAnchors:
    """A training batch's anchor rows in flight: TRL's per-row tensors for them (with the policy's
    log-probabilities at generation, ``old_per_token_logps``, for the loss's importance ratio) and
    the core's record of their runs."""

    step: int
    flight: InFlightAnchors
    rows: dict[str, torch.Tensor] = field(repr=False)


#: Row tensors padded on the left (TRL left-pads prompts); every other 2-d row tensor is padded on the right.
_LEFT_PADDED = ("prompt_ids", "prompt_mask")


class WMRLGRPOTrainer(trl.GRPOTrainer):
    """TRL's ``GRPOTrainer`` with WMRL's inverse-variance anchor weight on the advantages.

    Takes ``GRPOTrainer``'s arguments; ``reward_funcs`` must hold one :class:`WMRLReward`.

    Args:
        max_staleness: 0 (the default) scores every training batch synchronously. ``K > 0`` turns
            on asynchronous anchors: a batch's anchor groups are submitted and the step trains on
            its world-model groups at once; an anchor batch trains at the first step after it lands
            (with the loss's importance ratio against the policy that generated it), at most ``K``
            steps late: a step waits for the batch of ``K`` steps before it. It calibrates when it
            lands.
            The run's last step waits for every anchor (``docs/environments.md``).
        final_anchors: With ``max_staleness > 0``: ``'land'`` (the default) as above, or ``'skip'``:
            the last ``max_staleness`` steps choose no anchor groups (their real scores could reach
            only the last update), so the last step waits only for anchors ``K`` steps old; the rule
            is :func:`wmrl_envs.scoring.schedule.anchor_steps`, as in ``wmrl train``.
        anchor_timeout_s: With ``max_staleness > 0``: a run not back this many seconds after its
            submission is an infrastructure failure (None: the sandbox's own limits).

    After each generation batch, :attr:`last_batch` is the :class:`BatchRecord` of the rows it trains.

    Raises:
        TRLVersionError: The installed TRL is not a :data:`TESTED_TRL` release.
        ConfigError: The reward's ``num_generations`` differs from the config's, or a process's
            generation batch is not whole groups, or asynchronous anchors meet a configuration
            they do not support (:meth:`_check_asynchronous`).
    """

    def __init__(self, *args: Any, max_staleness: int = 0, final_anchors: str = "land",
                 anchor_timeout_s: float | None = None, **kwargs: Any) -> None:
        check_trl_version()
        if isinstance(max_staleness, bool) or not isinstance(max_staleness, int) or max_staleness < 0:
            raise ConfigError(f"max_staleness must be an int >= 0, got {max_staleness!r}")
        check_final_anchors(final_anchors)
        if anchor_timeout_s is not None and (not max_staleness or not anchor_timeout_s > 0):
            raise ConfigError(f"anchor_timeout_s={anchor_timeout_s!r} needs max_staleness > 0 and must be > 0")
        super().__init__(*args, **kwargs)
        self.wmrl_reward = _wmrl_reward(self.reward_funcs)
        g = self.wmrl_reward.num_generations
        cfg = self.args
        if cfg.num_generations != g or (cfg.num_generations_eval or g) != g:
            raise ConfigError(f"WMRLReward groups {g} rows but the config has num_generations={cfg.num_generations}, "
                              f"num_generations_eval={cfg.num_generations_eval}")
        local = cfg.per_device_train_batch_size * cfg.steps_per_generation
        if local % g:
            raise ConfigError(f"per_device_train_batch_size * steps_per_generation = {local} is not a multiple of "
                              f"num_generations={g}: a group would span two processes")
        self.max_staleness = max_staleness
        self.final_anchors = final_anchors
        self.wmrl_reward.anchor_timeout_s = anchor_timeout_s
        self.last_batch: BatchRecord | None = None
        self._in_flight: deque[HeldAnchors] = deque()
        if max_staleness:
            self._check_asynchronous()

    def _check_asynchronous(self) -> None:
        """Asynchronous anchors change the batch's rows after TRL has built it; refuse what that would break."""
        cfg = self.args
        refusals = {
            "several processes (each would land its runs at its own time and the calibrators would part)":
                self.accelerator.num_processes > 1,
            "another reward function beside WMRLReward (it would score rows that are held back)":
                len(self.reward_funcs) != 1,
            "steps_per_generation > 1 (TRL splits a generation batch into equal parts; landed rows change its size)":
                cfg.steps_per_generation != 1,
            f"scale_rewards={self.scale_rewards!r} (a landed group is normalised alone: use 'group' or 'none')":
                self.scale_rewards not in ("group", "none"),
            "use_vllm (its sampling-ratio correction is not carried for held rows yet)": bool(self.use_vllm),
        }
        refused = [reason for reason, applies in refusals.items() if applies]
        if refused:
            raise ConfigError("asynchronous anchors (max_staleness > 0) do not support " + "; ".join(refused))

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.wmrl_reward.hold_anchors = bool(self.max_staleness) and self.model.training
        if self.wmrl_reward.hold_anchors:
            last = anchor_steps(self.state.max_steps, self.max_staleness, self.final_anchors)
            self.wmrl_reward.choose_anchors = last is None or self.state.global_step < last
        output = super()._generate_and_score_completions(inputs)
        record = self.wmrl_reward.last
        if record is None or len(record.streams) != output["advantages"].shape[0]:
            raise ConfigError("the WMRL reward did not score this batch (was it called with the batch's rows?)")
        if self.wmrl_reward.hold_anchors:
            output, record = self._hold_and_land(output, record)
        advantages = output["advantages"]
        weights = self._anchor_weights(record).to(advantages.device, advantages.dtype)
        output["advantages"] = advantages * (weights if advantages.dim() == 1 else weights[:, None])
        self.last_batch = record
        return output

    def _anchor_weights(self, record: BatchRecord) -> torch.Tensor:
        """This process's rows' weights: ``sample_weights`` over the scored rows of every process (mean 1
        there); a row without a reward has advantage 0 and weight 0."""
        device = self.accelerator.device
        local = torch.as_tensor(np.stack([record.is_anchor, record.scored]).astype(np.int64), device=device)
        everyone = self.accelerator.gather(local.T.contiguous()).cpu().numpy().astype(bool)  # [N, 2]
        is_anchor, scored = everyone[:, 0], everyone[:, 1]
        weights = np.zeros(len(everyone))
        if scored.any():
            weights[scored] = sample_weights(is_anchor[scored], record.w_anchor)
        start = self.accelerator.process_index * len(record.streams)
        return torch.as_tensor(weights[start:start + len(record.streams)], dtype=torch.float32)

    # ------------------------------------------------------------------- asynchronous anchors

    def _hold_and_land(self, output: dict[str, Any], record: BatchRecord) -> tuple[dict[str, Any], BatchRecord]:
        """Hold this batch's anchor rows until their runs land; add the rows of earlier batches that
        that land now, ``max_staleness`` steps old, with their advantages. A batch left with no row
        waits for every batch in flight."""
        step = self.state.global_step
        n = output["advantages"].shape[0]
        row_keys = [k for k, v in output.items() if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == n]
        flight, self.wmrl_reward.flight = self.wmrl_reward.flight, None
        if flight is not None:
            held = torch.as_tensor(record.in_flight)
            rows = {k: output[k][held] for k in row_keys}
            if "old_per_token_logps" not in rows:
                rows["old_per_token_logps"] = self._policy_logps(rows)
            self._in_flight.append(HeldAnchors(step, flight, rows))
            output = _with_item_count({k: v[~held] if k in row_keys else v for k, v in output.items()})
            record = record.rows(~record.in_flight)
        wait = step + 1 >= self.state.max_steps or not record.streams
        landing = land_in_order(self._in_flight, lambda batch: self.wmrl_reward.core.land(batch.flight, wait=True),
                                step, self.max_staleness, wait=wait)
        for name, value in landing.metrics().items():
            if np.isfinite(value):
                self._metrics["train"][name].append(value)
        if not landing.trained:
            return output, record
        if "old_per_token_logps" not in output:  # the loss's ratio needs one for every row once a landed row has one
            output["old_per_token_logps"] = self._policy_logps(output)
        parts, records = [output], [record]
        for batch, groups, _ in landing.trained:
            rewards = np.array([r for g in groups for r in g.rewards], dtype=float)
            parts.append({**batch.rows, "advantages": self._landed_advantages(rewards).to(output["advantages"])})
            samples = [(g, s) for g in groups for s in g.samples]
            records.append(BatchRecord(
                [g.group_id for g, _ in samples], [g.stream for g, _ in samples], np.ones(len(samples), dtype=bool),
                rewards, np.isfinite(rewards), np.array([s.fusion_weight for _, s in samples]), 0.0,
                np.zeros(len(samples), dtype=bool)))
        keys = dict.fromkeys([*row_keys, "old_per_token_logps"])
        output = _with_item_count({**output, **_concat_rows(parts, keys, self.processing_class.pad_token_id)})
        return output, _concat_records(records, self.wmrl_reward.core.anchor_weight())

    @torch.no_grad()
    def _policy_logps(self, rows: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The current policy's per-token log-probabilities of ``rows``' completions (what TRL's loss
        takes as the ratio's reference when a batch has none)."""
        completion_ids = rows["completion_ids"]
        if not len(completion_ids):  # every row of the batch was an anchor in flight
            return torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
        logps, _, _ = self._get_per_token_logps_and_entropies(
            self.model, torch.cat([rows["prompt_ids"], completion_ids], dim=1),
            torch.cat([rows["prompt_mask"], rows["completion_mask"]], dim=1), completion_ids.size(1),
            batch_size=self.args.per_device_train_batch_size)
        return logps

    def _landed_advantages(self, rewards: np.ndarray) -> torch.Tensor:
        """TRL's group advantages (its ``scale_rewards``) of landed rows, ``num_generations`` a group;
        a row without a reward gets 0."""
        from trl.trainer.utils import nanstd  # noqa: PLC0415 - with TRL, which the module already requires

        grouped = torch.as_tensor(rewards, dtype=torch.float32).view(-1, self.wmrl_reward.num_generations)
        grouped = grouped * self.reward_weights[0].item()
        advantages = grouped - torch.nanmean(grouped, dim=1, keepdim=True)
        if self.scale_rewards != "none":
            advantages = advantages / (nanstd(grouped, dim=1, keepdim=True) + 1e-4)
        return torch.nan_to_num(advantages.flatten(), nan=0.0)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self.max_staleness and self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            torch.save([(b.step, b.flight, b.rows) for b in self._in_flight], folder / IN_FLIGHT_FILE)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """TRL's ``train``; with asynchronous anchors, a resumed run submits again the anchor batches
        its checkpoint had in flight, and anchors still in flight at the end land (they calibrate)."""
        if self.max_staleness:
            self._in_flight = deque(_load_in_flight(resume_from_checkpoint, self.args.output_dir))
        result = super().train(resume_from_checkpoint, *args, **kwargs)
        # No step is left to train them: a bound of -1 drops every batch after its landing has calibrated.
        land_in_order(self._in_flight, lambda batch: self.wmrl_reward.core.land(batch.flight, wait=True),
                      self.state.global_step, max_staleness=-1, wait=True)
        return result


def _concat_rows(parts: Sequence[Mapping[str, torch.Tensor]], keys: Sequence[str], pad_id: int) -> dict[str, torch.Tensor]:
    """Row tensors of several batches stacked, each 2-d one padded to the widest (prompts on the left)."""
    merged = {}
    for key in keys:
        tensors = [part[key] for part in parts]
        if tensors[0].dim() >= 2:
            width = max(t.shape[1] for t in tensors)
            value = pad_id if key.endswith("_ids") else 0
            left = key in _LEFT_PADDED
            tensors = [torch.nn.functional.pad(t, (width - t.shape[1], 0) if left else (0, width - t.shape[1]),
                                               value=value) for t in tensors]
        merged[key] = torch.cat([t.to(tensors[0].device) for t in tensors])
    return merged


def _with_item_count(output: dict[str, Any]) -> dict[str, Any]:
    """``output`` with TRL's ``num_items_in_batch`` (the loss's token count) recounted for its rows (one process)."""
    loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
    return {**output, "num_items_in_batch": loss_mask.sum().to(output["num_items_in_batch"])}


def _concat_records(records: Sequence[BatchRecord], w_anchor: float) -> BatchRecord:
    """One record for rows stacked in the order of ``records``, with the anchor weight after landing."""
    return BatchRecord([i for r in records for i in r.group_ids], [s for r in records for s in r.streams],
                       np.concatenate([r.is_anchor for r in records]), np.concatenate([r.rewards for r in records]),
                       np.concatenate([r.scored for r in records]), np.concatenate([r.fusion_weights for r in records]),
                       w_anchor, np.zeros(sum(len(r.streams) for r in records), dtype=bool))


def _load_in_flight(resume_from_checkpoint: str | bool | None, output_dir: str | None) -> list[HeldAnchors]:
    """The anchor batches a checkpoint had in flight (none when not resuming, or when the checkpoint
    comes from a synchronous run)."""
    if not resume_from_checkpoint:
        return []
    folder = (transformers.trainer_utils.get_last_checkpoint(output_dir) if resume_from_checkpoint is True
              else resume_from_checkpoint)
    path = Path(folder or "") / IN_FLIGHT_FILE
    if folder is None or not path.is_file():
        return []
    # Our own checkpoint file (pickled records and tensors), written by _save_checkpoint.
    return [HeldAnchors(step, flight, rows) for step, flight, rows in torch.load(path, weights_only=False)]


# --------------------------------------------------------------------------- checkpoints


class WMRLStateCallback(transformers.TrainerCallback):
    """Keeps the scoring core's state (calibrator pairs, ``c``) in TRL's checkpoints.

    ``on_save`` writes :data:`STATE_FILE` into ``<output_dir>/checkpoint-<step>`` (the main
    process; every process's calibrator is the same). ``on_train_begin`` of a resumed run
    (global step > 0) loads it from ``resume_from`` if set, else from the checkpoint of that
    step in ``output_dir``, which is where ``trainer.train(resume_from_checkpoint=True)`` resumes.

    Raises:
        ConfigError: On resume, when the checkpoint has no WMRL state: continuing with an empty
            calibrator would silently change the run.
    """

    def __init__(self, core: ScoringCore, resume_from: str | os.PathLike | None = None) -> None:
        self.core = core
        self.resume_from = resume_from

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / (STATE_FILE + ".tmp")
            tmp.write_text(json.dumps(self.core.state_dict()))
            os.replace(tmp, folder / STATE_FILE)
        return control

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step > 0:
            folder = Path(self.resume_from or Path(args.output_dir) / f"checkpoint-{state.global_step}")
            path = folder / STATE_FILE
            if not path.is_file():
                raise ConfigError(f"resuming at step {state.global_step} but {path} does not exist: the checkpoint "
                                  "has no WMRL scoring state (pass resume_from= the checkpoint folder)")
            self.core.load_state_dict(json.loads(path.read_text()))
        return control
