"""The scoring core on synthetic groups: schedules, fusion of raw scores into rewards, weights, state."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import (
    ConstantSchedule,
    FusionConfig,
    HashSchedule,
    ScoredGroup,
    ScoreResult,
    ScoringCore,
    StepSchedule,
    bounded,
    env_core,
    shared_calibrator,
)
from wmrl_envs.scoring.schedule import anchor_steps


def group(stream: str, gid, real=None, wm=None, task="t", infra=()) -> ScoredGroup:
    n = len(real if real is not None else wm)
    samples = [ScoreResult(task, stream, real_score=None if real is None else real[i],
                           wm_score_raw=None if wm is None else wm[i], valid=None if real is None else True,
                           infra_failure=i in infra) for i in range(n)]
    return ScoredGroup(task, gid, stream, samples)


# --- schedules ------------------------------------------------------------------------------------------


def test_hash_schedule_is_deterministic_per_group_and_near_its_fraction():
    schedule = HashSchedule(anchor_fraction=0.1, seed=3)
    streams = [schedule.stream(g) for g in range(5000)]
    assert streams == [HashSchedule(0.1, 3).stream(g) for g in range(5000)]
    assert 0.08 < streams.count("anchor") / 5000 < 0.12
    assert schedule.stream((7, "uid-9")) == schedule.stream((7, "uid-9"))  # any hashable id
    assert [HashSchedule(0.1, 4).stream(g) for g in range(200)] != streams[:200]


def test_step_schedule_gives_each_step_its_anchor_count_and_answers_by_group_id():
    schedule = StepSchedule(groups_per_step=8, anchor_fraction=0.1, seed=0, warmup_steps=2,
                            warmup_anchor_fraction=0.5, min_anchor_groups=0)
    assert schedule.streams(0).count("anchor") == 4 and schedule.streams(1).count("anchor") == 4
    counts = [schedule.streams(s).count("anchor") for s in range(2, 60)]
    assert set(counts) == {0, 1}  # 0.8 groups a step: a count rounds down or up ...
    running = np.cumsum(counts)  # ... so that the run executes its share, within one group at every step
    assert np.all(np.abs(running - 0.8 * np.arange(1, len(counts) + 1)) < 1.0)
    assert [schedule.anchor_count(s) for s in range(2, 60)] == counts
    at_least_one = StepSchedule(groups_per_step=8, anchor_fraction=0.1, seed=0, min_anchor_groups=1)
    assert all(at_least_one.streams(s).count("anchor") == 1 for s in range(30))
    integral = StepSchedule(groups_per_step=8, anchor_fraction=0.25, seed=5)
    assert all(integral.anchor_count(s) == 2 for s in range(30))  # a whole number of groups every step
    for step in (0, 5, 11):
        assert [schedule.stream(g) for g in schedule.group_ids(step)] == schedule.streams(step)
    assert schedule.group_ids(3) == list(range(24, 32))
    with pytest.raises(ConfigError):
        schedule.stream("not-a-step-group")
    with pytest.raises(ConfigError):
        StepSchedule(groups_per_step=4, anchor_fraction=0.0)


def test_a_step_schedule_with_anchor_steps_has_none_from_there_and_the_same_before():
    every = StepSchedule(groups_per_step=8, anchor_fraction=0.1, seed=2, warmup_steps=2, warmup_anchor_fraction=0.5)
    first_20 = StepSchedule(groups_per_step=8, anchor_fraction=0.1, seed=2, warmup_steps=2,
                            warmup_anchor_fraction=0.5, anchor_steps=20)
    assert [first_20.streams(s) for s in range(20)] == [every.streams(s) for s in range(20)]
    assert all(first_20.anchor_count(s) == 0 and "anchor" not in first_20.streams(s) for s in range(20, 30))
    assert all(every.anchor_count(s) >= 1 for s in range(20, 30))
    with pytest.raises(ConfigError, match="anchor_steps"):
        StepSchedule(groups_per_step=8, anchor_steps=0)


def test_anchor_steps_is_the_run_less_its_bound_under_skip_and_every_step_under_land():
    assert anchor_steps(24, 8, "skip") == 16
    assert anchor_steps(24, 8, "land") is None and anchor_steps(24, 0, "land") is None
    assert anchor_steps(24, 0, "skip") is None  # synchronous anchors: no step to skip
    with pytest.raises(ConfigError, match="leaves none of the 8 steps"):
        anchor_steps(8, 8, "skip")
    with pytest.raises(ConfigError, match="final_anchors must be one of"):
        anchor_steps(24, 8, "drop")


def test_constant_schedule_names_one_stream():
    assert ConstantSchedule("real").stream(12) == "real"
    assert ScoringCore(ConstantSchedule("world_model"), Calibrator()).reward == "world_model"
    assert ScoringCore(HashSchedule(), Calibrator()).reward == "fused"
    with pytest.raises(ConfigError):
        ConstantSchedule("anchor")


# --- reward modes ---------------------------------------------------------------------------------------


def test_env_core_gives_each_reward_mode_its_schedule_and_calibrator():
    asked = []

    def key() -> str:
        asked.append(True)
        return "test-suite/test-model"

    real = env_core("real", key)
    assert real.reward == "real" and real.calibrator.shared_key is None and not asked  # the key is never asked for
    assert env_core("real", key).calibrator is not real.calibrator
    world_model = env_core("world_model", key, debias=False)
    assert world_model.reward == "world_model" and not world_model.debias
    assert world_model.calibrator is shared_calibrator("test-suite/test-model")
    fused = env_core("fused", key, anchor_fraction=0.5, anchor_seed=3, fusion=FusionConfig(w_max=2.0))
    assert fused.schedule == HashSchedule(0.5, 3) and fused.fusion.w_max == 2.0
    schedule, own = StepSchedule(groups_per_step=4), Calibrator()
    injected = env_core("fused", key, schedule=schedule, calibrator=own)
    assert injected.schedule is schedule and injected.calibrator is own


@pytest.mark.parametrize("reward, kwargs, message", [
    ("exact", {}, "reward must be one of"),
    ("real", {"schedule": HashSchedule()}, "needs reward='fused'"),
])
def test_env_core_rejects_an_unknown_mode_and_a_schedule_without_fused(reward, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        env_core(reward, lambda: "unused", **kwargs)


# --- fuse -----------------------------------------------------------------------------------------------


def test_fuse_adds_a_batchs_anchor_pairs_before_calibrating_its_world_model_groups():
    calibrator = Calibrator(CalibratorConfig(min_pairs_global=4))
    core = ScoringCore(HashSchedule(), calibrator, FusionConfig(rule="eta2", c=2.0))
    # The world model reads every score 0.3 too low: the anchors teach the map that.
    wm = np.linspace(0.05, 0.65, 12)
    anchor = group("anchor", 1, real=list(wm + 0.3), wm=list(wm))
    world = group("world_model", 2, wm=[0.15, 0.55])
    core.fuse([world, anchor])  # the order of the list does not matter within one call
    assert calibrator.n_pairs == 12
    assert anchor.rewards.tolist() == pytest.approx(wm + 0.3)  # anchors are rewarded with real scores
    assert world.rewards.tolist() == pytest.approx([0.45, 0.85], abs=0.03)  # calibrated upwards, not raw
    assert world.rewards.tolist() == [s.wm_score_calibrated for s in world.samples]
    # An anchor's calibrated score is out of sample: the map before its own pairs (identity then).
    assert [s.wm_score_calibrated for s in anchor.samples] == pytest.approx(wm)
    weight = core.anchor_weight()
    assert weight == pytest.approx(min(1 + 2.0 * calibrator.eta2, 4.0)) and weight >= 1
    assert {s.fusion_weight for s in anchor.samples} == {weight} and {s.fusion_weight for s in world.samples} == {1.0}


def test_infra_failures_get_no_reward_and_never_reach_the_calibrator():
    calibrator = Calibrator(CalibratorConfig(min_pairs_global=2))
    core = ScoringCore(HashSchedule(), calibrator)
    anchor = group("anchor", 1, real=[0.4, 0.9, 0.7], wm=[0.3, 0.8, 0.5], infra=(2,))
    world = group("world_model", 2, wm=[0.3, math.nan], infra=(1,))
    core.fuse([anchor, world])
    assert calibrator.n_pairs == 2
    assert math.isnan(anchor.rewards[2]) and math.isnan(world.rewards[1]) and np.isfinite(world.rewards[0])


def test_anchor_strata_reach_the_calibrators_audit_aligned_with_their_pairs():
    calibrator = Calibrator(CalibratorConfig(min_pairs_global=2, min_stratum_pairs=2))
    core = ScoringCore(HashSchedule(), calibrator)
    anchor = group("anchor", 1, real=[0.1, 0.2, 0.3, 0.4], wm=[0.6, 0.7, 0.3, 0.4], infra=(3,))
    for sample, family in zip(anchor.samples, ["knn", "knn", "linear", "linear"]):
        sample.stratum = family
    assert anchor.pair_strata == ["knn", "knn", "linear"]  # the infrastructure failure has no pair
    core.fuse([anchor])
    assert calibrator.state_dict()["strata"] == ["knn", "knn", "linear"]
    assert set(calibrator.audit().stratum_bias) == {"knn"}  # linear has one pair, below the minimum


def test_no_debias_gives_raw_scores_clipped_and_no_denoise_weight_one():
    calibrator = Calibrator(CalibratorConfig(min_pairs_global=2))
    raw = ScoringCore(HashSchedule(), calibrator, FusionConfig("eta2", c=3.0), debias=False, denoise=False)
    anchor = group("anchor", 1, real=[0.2, 0.9], wm=[0.6, 0.1])
    world = group("world_model", 2, wm=[0.25, 1.4])
    raw.fuse([anchor, world])
    assert world.rewards.tolist() == [0.25, 1.0] and raw.anchor_weight() == 1.0


def test_c_is_the_first_inverse_residual_unless_measured_or_configured():
    def core(**kwargs):
        c = ScoringCore(HashSchedule(), Calibrator(CalibratorConfig(min_pairs_global=2)), **kwargs)
        c.fuse([group("anchor", 1, real=[0.2, 0.9, 0.5], wm=[0.6, 0.1, 0.5])])
        return c

    default = core()
    assert default.anchor_weight() == 1.0  # the default rule, none: anchors weigh as much as world-model samples
    paper = core(fusion=FusionConfig(rule="eta2"))
    assert paper.anchor_weight() == pytest.approx(2.0) and paper.c == pytest.approx(1 / paper.calibrator.eta2)
    waiting = core(fusion=FusionConfig(rule="eta2"), measure_c=True)
    assert waiting.anchor_weight() == 1.0 and waiting.c is None  # the trainer measures c in warmup
    fixed = core(fusion=FusionConfig(rule="eta2", c=0.5, w_max=1.5))
    assert fixed.anchor_weight() == pytest.approx(min(1 + 0.5 * fixed.calibrator.eta2, 1.5))


def test_a_few_pairs_give_weight_one():
    core = ScoringCore(HashSchedule(), Calibrator(CalibratorConfig(min_pairs_global=20)), FusionConfig(rule="eta2", c=9.0))
    core.fuse([group("anchor", 1, real=[0.0, 1.0], wm=[1.0, 0.0])])
    assert core.anchor_weight() == 1.0


# --- state ----------------------------------------------------------------------------------------------


def test_state_round_trips_and_a_shared_calibrator_does_not_travel_by_copy():
    own = ScoringCore(HashSchedule(0.5, 1), Calibrator(CalibratorConfig(min_pairs_global=2)))
    own.fuse([group("anchor", 1, real=[0.2, 0.9, 0.4], wm=[0.3, 0.8, 0.1])])
    again = ScoringCore(HashSchedule(0.5, 1), Calibrator())
    again.load_state_dict(own.state_dict())
    assert again.calibrator.state_dict() == own.calibrator.state_dict() and again.c == own.c
    assert pickle.loads(pickle.dumps(own)).calibrator.n_pairs == 3

    shared = ScoringCore(HashSchedule(), shared_calibrator("test/scoring"))
    copy = pickle.loads(pickle.dumps(shared))
    assert copy.calibrator is shared_calibrator("test/scoring")  # this process's one, not a copy


def test_messages_are_bounded_and_keep_both_ends():
    text = "missing column 'x'; " + "y" * 100_000 + " (the end)"
    cut = bounded(text, 500)
    assert len(cut) <= 500 and cut.startswith("missing column 'x'") and cut.endswith("(the end)")
    assert "characters left out" in cut and bounded("short") == "short"
    assert len(ScoreResult("t", "real", error=text).error) <= 1_000


def test_a_step_anchors_at_least_min_anchor_groups():
    schedule = StepSchedule(groups_per_step=8, anchor_fraction=0.1, seed=1, min_anchor_groups=2)
    assert all(schedule.streams(step).count("anchor") == 2 for step in range(20))
    assert StepSchedule(8, 0.5, min_anchor_groups=2).streams(0).count("anchor") == 4  # the share, when larger
    with pytest.raises(ConfigError, match="min_anchor_groups"):
        StepSchedule(8, 0.1, min_anchor_groups=9)
