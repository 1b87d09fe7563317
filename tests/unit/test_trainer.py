"""WMRLTrainer on a synthetic multi-step (VLA-shaped) task: modes, fusion, resume, ledger.

The environment here is synthetic but real in every way the trainer can see: rollouts are
many-step trajectories of discretised actions, the "real" reward is their success rate, and
the "world model" is a planted monotone distortion of it plus noise, so debiasing has work to do.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.base import Rollout, pad_logps
from trainers.adapters import GroupOutcome
from trainers.ledger import ComputeLedger
from trainers.wmrl import WMRLTrainer
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import ScoredGroup, ScoreResult, ScoringCore
from wmrl_envs.scoring.schedule import HashSchedule

STEPS, DIMS, BINS = 6, 3, 4  # a 6-step episode of 3 action tokens with 4 bins each


class StepPolicy(torch.nn.Module):
    """Logits over discretised actions for every step of an episode (shared by all tasks)."""

    def __init__(self) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(STEPS * DIMS, BINS))

    def generate(self, prompts, group_size, group_ids, generator):
        out = []
        for task, gid in zip(prompts, group_ids):
            logp_all = torch.log_softmax(self.logits, dim=-1)
            for _ in range(group_size):
                tokens = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
                out.append(Rollout(task, gid, None, tokens, logp_all.gather(-1, tokens[:, None]).squeeze(-1).detach()))
        return out

    def log_probs(self, rollouts):
        rows = [torch.log_softmax(self.logits, -1).gather(-1, r.tokens[:, None]).squeeze(-1)
                for r in rollouts]
        return pad_logps(rows)


class SyntheticAdapter:
    """Success = share of action tokens hitting bin 2; the world model sees a distorted, noisy copy."""

    def __init__(self, n_tasks: int = 6, noise: float = 0.1, seed: int = 0) -> None:
        self.task_ids = [f"t{i}" for i in range(n_tasks)]
        self.noise = noise
        self.rng = np.random.default_rng(seed)

    def collect(self, policy, task_ids, group_ids, group_size, generator, ledger, core):
        with ledger.measure("generation", count=len(task_ids) * group_size), torch.no_grad():
            rollouts = policy.generate(task_ids, group_size, group_ids, generator)
        outcomes = []
        for task, gid, stream in zip(task_ids, group_ids, core.streams(group_ids)):
            rs = [r for r in rollouts if r.group_id == gid]
            real = self.success(rs)
            seeded = np.random.default_rng([gid, 7])  # deterministic per group, so resume is exact
            wm = np.clip(0.2 + 0.5 * real**2 + seeded.normal(0, self.noise, len(rs)), 0, 1)
            executed = stream in ("real", "anchor")
            if executed:
                ledger.add("simulation", cpu_s=0.01 * len(rs), wall_s=0.01 * len(rs), count=len(rs))
            if stream != "real":
                ledger.add("world_model", cpu_s=0.0001 * len(rs), wall_s=0.0001 * len(rs), count=len(rs))
            samples = [ScoreResult(task, stream, valid=True if executed else None,
                                   real_score=float(r) if executed else None,
                                   wm_score_raw=float(w) if stream != "real" else None)
                       for r, w in zip(real, wm)]
            outcomes.append(GroupOutcome(rs, ScoredGroup(task, gid, stream, samples)))
        core.fuse([o.scored for o in outcomes])
        return outcomes

    def success(self, rollouts):
        return np.array([(r.tokens == 2).float().mean().item() for r in rollouts])

    def close(self):
        pass


def make_trainer(tmp_path, mode="wmrl", **overrides):
    cfg = WMRLConfig.from_flat(mode=mode, steps=overrides.pop("steps", 12), tasks_per_step=6, group_size=4,
                               learning_rate=0.3, warmup_steps=2, calibration_min_pairs_global=12,
                               output_dir=str(tmp_path / mode), tensorboard=False, checkpoint_every=0, **overrides)
    torch.manual_seed(0)
    adapter = SyntheticAdapter()
    return WMRLTrainer(cfg, StepPolicy(), adapter)


def test_vla_shaped_policy_trains_through_the_shared_trainer(tmp_path):
    trainer = make_trainer(tmp_path, steps=20, fusion_rule="eta2")  # measures c and weighs anchors
    before = trainer.policy.logits.detach().clone()
    history = trainer.train(progress=False)
    assert not torch.equal(before, trainer.policy.logits)
    first = np.mean([h["reward/mean"] for h in history[:3]])
    last = np.mean([h["reward/mean"] for h in history[-3:]])
    assert last > first + 0.1  # success share climbs from the uniform 0.25
    assert trainer.calibrator.n_pairs > 0 and trainer.c is not None and trainer.c >= 0
    weights = [h["fusion/w_anchor"] for h in history]
    assert all(1.0 <= w <= 4.0 for w in weights) and max(weights) > 1.0  # planted noise is seen
    assert "fusion/warmup_ratio" in history[1] and "calibration/eta2" in history[-1]
    assert (tmp_path / "wmrl" / "metrics.csv").exists() and (tmp_path / "wmrl" / "checkpoint.pt").exists()


def test_anchor_schedule_is_deterministic_and_sparse(tmp_path):
    trainer = make_trainer(tmp_path, anchor_fraction=0.1)
    a = trainer.schedule(5)
    assert a == trainer.schedule(5)
    assert a[2].count("anchor") == 1  # 0.1 * 6 = 0.6 groups: at least one anchor group a step by default
    assert trainer.schedule(0)[2].count("anchor") == 3  # warmup uses warmup_anchor_fraction 0.5


@pytest.mark.parametrize("mode, executed_share", [("real", 1.0), ("world_model", 0.0), ("wmrl", None)])
def test_ledger_counts_what_each_mode_executes(tmp_path, mode, executed_share):
    trainer = make_trainer(tmp_path, mode=mode, steps=6)
    trainer.train(progress=False)
    sims = trainer.ledger.totals["simulation"].count
    total = 6 * 6 * 4
    if executed_share is not None:
        assert sims == executed_share * total
    else:  # 2 warmup steps at 3 anchor groups, then 1 anchor group per step
        assert sims == (2 * 3 + 4 * 1) * 4
    assert trainer.ledger.totals["generation"].count == total


def test_fusion_time_is_charged_to_the_world_model(tmp_path):
    trainer = make_trainer(tmp_path, steps=4)
    trainer.train(progress=False)
    world_model = trainer.ledger.totals["world_model"]
    # The adapter charges 0.1 ms a predicted sample; the core's fusion (calibrator fits) comes on top,
    # with no count of its own (it scores no script).
    assert world_model.cpu_s > 0.0001 * world_model.count + 1e-4 and world_model.wall_s > 0.0001 * world_model.count + 1e-4
    assert trainer.core.take_fusion_time() == (0.0, 0.0)  # drained every step


def test_no_denoise_keeps_weight_one_and_no_debias_uses_raw_scores(tmp_path):
    no_denoise = make_trainer(tmp_path, mode="wmrl-no-denoise", steps=5)
    assert all(h["fusion/w_anchor"] == 1.0 for h in no_denoise.train(progress=False))
    no_debias = make_trainer(tmp_path, mode="wmrl-no-debias", steps=5)
    hist = no_debias.train(progress=False)
    # Raw world-model scores sit on the planted 0.2 + 0.5 r^2 scale, well below real ones.
    assert hist[-1]["reward/world_model/mean"] < hist[-1]["reward/anchor/mean"]


def test_resume_continues_the_same_trajectory(tmp_path):
    straight = make_trainer(tmp_path / "a", steps=5)
    full = straight.train(progress=False)

    first = make_trainer(tmp_path / "b", steps=3)
    first.train(progress=False)  # saves a checkpoint at the end (step 3)
    resumed = make_trainer(tmp_path / "b", steps=5)
    assert resumed.resume()
    rest = resumed.train(progress=False)
    assert rest[3]["loss"] == full[3]["loss"] and rest[4]["loss"] == full[4]["loss"]
    assert torch.equal(resumed.policy.logits, straight.policy.logits)


def test_bad_configs_raise_typed_errors():
    with pytest.raises(ConfigError):
        WMRLConfig(mode="magic")
    with pytest.raises(ConfigError):
        WMRLConfig.from_flat(group_size=1)
    with pytest.raises(ConfigError):
        WMRLConfig.from_flat(fusion_rule="eta2", warmup_steps=0)  # eta2 must measure c or be given one
    assert WMRLConfig.from_flat(fusion_rule="eta2", warmup_steps=0, fusion_c=2.0).fusion.c == 2.0
    assert WMRLConfig.from_flat(warmup_steps=0).fusion.rule == "none"  # the default measures nothing
    with pytest.raises(ConfigError, match="unknown"):
        WMRLConfig.from_flat(anchor_fractoin=0.2)
    for bad in ({"max_infra_share": 1.0}, {"max_infra_share": -0.1}, {"infra_window": 0}):
        with pytest.raises(ConfigError, match="max_infra_share|infra_window"):
            WMRLConfig.from_flat(**bad)
    with pytest.raises(ConfigError, match="sample_runs must be one of"):
        WMRLConfig.from_flat(world_model="sample_run", sample_runs="sometimes")
    with pytest.raises(ConfigError, match="applies to world model 'sample_run'"):
        WMRLConfig.from_flat(sample_runs="cost")  # the default world model runs no samples
    kwargs = WMRLConfig.from_flat(world_model="sample_run", sample_runs="cost").family.world_model_kwargs()
    assert kwargs["config"] == {"run": "cost"}


def test_config_groups_round_trip_and_reach_the_calibrator(tmp_path):
    cfg = WMRLConfig.from_flat(anchor_fraction=0.2, fusion_w_max=2.0, calibration_min_pairs_global=7, seed=3)
    assert cfg.schedule.anchor_fraction == 0.2 and cfg.fusion.w_max == 2.0
    assert WMRLConfig.from_dict(cfg.to_dict()) == cfg
    trainer = WMRLTrainer(cfg, StepPolicy(), SyntheticAdapter())
    assert trainer.calibrator.config.min_pairs_global == 7
    assert trainer.core.fusion.w_max == 2.0


class SparseSuccessAdapter(SyntheticAdapter):
    """Real reward is all-or-nothing and nothing succeeds during the first ``silent_steps`` steps."""

    def __init__(self, silent_steps: int) -> None:
        super().__init__()
        self.silent_steps, self.calls = silent_steps, 0

    def collect(self, *args, **kwargs):
        self.calls += 1
        return super().collect(*args, **kwargs)

    def success(self, rollouts):
        share = super().success(rollouts)
        return np.zeros_like(share) if self.calls <= self.silent_steps else (share > 0.25).astype(float)


def test_warmup_waits_for_anchors_with_signal_instead_of_crashing(tmp_path):
    cfg = WMRLConfig.from_flat(mode="wmrl", steps=6, tasks_per_step=6, group_size=4, warmup_steps=1,
                               calibration_min_pairs_global=4, output_dir=str(tmp_path), tensorboard=False,
                               checkpoint_every=0, fusion_rule="eta2")
    torch.manual_seed(0)
    trainer = WMRLTrainer(cfg, StepPolicy(), SparseSuccessAdapter(silent_steps=2))
    history = trainer.train(progress=False)
    extended = [h.get("fusion/warmup_extended", 0.0) for h in history]
    assert extended[:2] == [1.0, 1.0]  # tied anchors: c not measured, weight stays 1
    assert all(h["fusion/w_anchor"] == 1.0 for h in history[:2])
    assert trainer.c is not None and np.isfinite(trainer.c)  # measured once successes appeared
    assert trainer._warmup_samples == []


def test_a_libero_collection_charges_the_fusion_in_its_span_once():
    from trainers.families.libero import LiberoAdapter  # the LIBERO family: only this test needs it

    core = ScoringCore(HashSchedule(), Calibrator())
    core.fuse([])  # the episodes' fusion, inside the span the adapter measured
    results = [ScoreResult("t", "world_model", wm_score_raw=0.5,
                           cost={"simulation_cpu_s": 1.0, "simulation_s": 1.0, "world_model_s": 0.25,
                                 "simulation_steps": 10}) for _ in range(4)]
    rollouts = [Rollout("t", 0, {"result": r}, torch.zeros(1), torch.zeros(1)) for r in results]
    ledger = ComputeLedger()
    LiberoAdapter._charge(rollouts, 20.0, 20.0, ledger, core)
    totals = ledger.totals
    assert totals["world_model"].cpu_s > 1.0 and totals["world_model"].count == 4  # the episodes' 1.0, and fusion
    assert totals["simulation"].cpu_s + totals["world_model"].cpu_s + totals["generation"].cpu_s == pytest.approx(20.0)
    assert core.take_fusion_time() == (0.0, 0.0)  # taken: the trainer's own take cannot charge it again
