"""The WMRL trainer: GRPO whose rewards mostly come from a world model.

One step, top to bottom (:meth:`WMRLTrainer.train_step`):

1. **Schedule.** Sample B tasks; the run's :class:`~wmrl_envs.scoring.StepSchedule` marks about
   ``anchor_fraction`` of the groups as anchors, deterministically from (seed, step), at least
   one per step. With ``anchor_choice="informed"`` (or ``"informed_per_cost"``) it sets only how
   many; which is decided in step 2, once the world model has scored (and, per cost, priced) every
   group (:class:`~wmrl_envs.scoring.InformedSchedule`).
2. **Collect.** The policy generates G rollouts per task in one batch; the adapter scores them
   through the run's :class:`~wmrl_envs.scoring.ScoringCore` (the one a fused env uses): one
   world-model batch over every group, one parallel fan-out over the anchors.
3. **Debias.** Inside the core, anchor pairs (world-model score, real score) refit the
   calibrator before world-model samples get calibrated scores. The schedule's adaptive rule
   then reads the calibrator's audit and η̂² and sets the next step's anchor share
   (``anchors/fraction``, ``anchors/reason``; it moves only with ``adaptive_anchors``).
4. **Advantages.** Group-relative, within each group (all members share a stream).
5. **Denoise and update.** Anchor samples get the weight ``w_A`` of the configured rule
   (:mod:`wmrl_envs.scoring.fusion`), world-model samples 1, normalised to mean 1; the
   clipped surrogate loss takes an optimiser step.
6. **Account.** The compute ledger records generation, world-model, execution and update time;
   ``execution/infra_failures`` and ``execution/infra_share`` count the step's executions (samples
   of real and anchor groups not settled by a proof) that failed for infrastructure reasons.

A run without real signal stops: when more than ``max_infra_share`` of the executions of the last
``infra_window`` steps (or, in a shorter run, of all its steps at its end) failed for
infrastructure reasons, training saves a resumable checkpoint and raises
:class:`~wmrl_envs.errors.InfraFailureError` naming the first cause.

Warmup (the first ``warmup_steps`` steps, with more anchors; by default only under a rule that
reads what it measures) measures the fusion constant c of
the ``eta2`` and ``sampling`` anchor-weight rules: it compares gradient variances of the same
anchor rollouts under real and under calibrated world-model advantages, per sample (``eta2``)
or per group (``sampling``; see :mod:`trainers.fusion`). The ``paper`` rule fixes its own c
after ``calibrate_after`` anchor groups, in the scoring core. When every warmup anchor group
tied on its real reward (sparse success), the measurement waits for the next anchors, with
anchor weight 1 until then.

The trainer knows nothing about text: policies yield :class:`agents.base.Rollout` rows of
log-probs, so a VLA whose rollout is a 500-step episode trains through the same loop.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import random
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from agents.base import Policy, Rollout, pad_logps
from trainers import fusion, grpo
from trainers.adapters import EnvAdapter, GroupOutcome, PendingAnchors
from trainers.evaluate import infra_excess
from trainers.families import get_family
from trainers.ledger import ComputeLedger
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator
from wmrl_envs.errors import InfraFailureError
from wmrl_envs.scoring import (
    ConstantSchedule,
    InformedSchedule,
    ScoringCore,
    StepSchedule,
    land_in_order,
    sample_weights,
)
from wmrl_envs.scoring.schedule import anchor_steps
from wmrl_envs.scoring.shaping import shaped_return

CHECKPOINT = "checkpoint.pt"
#: Every anchor sample of the run, predicted and executed (appended each step).
ANCHORS_LOG = "anchors.csv"


class WMRLTrainer:
    """Trains ``policy`` on the env family behind ``adapter`` following ``config.mode``."""

    def __init__(self, config: WMRLConfig, policy: Policy, adapter: EnvAdapter,
                 core: ScoringCore | None = None) -> None:
        self.config = config
        self.policy = policy
        self.adapter = adapter
        torch.manual_seed(config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.loss.learning_rate)
        self.reference = _frozen_copy(policy) if config.loss.kl_coef > 0 else None
        self.core = core or make_core(config)
        self.ledger = ComputeLedger()
        self.warmup: dict[str, float] = {}
        self._warmup_samples: list[tuple[Rollout, float, float, Any]] = []
        self.step = 0
        self.history: list[dict[str, float]] = []
        #: The scored groups of the last step, for what reads a step after it (an audit, a callback).
        self.last_outcomes: list[GroupOutcome] = []
        # Asynchronous anchors: the steps whose anchor groups are still running, oldest first.
        self._in_flight: deque[PendingAnchors] = deque()
        # (infra failures, executions, first infra failure's message) of the recent steps of this process
        self._infra_window: deque[tuple[int, int, str | None]] = deque(maxlen=config.infra_window)
        self.run_dir = Path(config.output_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._tb = None

    @property
    def calibrator(self) -> Calibrator:
        return self.core.calibrator

    @property
    def c(self) -> float | None:
        """The fusion constant: configured, measured in warmup, or None until measured."""
        return self.core.c

    # ------------------------------------------------------------------ schedule
    def schedule(self, step: int) -> tuple[list[str], list[int], list[str] | None]:
        """Tasks, group ids and streams of ``step``; a pure function of (seed, step). Streams are
        None under an informed schedule, which decides them from the scored groups."""
        cfg = self.config
        b = cfg.schedule.tasks_per_step
        rng = np.random.default_rng([cfg.seed, step])
        pool = self.adapter.task_ids
        tasks = list(rng.choice(pool, size=b, replace=b > len(pool)))
        group_ids = [step * b + j for j in range(b)]
        informed = isinstance(self.core.schedule, InformedSchedule)
        return tasks, group_ids, None if informed else self.core.streams(group_ids)

    # ------------------------------------------------------------------ one step
    def collect(self, step: int) -> list[GroupOutcome]:
        """The scored groups of ``step``: generated by the policy, scored through the core."""
        task_ids, group_ids, _ = self.schedule(step)
        return self.adapter.collect(self.policy, task_ids, group_ids, self.config.schedule.group_size,
                                    self.generator, self.ledger, self.core)

    def train_step(self) -> dict[str, float]:
        cfg, step = self.config, self.step
        started = time.perf_counter()
        if cfg.schedule.max_staleness:
            outcomes, executed, flight_metrics = self._collect_asynchronously(step)
        else:
            outcomes, flight_metrics = self.collect(step), {}
            executed = outcomes
            self._log_anchors(step, step, outcomes)
        self.last_outcomes = outcomes
        self.ledger.add("world_model", *self.core.take_fusion_time(), count=0)  # fusion is the world model's upkeep
        rollouts, rewards, is_anchor, metrics = self._rewards(outcomes)
        metrics.update(flight_metrics)
        metrics.update(self._count_infra(executed))
        if cfg.uses_anchors and isinstance(self.core.schedule, (StepSchedule, InformedSchedule)):
            metrics.update(self._adapt_anchors(step))
        measuring = cfg.measures_fusion_constant and self.c is None  # warmup, or extended until anchors carry signal
        if measuring:
            self._remember_warmup([o for o in outcomes if o.stream == "anchor"])
        if measuring and step + 1 >= cfg.warmup_steps:
            self._measure_fusion_constant()
            metrics.update(self.warmup)

        loss_metrics = self._update(rollouts, rewards, is_anchor) if rollouts else {}
        metrics.update(loss_metrics)
        metrics.update(self.calibrator.metrics() | self.core.bound_metrics() if cfg.uses_anchors else {})
        metrics.update(self.ledger.end_step(step))
        metrics["time/step_s"] = time.perf_counter() - started  # elapsed: what waiting on anchors costs
        metrics["step"] = step
        self.step += 1
        self._log(metrics)
        return metrics

    def _collect_asynchronously(self, step: int) -> tuple[list[GroupOutcome], list[GroupOutcome], dict[str, float]]:
        """Asynchronous anchors: the step's other groups at once, its anchor groups submitted; the
        anchors of the step ``max_staleness`` before it land (:func:`land_in_order`: waited for if
        need be), train and calibrate. The last step lands every batch. Returns what trains, what landed (for the infrastructure count) and the flight's
        metrics."""
        cfg = self.config.schedule
        task_ids, group_ids, _ = self.schedule(step)
        outcomes, pending = self.adapter.collect_async(self.policy, task_ids, group_ids, cfg.group_size,
                                                       self.generator, self.ledger, self.core, step=step,
                                                       timeout_s=cfg.anchor_timeout_s)
        if pending is not None:
            self._in_flight.append(pending)

        def land(batch: PendingAnchors) -> list[GroupOutcome]:
            return self.adapter.land(batch, self.ledger, self.core, wait=True)

        landing = land_in_order(self._in_flight, land, step, cfg.max_staleness, wait=step + 1 >= self.config.steps)
        landed = []
        for batch, arrived in landing.landed:
            self._log_anchors(batch.step, step, arrived)
            landed += arrived
        trained = [outcome for _, arrived, _ in landing.trained for outcome in arrived]
        return outcomes + trained, landed, landing.metrics()

    def _rewards(self, outcomes: list[GroupOutcome]):
        """Per-rollout training rewards as the core scored them; rollouts without a score are dropped."""
        rollouts: list[Rollout] = []
        rewards: list[float] = []
        is_anchor: list[bool] = []
        by_stream: dict[str, list[float]] = {}
        for o in outcomes:
            for r, s in zip(o.rollouts, o.scored.rewards):
                if np.isfinite(s):
                    rollouts.append(r)
                    rewards.append(float(s))
                    is_anchor.append(o.stream == "anchor")
                    by_stream.setdefault(o.stream, []).append(float(s))
        metrics = {"reward/mean": float(np.mean(rewards)) if rewards else float("nan")}
        for stream, values in by_stream.items():
            metrics[f"reward/{stream}/mean"] = float(np.mean(values))
        executed = [o for o in outcomes if o.stream in ("real", "anchor")]
        if executed:
            metrics["reward/valid_rate"] = float(np.mean(np.concatenate([o.scored.valid for o in executed])))
        metrics["train/dropped"] = float(sum(len(o.rollouts) for o in outcomes) - len(rollouts))
        return rollouts, np.array(rewards), np.array(is_anchor, dtype=bool), metrics

    def _count_infra(self, outcomes: list[GroupOutcome]) -> dict[str, float]:
        """``execution/*`` metrics of a step: its executions (samples of real and anchor groups that no
        proof settled) and how many failed for infrastructure reasons; remembered for the stop rule."""
        executions = [s for o in outcomes if o.stream in ("real", "anchor") for s in o.scored.samples if not s.proved]
        failed = [s for s in executions if s.infra_failure]
        self._infra_window.append((len(failed), len(executions), failed[0].error if failed else None))
        return {"execution/runs": float(len(executions)), "execution/infra_failures": float(len(failed)),
                "execution/infra_share": len(failed) / len(executions) if executions else float("nan")}

    def _stop_without_signal(self) -> None:
        """Save a checkpoint and raise :class:`InfraFailureError` when more than ``max_infra_share`` of the
        window's executions failed for infrastructure reasons: the rewards carry no real signal (a
        ``wmrl`` run would silently become a ``world_model`` one). Checked on a full window, or at
        the end of a run shorter than one."""
        window = self._infra_window
        if len(window) < window.maxlen and self.step < self.config.steps:
            return
        first = next((cause for _, _, cause in window if cause is not None), None)
        why = infra_excess(sum(f for f, _, _ in window), sum(n for _, n, _ in window),
                           f"executions of the last {len(window)} step(s)", self.config.max_infra_share, first)
        if why is None:
            return
        path = self.save_checkpoint()
        self._close_logs()
        raise InfraFailureError(f"training stopped after step {self.step}, its rewards have no real signal: {why}. "
                                f"Checkpoint saved to {path}: fix the cause, then resume (wmrl train --resume)")

    def _adapt_anchors(self, step: int) -> dict[str, float]:
        """The schedule's adaptive-anchoring rule, once per step after its anchors reached the calibrator."""
        with self.ledger.measure("world_model", count=0):  # the audit is the world model's upkeep
            fraction, reason = self.core.schedule.adapt(step, self.calibrator.audit().monotone_ok, self._eta2())
        return {"anchors/fraction": fraction, "anchors/reason": float(reason)}

    def _eta2(self) -> float:
        """η̂² once the calibrator has the pairs of a map (``min_pairs_global``), else NaN: the
        residual of a few raw scores says little about the world model."""
        calibrator = self.calibrator
        return calibrator.eta2 if calibrator.n_pairs >= calibrator.config.min_pairs_global else float("nan")

    def _update(self, rollouts: list[Rollout], rewards: np.ndarray, is_anchor: np.ndarray) -> dict[str, float]:
        cfg = self.config.loss
        group_ids = [r.group_id for r in rollouts]
        advantages = grpo.group_advantages(rewards, group_ids, mode=cfg.advantage)
        w_anchor = self.core.anchor_weight()
        weights = torch.as_tensor(sample_weights(is_anchor, w_anchor), dtype=torch.float32)
        logp_old, mask = pad_logps([r.logp for r in rollouts])
        ref_logp = None
        if self.reference is not None:
            with torch.no_grad():
                ref_logp, _ = self.reference.log_probs(rollouts)
        with self.ledger.measure("update", count=len(rollouts)):
            for _ in range(cfg.update_epochs):
                logp_new, _ = self.policy.log_probs(rollouts)
                loss, stats = grpo.clipped_surrogate_loss(
                    logp_new, logp_old, advantages, mask=mask, epsilon=cfg.epsilon,
                    epsilon_high=cfg.epsilon_high, aggregation=cfg.aggregation, sample_weights=weights,
                    ref_logp=ref_logp, kl_coef=cfg.kl_coef)
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
        return {"loss": loss.item(), "policy/grad_norm": float(grad_norm), "fusion/w_anchor": w_anchor,
                "fusion/c": float("nan") if self.c is None else self.c,
                "train/samples": float(len(rollouts)), "train/anchor_share": float(is_anchor.mean()), **stats}

    # ------------------------------------------------------------------ warmup: measure c
    def _remember_warmup(self, anchors: list[GroupOutcome]) -> None:
        for o in anchors:
            for r, real, wm, s in zip(o.rollouts, o.scored.real, o.scored.wm_raw, o.scored.samples):
                if np.isfinite(real) and np.isfinite(wm):
                    self._warmup_samples.append((r, float(real), float(wm), o.group_id, s.potential_start))

    def _measure_fusion_constant(self) -> None:
        """Set c from per-sample gradient variances of the warmup anchors, scored both ways."""
        samples = self._warmup_samples
        eta2 = self._eta2()
        advantage = self.config.loss.advantage
        if len(samples) < 4 or not np.isfinite(eta2):
            self.core.c = 0.0  # not enough evidence: plain averaging, said so in the log
            self.warmup = {"fusion/warmup_samples": float(len(samples)), "fusion/warmup_ratio": float("nan")}
            return
        rollouts = [s[0] for s in samples]
        groups = [s[3] for s in samples]
        real = np.array([s[1] for s in samples])
        calibrated = self.calibrator.calibrate(np.array([s[2] for s in samples]), [r.task_id for r in rollouts])
        # A potential-shaped sample (wmrl_envs/scoring/shaping.py) would be rewarded as a world-model one with its
        # success plus the calibrated potential's rise. Checkpoints written before shaping hold 4-tuples.
        starts = np.array([np.nan if len(s) < 5 or s[4] is None else s[4] for s in samples], dtype=float)
        shaped = np.isfinite(starts)
        if shaped.any():
            calibrated[shaped] = shaped_return(real[shaped], calibrated[shaped], self.calibrator.calibrate(
                starts[shaped], [r.task_id for r, keep in zip(rollouts, shaped) if keep]))
        adv_real = grpo.group_advantages(real, groups, mode=advantage)
        adv_wm = grpo.group_advantages(calibrated, groups, mode=advantage)
        score_grads = _per_sample_score_grads(self.policy, rollouts)
        real_grads, wm_grads = adv_real[:, None] * score_grads, adv_wm[:, None] * score_grads
        if self.config.fusion.rule == "sampling" and len(set(groups)) >= 2:
            var_anchor, var_wm = fusion.grouped_stream_variances(real_grads, wm_grads, groups)
        else:  # eta2, or a single warmup group: per-sample variances
            var_anchor, var_wm = fusion.stream_variances(real_grads, wm_grads)
        if var_anchor == 0:
            # Every anchor group tied on its real reward (sparse success: all failed, or all
            # succeeded), so there is nothing to compare the world-model stream with. Keep the
            # samples, train with weight 1 and measure again after the next step's anchors.
            self.warmup = {"fusion/warmup_samples": float(len(samples)), "fusion/warmup_ratio": float("nan"),
                           "fusion/warmup_extended": 1.0}
            return
        self.core.c = fusion.estimate_c(var_anchor, var_wm, eta2)
        self.warmup = {"fusion/warmup_ratio": var_wm / var_anchor if var_anchor > 0 else float("nan"),
                       "fusion/warmup_eta2": eta2, "fusion/warmup_samples": float(len(samples)),
                       "fusion/c": self.c}
        self._warmup_samples = []

    # ------------------------------------------------------------------ loop, logging, checkpoints
    def train(self, progress: bool = True) -> list[dict[str, float]]:
        bar = tqdm(total=self.config.steps, initial=self.step, desc=f"train {self.config.mode}",
                   disable=not progress, unit="step")
        try:
            while self.step < self.config.steps:
                metrics = self.train_step()
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['reward/mean']:.3f}", w=f"{metrics.get('fusion/w_anchor', 1):.2f}")
                every = self.config.checkpoint_every
                if every and self.step % every == 0:
                    self.save_checkpoint()
                self._stop_without_signal()
        finally:
            bar.close()
        self.save_checkpoint()
        self._close_logs()
        return self.history

    def _log(self, metrics: dict[str, float]) -> None:
        self.history.append(dict(metrics))
        path = self.run_dir / "metrics.csv"
        keys = sorted({k for row in self.history for k in row})
        with path.open("w", newline="") as fh:  # rewritten whole: the key set may grow
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            writer.writerows(self.history)
        tb = self._tensorboard()
        if tb is not None:
            for k, v in metrics.items():
                if k != "step" and isinstance(v, (int, float)) and np.isfinite(v):
                    tb.add_scalar(k, v, metrics["step"])

    def _log_anchors(self, step: int, landed_step: int, outcomes: list[GroupOutcome]) -> None:
        """Append the anchor samples of step ``step``, landed at ``landed_step``, to ``anchors.csv``:
        what the world model predicted before each ran (score, status, P(valid), the stage that
        answered) beside what the run gave, so the world model can be judged prequentially
        (``bench/world_model_oos.py --run``)."""
        rows = [{"step": step, "landed_step": landed_step, "task_id": s.task_id, "group_id": o.scored.group_id, "stratum": s.stratum or "",
                 "wm_stage": s.wm_stage or "",
                 "wm_status": s.wm_status or "", "wm_p_valid": s.p_valid, "wm_score_raw": s.wm_score_raw,
                 "wm_score_calibrated": s.wm_score_calibrated, "status": s.status, "exception": s.exception or "",
                 "real_score": s.real_score, "executed": s.executed,
                 "inclusion_probability": "" if s.inclusion_probability is None else s.inclusion_probability,
                 "predicted_cpu_s": "" if s.predicted_cpu_s is None else s.predicted_cpu_s,
                 "execution_cpu_s": s.cost.get("execution_cpu_s", "") if s.executed else ""}
                for o in outcomes if o.stream == "anchor" for s in o.scored.samples if not s.infra_failure]
        if not rows:
            return
        path = self.run_dir / ANCHORS_LOG
        new = not path.exists()
        # A resumed run keeps the log's own columns (one written before a column existed lacks it).
        if new:
            fields = list(rows[0])
        else:
            with path.open(newline="") as fh:
                fields = next(csv.reader(fh))
        with path.open("a", newline="") as fh:  # appended: a resumed run continues the same log
            writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)

    def _tensorboard(self):
        if self._tb is None and self.config.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 - tensorboard is the optional [plots] extra
            except ImportError:  # the plots extra is optional; CSV metrics are always written
                self.config.tensorboard = False
                return None
            self._tb = SummaryWriter(log_dir=str(self.run_dir / "tb"))
        return self._tb

    def _close_logs(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(), "step": self.step, "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(), "scoring": self.core.state_dict(),
            "ledger": self.ledger.state_dict(), "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(), "python_rng": random.getstate(),
            "warmup": self.warmup, "warmup_samples": self._warmup_samples,
            "history": self.history, "in_flight": list(self._in_flight),
            "reference": self.reference.state_dict() if self.reference is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = state["step"]
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.core.load_state_dict(state["scoring"])
        self.ledger.load_state_dict(state["ledger"])
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.warmup, self._warmup_samples = state["warmup"], state["warmup_samples"]
        self.history = state["history"]
        # Anchors in flight at the checkpoint are submitted again as they are awaited (none before issue 47).
        self._in_flight = deque(state.get("in_flight", []))
        if self.reference is not None and state["reference"] is not None:
            self.reference.load_state_dict(state["reference"])

    def save_checkpoint(self, path: Path | None = None) -> Path:
        """Atomically write everything needed to continue the same trajectory."""
        path = path or self.run_dir / CHECKPOINT
        tmp = path.with_suffix(".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)
        (self.run_dir / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2))
        return path

    def resume(self, path: Path | None = None) -> bool:
        """Continue from the run folder's checkpoint if there is one; return whether it did."""
        path = path or self.run_dir / CHECKPOINT
        if not path.exists():
            return False
        self.load_state_dict(torch.load(path, weights_only=False))
        self._trim_anchor_log()
        return True

    def _trim_anchor_log(self) -> None:
        """Drop the anchor rows of steps after the checkpoint: the resumed run scores them again."""
        path = self.run_dir / ANCHORS_LOG
        if not path.exists():
            return
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            # A row landed after the checkpoint goes: its step's anchors are in flight in it, and land again.
            fields, rows = reader.fieldnames, [r for r in reader if int(r.get("landed_step") or r["step"]) < self.step]
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)


def make_core(config: WMRLConfig) -> ScoringCore:
    """The scoring core of a run: the mode's schedule, a calibrator of its own, the family's scorer.

    ``real`` executes every group, ``world_model`` scores every group with the raw world model,
    and the ``wmrl`` modes anchor a share of each step's groups (adaptively with
    ``adaptive_anchors``). The calibrator records the run's seed; ``c`` is measured in warmup
    unless configured.
    """
    sched = config.schedule
    if config.uses_anchors:
        schedule = StepSchedule(sched.tasks_per_step, sched.anchor_fraction, config.seed, config.warmup_steps,
                                sched.warmup_anchor_fraction, adaptive=sched.adaptive_anchors,
                                eta2_bound=sched.eta2_bound, max_anchor_fraction=sched.max_anchor_fraction,
                                min_anchor_groups=sched.min_anchor_groups,
                                anchor_steps=anchor_steps(config.steps, sched.max_staleness, sched.final_anchors))
        if sched.anchor_choice != "random":
            schedule = InformedSchedule(schedule, sched.inclusion_floor_share,
                                        per_cost=sched.anchor_choice == "informed_per_cost")
    else:
        schedule = ConstantSchedule(config.mode)
    make_scorer = get_family(config.family.env_id).make_scorer
    calibrator = Calibrator(config.calibration)
    return ScoringCore(schedule, calibrator, config.fusion, debias=config.debias, denoise=config.denoise,
                       measure_c=True, scorer=make_scorer(config) if make_scorer else None)


def _frozen_copy(policy: Policy) -> Policy:
    ref = copy.deepcopy(policy)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _probe_parameters(policy: Policy) -> list[torch.nn.Parameter]:
    """The parameters whose per-sample gradients warmup compares: the policy's choice, else the last
    layer; only trained ones (a policy fine-tuned in part may have frozen its choice)."""
    probe = getattr(policy, "fusion_probe_parameters", None)
    chosen = [p for p in probe() if p.requires_grad] if probe is not None else []
    return chosen or [p for p in policy.parameters() if p.requires_grad][-2:]


def _per_sample_score_grads(policy: Policy, rollouts: list[Rollout]) -> torch.Tensor:
    """``[N, P]`` gradients of each rollout's total log-prob on the probe parameters."""
    params = _probe_parameters(policy)
    rows = []
    for r in rollouts:
        logp, mask = policy.log_probs([r])
        grads = torch.autograd.grad((logp * mask).sum(), params, allow_unused=True)
        rows.append(torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                               for g, p in zip(grads, params)]))
    return torch.stack(rows)
