"""The WMRL trainer: GRPO whose rewards mostly come from a world model (DESIGN §8).

One step, top to bottom (:meth:`WMRLTrainer.train_step`):

1. **Schedule.** Sample B tasks; the anchor schedule marks about ``anchor_fraction`` of the
   groups as anchors, deterministically from (seed, step), at least one per step.
2. **Collect.** The policy generates G rollouts per task in one batch; the adapter world-model
   scores every group in one batch and executes the anchors in one parallel fan-out.
3. **Debias.** Anchor pairs (world-model score, real score) refit the isotonic calibrator;
   world-model samples get calibrated scores.
4. **Advantages.** Group-relative, within each group (all members share a stream).
5. **Denoise and update.** Anchor samples get the inverse-variance weight
   ``w_A = clip(1 + c * eta2, 1, w_max)``, world-model samples 1, normalised to mean 1; the
   clipped surrogate loss takes an optimiser step.
6. **Account.** The compute ledger records generation, world-model, execution and update time.

Warmup (the first ``warmup_steps`` steps, with more anchors) measures the fusion constant c:
it compares per-sample gradient variances of the same anchor rollouts under real and under
calibrated world-model advantages (see :mod:`trainers.fusion`). When every warmup anchor group
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
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from agents.base import Policy, Rollout, pad_logps
from trainers import fusion, grpo
from trainers.adapters import EnvAdapter, GroupOutcome
from trainers.ledger import ComputeLedger
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator, CalibratorConfig

CHECKPOINT = "checkpoint.pt"


class WMRLTrainer:
    """Trains ``policy`` on the env family behind ``adapter`` following ``config.mode``."""

    def __init__(self, config: WMRLConfig, policy: Policy, adapter: EnvAdapter) -> None:
        self.config = config
        self.policy = policy
        self.adapter = adapter
        torch.manual_seed(config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        self.reference = _frozen_copy(policy) if config.kl_coef > 0 else None
        # Per-task maps and their pooling keep the calibrator's defaults: the pooling is
        # chosen out of fold from the anchors, so a task map is used only where it helps.
        self.calibrator = Calibrator(CalibratorConfig(min_pairs_global=config.min_calibration_pairs,
                                                      seed=config.seed))
        self.ledger = ComputeLedger()
        self.c = config.fusion_c
        self.warmup: dict[str, float] = {}
        self._warmup_samples: list[tuple[Rollout, float, float, Any]] = []
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.run_dir = Path(config.output_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._tb = None

    # ------------------------------------------------------------------ schedule
    def schedule(self, step: int) -> tuple[list[str], list[int], list[str]]:
        """Tasks, group ids and streams of ``step``; a pure function of (seed, step)."""
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, step])
        pool = self.adapter.task_ids
        tasks = list(rng.choice(pool, size=cfg.tasks_per_step, replace=cfg.tasks_per_step > len(pool)))
        group_ids = [step * cfg.tasks_per_step + j for j in range(cfg.tasks_per_step)]
        if not cfg.uses_anchors:
            return tasks, group_ids, [cfg.mode] * cfg.tasks_per_step
        fraction = cfg.warmup_anchor_fraction if step < cfg.warmup_steps else cfg.anchor_fraction
        n_anchor = max(1, round(fraction * cfg.tasks_per_step))
        anchors = set(rng.choice(cfg.tasks_per_step, size=n_anchor, replace=False).tolist())
        return tasks, group_ids, ["anchor" if j in anchors else "world_model" for j in range(cfg.tasks_per_step)]

    # ------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        cfg, step = self.config, self.step
        task_ids, group_ids, streams = self.schedule(step)
        outcomes = self.adapter.collect(self.policy, task_ids, group_ids, streams, cfg.group_size,
                                        self.generator, self.ledger)

        anchors = [o for o in outcomes if o.stream == "anchor"]
        self._add_anchor_pairs(anchors)
        rollouts, rewards, is_anchor, metrics = self._rewards(outcomes)
        if cfg.uses_anchors and self.c is None:  # warmup, or warmup extended until anchors carry signal
            self._remember_warmup(anchors)
        if cfg.uses_anchors and self.c is None and step + 1 >= cfg.warmup_steps:
            self._measure_fusion_constant()
            metrics.update(self.warmup)

        loss_metrics = self._update(rollouts, rewards, is_anchor) if rollouts else {}
        metrics.update(loss_metrics)
        metrics.update(self.calibrator.metrics() if cfg.uses_anchors else {})
        metrics.update(self.ledger.end_step(step))
        metrics["step"] = step
        self.step += 1
        self._log(metrics)
        return metrics

    def _add_anchor_pairs(self, anchors: list[GroupOutcome]) -> None:
        for o in anchors:
            keep = np.isfinite(o.real) & np.isfinite(o.wm_raw)  # infra failures never enter
            if keep.any():
                self.calibrator.add_pairs(o.wm_raw[keep], o.real[keep], [o.task_id] * int(keep.sum()))

    def _rewards(self, outcomes: list[GroupOutcome]):
        """Per-rollout training rewards by stream; rollouts without a score are dropped."""
        cfg = self.config
        rollouts: list[Rollout] = []
        rewards: list[float] = []
        is_anchor: list[bool] = []
        by_stream: dict[str, list[float]] = {}
        for o in outcomes:
            if o.stream in ("real", "anchor"):
                scores = o.real
            elif cfg.debias:
                scores = np.full_like(o.wm_raw, np.nan)
                ok = np.isfinite(o.wm_raw)
                if ok.any():
                    scores[ok] = self.calibrator.calibrate(o.wm_raw[ok], [o.task_id] * int(ok.sum()))
            else:
                scores = o.wm_raw
            for r, s in zip(o.rollouts, scores):
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
            metrics["reward/valid_rate"] = float(np.mean(np.concatenate([o.valid for o in executed])))
        metrics["train/dropped"] = float(sum(len(o.rollouts) for o in outcomes) - len(rollouts))
        return rollouts, np.array(rewards), np.array(is_anchor, dtype=bool), metrics

    def _anchor_weight(self) -> float:
        cfg = self.config
        if not cfg.denoise or self.c is None:
            return 1.0
        return fusion.anchor_weight(self.calibrator.eta2, self.c, cfg.w_max)

    def _update(self, rollouts: list[Rollout], rewards: np.ndarray, is_anchor: np.ndarray) -> dict[str, float]:
        cfg = self.config
        group_ids = [r.group_id for r in rollouts]
        advantages = grpo.group_advantages(rewards, group_ids, mode=cfg.advantage)
        w_anchor = self._anchor_weight()
        weights = fusion.sample_weights(torch.as_tensor(is_anchor), w_anchor)
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
            for r, real, wm in zip(o.rollouts, o.real, o.wm_raw):
                if np.isfinite(real) and np.isfinite(wm):
                    self._warmup_samples.append((r, float(real), float(wm), o.group_id))

    def _measure_fusion_constant(self) -> None:
        """Set c from per-sample gradient variances of the warmup anchors, scored both ways."""
        samples = self._warmup_samples
        eta2 = self.calibrator.eta2 if self.calibrator.n_pairs >= self.config.min_calibration_pairs else float("nan")
        if len(samples) < 4 or not np.isfinite(eta2):
            self.c = 0.0  # not enough evidence: plain averaging, said so in the log
            self.warmup = {"fusion/warmup_samples": float(len(samples)), "fusion/warmup_ratio": float("nan")}
            return
        rollouts = [s[0] for s in samples]
        groups = [s[3] for s in samples]
        real = np.array([s[1] for s in samples])
        calibrated = self.calibrator.calibrate(np.array([s[2] for s in samples]), [r.task_id for r in rollouts])
        adv_real = grpo.group_advantages(real, groups, mode=self.config.advantage)
        adv_wm = grpo.group_advantages(calibrated, groups, mode=self.config.advantage)
        score_grads = _per_sample_score_grads(self.policy, rollouts)
        var_anchor, var_wm = fusion.stream_variances(adv_real[:, None] * score_grads, adv_wm[:, None] * score_grads)
        if var_anchor == 0:
            # Every anchor group tied on its real reward (sparse success: all failed, or all
            # succeeded), so there is nothing to compare the world-model stream with. Keep the
            # samples, train with weight 1 and measure again after the next step's anchors.
            self.warmup = {"fusion/warmup_samples": float(len(samples)), "fusion/warmup_ratio": float("nan"),
                           "fusion/warmup_extended": 1.0}
            return
        self.c = fusion.estimate_c(var_anchor, var_wm, eta2)
        self.warmup = {"fusion/warmup_ratio": var_wm / var_anchor if var_anchor > 0 else float("nan"),
                       "fusion/warmup_eta2": eta2, "fusion/warmup_samples": float(len(samples)),
                       "fusion/c": self.c}
        self._warmup_samples = []

    # ------------------------------------------------------------------ loop, logging, checkpoints
    def train(self, progress: bool = True) -> list[dict[str, float]]:
        bar = tqdm(total=self.config.steps, initial=self.step, desc=f"train {self.config.mode}",
                   disable=not progress, unit="step")
        while self.step < self.config.steps:
            metrics = self.train_step()
            bar.update(1)
            bar.set_postfix(reward=f"{metrics['reward/mean']:.3f}", w=f"{metrics.get('fusion/w_anchor', 1):.2f}")
            every = self.config.checkpoint_every
            if every and self.step % every == 0:
                self.save_checkpoint()
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

    def _tensorboard(self):
        if self._tb is None and self.config.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
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
            "optimizer": self.optimizer.state_dict(), "calibrator": self.calibrator.state_dict(),
            "ledger": self.ledger.state_dict(), "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(), "python_rng": random.getstate(),
            "c": self.c, "warmup": self.warmup, "warmup_samples": self._warmup_samples,
            "history": self.history,
            "reference": self.reference.state_dict() if self.reference is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = state["step"]
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.calibrator.load_state_dict(state["calibrator"])
        self.ledger.load_state_dict(state["ledger"])
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.c, self.warmup, self._warmup_samples = state["c"], state["warmup"], state["warmup_samples"]
        self.history = state["history"]
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
        return True


def _frozen_copy(policy: Policy) -> Policy:
    ref = copy.deepcopy(policy)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _probe_parameters(policy: Policy) -> list[torch.nn.Parameter]:
    """The parameters whose per-sample gradients warmup compares: the policy's choice, else the last layer."""
    probe = getattr(policy, "fusion_probe_parameters", None)
    if probe is not None:
        return list(probe())
    params = [p for p in policy.parameters() if p.requires_grad]
    return params[-2:]


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
