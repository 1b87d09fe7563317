"""Asynchronous anchors (issue 47) on real tasks in the real sandbox: the core answers world-model
groups at once and lands anchor groups later; a stuck run times out as an infrastructure failure;
the trainer trains stale anchors within its bound, and a run killed with anchors in flight resumes
without losing or repeating any."""

from __future__ import annotations

import csv
import time
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

import wmrl_envs  # noqa: F401  (registers the ids)
from trainers.families import get_family
from trainers.policies import make_policy
from trainers.wmrl import WMRLTrainer, make_core
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import CodeGroup, CodeScorer, HashSchedule, ScoringCore
from wmrl_envs.tasks import get_task

SCRIPT = """\
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
model = LogisticRegression(max_iter=300).fit(train[["weight"]], train["dead"] == "dead")
pd.DataFrame({"id": test["id"], "dead": model.predict_proba(test[["weight"]])[:, 1]}).to_csv("submission.csv", index=False)
"""
STUCK = "import time\ntime.sleep(10)\n"


@pytest.fixture(scope="module")
def task():
    return get_task("car-crash-fatality")


def test_the_core_answers_world_model_groups_at_once_and_lands_anchors_later(task):
    core = ScoringCore(HashSchedule(anchor_fraction=0.5, seed=0), Calibrator(), scorer=CodeScorer("surrogate", workers=2))
    batch = [CodeGroup(task, [SCRIPT, SCRIPT], g) for g in range(6)]
    try:
        now, flight = core.score_async(batch, tag=7)
        streams = [core.schedule.stream(g) for g in range(6)]
        assert [g.group_id for g in now] == [g for g in range(6) if streams[g] == "world_model"]
        assert all(np.isfinite(g.rewards).all() and not any(s.executed for s in g.samples) for g in now)
        assert flight.tag == 7 and [g.group_id for g in flight.scored] == [g for g in range(6) if streams[g] == "anchor"]
        assert core.calibrator.n_pairs == 0  # nothing landed: nothing calibrates
        landed = core.land(flight, wait=True)
        assert [g.group_id for g in landed] == [g.group_id for g in flight.scored]
        assert all(s.executed and s.real_score is not None and s.wm_score_raw is not None
                   for g in landed for s in g.samples)
        assert core.calibrator.n_pairs == 2 * len(landed)
        assert core.land(flight) == landed  # a landed batch has nothing left to run
    finally:
        core.close()


def test_a_stuck_anchor_is_an_infrastructure_failure_at_its_timeout(task):
    core = ScoringCore(HashSchedule(anchor_fraction=1.0), Calibrator(), scorer=CodeScorer("surrogate", workers=2))
    try:
        _, fine = core.score_async([CodeGroup(task, [SCRIPT], 0)])
        _, stuck = core.score_async([CodeGroup(task, [STUCK], 1)], timeout_s=1.0)
        (fine_group,) = core.land(fine, wait=True)
        start = time.monotonic()
        (stuck_group,) = core.land(stuck, wait=True)
        waited = time.monotonic() - start
    finally:
        core.close()
    assert waited < 8.0  # the timeout, not the script's 10 s sleep, ended the wait
    (ran,), (timed_out,) = fine_group.samples, stuck_group.samples
    assert ran.executed and not ran.infra_failure and np.isfinite(ran.score)
    assert timed_out.infra_failure and np.isnan(timed_out.score) and "did not return within 1 s" in timed_out.error
    assert core.calibrator.n_pairs == 1  # an infrastructure failure is not a pair


def async_config(tmp_path, steps: int, **overrides) -> WMRLConfig:
    return WMRLConfig.from_flat(mode=overrides.pop("mode", "wmrl"), steps=steps, tasks_per_step=4, group_size=2,
                                anchor_fraction=0.5, max_staleness=overrides.pop("max_staleness", 2), seed=3,
                                task_ids=["breast-cancer-diagnosis", "biopsy-malignancy"], workers=2,
                                output_dir=str(tmp_path / "run"), tensorboard=False, checkpoint_every=0, **overrides)


def trainer_for(config: WMRLConfig) -> WMRLTrainer:
    return WMRLTrainer(config, make_policy("grammar", seed=config.seed), get_family(config.family.env_id)
                       .make_adapter(config))


def anchor_rows(tmp_path) -> list[dict]:
    with (tmp_path / "run" / "anchors.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_run_killed_with_anchors_in_flight_resumes_without_losing_or_repeating_any(tmp_path):
    config = async_config(tmp_path, steps=4)
    first = trainer_for(config)
    try:
        first.train_step()
        first.train_step()
        assert first._in_flight, "the last step's anchors should still be running when it returns"
        first.save_checkpoint()
        for pending in first._in_flight:  # let them finish, so that the next step lands and logs them ...
            first.core.scorer.land(pending.flight, wait=True)
        first.train_step()
        assert any(int(r["landed_step"]) == 2 for r in anchor_rows(tmp_path))
        # ... and the process dies before its next checkpoint: the resumed run lands them again.
    finally:
        first.adapter.close()
        first.core.close()  # the kill: runs in flight are abandoned with the process's pools
    resumed = trainer_for(config)
    try:
        assert resumed.resume() and resumed.step == 2 and resumed._in_flight
        history = resumed.train(progress=False)
    finally:
        resumed.adapter.close()
        resumed.core.close()
    assert not resumed._in_flight  # the last step waits for every run
    scheduled = {g for step in range(4) for g, stream in zip(*resumed.schedule(step)[1:]) if stream == "anchor"}
    rows = anchor_rows(tmp_path)
    per_group = Counter(int(r["group_id"]) for r in rows)
    assert set(per_group) == scheduled and set(per_group.values()) == {2}  # every anchor once, none twice
    # Every batch lands exactly 2 steps after its step (the bound), the last step landing the rest,
    # whenever its runs returned: the run does not depend on the machine's timing.
    assert {(int(r["step"]), int(r["landed_step"])) for r in rows} == {(0, 2), (1, 3), (2, 3), (3, 3)}
    assert resumed.calibrator.n_pairs == len(rows)
    staleness = [h["anchors/staleness_max"] for h in history if np.isfinite(h["anchors/staleness_max"])]
    assert staleness and max(staleness) <= 2


def test_skipped_final_anchors_leave_the_last_steps_unanchored_and_the_rest_as_landing_would(tmp_path):
    """``final_anchors='skip'``: the last ``max_staleness`` steps choose no anchors (their groups are
    world-model groups), every earlier anchor lands exactly ``max_staleness`` steps late, so the last
    step waits for no younger batch; the earlier steps' streams are those of ``'land'``."""
    landing, skipping = async_config(tmp_path / "land", steps=5), async_config(tmp_path, steps=5, final_anchors="skip")
    trainer = trainer_for(skipping)
    try:
        assert [trainer.schedule(step)[2] for step in range(3)] == \
            [make_core(landing).streams(trainer.schedule(step)[1]) for step in range(3)]
        assert all(stream == "world_model" for step in (3, 4) for stream in trainer.schedule(step)[2])
        history = trainer.train(progress=False)
    finally:
        trainer.adapter.close()
        trainer.core.close()
    rows = anchor_rows(tmp_path)
    assert rows and {(int(r["step"]), int(r["landed_step"])) for r in rows} == {(0, 2), (1, 3), (2, 4)}
    assert history[-1]["anchors/staleness_max"] == 2 and history[-1]["anchors/in_flight"] == 0
    # Synchronous anchors have no step to skip: 'skip' at bound 0 is the synchronous run.
    assert make_core(async_config(tmp_path, steps=5, max_staleness=0, final_anchors="skip")).schedule.anchor_steps is None
    with pytest.raises(ConfigError, match="leaves none of the 3 steps"):
        async_config(tmp_path, steps=3, max_staleness=3, final_anchors="skip")
    with pytest.raises(ConfigError, match="final_anchors must be one of"):
        async_config(tmp_path, steps=5, final_anchors="drop")


def test_asynchronous_anchors_need_a_batch_scorer_and_an_anchored_mode(tmp_path):
    with pytest.raises(ConfigError, match="mode 'real' has none"):
        async_config(tmp_path, steps=2, mode="real")
    with pytest.raises(ConfigError, match="max_staleness must be an int"):
        async_config(tmp_path, steps=2, max_staleness=-1)
    with pytest.raises(ConfigError, match="score themselves"):
        WMRLConfig.from_flat(env_id="wmrl/LIBERO-Long-v0", policy="vla", steps=3, max_staleness=1)


def test_an_async_env_answers_anchor_steps_at_once_and_lands_the_real_rewards_a_blocking_env_gives(task):
    response = f"A logistic regression on the weight.\n```python\n{SCRIPT}```\n"
    options = dict(reward="fused", task_ids=[task.id], anchor_fraction=1.0, workers=2, fusion_rule="none")
    blocking = gym.make("wmrl/MLEDojo-v0", calibrator=Calibrator(), **options)
    asynchronous = gym.make("wmrl/MLEDojo-v0", calibrator=Calibrator(), async_anchors=True, **options)
    try:
        expected = []
        for group_id in (1, 2):
            blocking.reset(seed=0, options={"task_id": task.id, "group_id": group_id})
            expected.append(blocking.step(response)[1])
        provisional = []
        for group_id in (1, 2):
            asynchronous.reset(seed=0, options={"task_id": task.id, "group_id": group_id})
            _, reward, terminated, _, info = asynchronous.step(response)
            assert terminated and info["stream"] == "anchor" and info["pending"] and not info["executed"]
            provisional.append(reward)
        assert all(np.isfinite(provisional))  # a world-model reward now, the real one later
        landed = asynchronous.unwrapped.landed(wait=True)
        assert [a["group_id"] for a in landed] == [1, 2]  # oldest first
        assert [a["reward"] for a in landed] == expected and all(a["info"]["executed"] for a in landed)
        assert asynchronous.unwrapped.core.calibrator.n_pairs == blocking.unwrapped.core.calibrator.n_pairs == 2
        assert asynchronous.unwrapped.landed() == []
    finally:
        blocking.close()
        asynchronous.close()
    with pytest.raises(ConfigError, match="async_anchors"):
        gym.make("wmrl/MLEDojo-v0", reward="real", async_anchors=True)


def test_informed_anchors_fly_asynchronously_with_their_weights(tmp_path):
    config = async_config(tmp_path, steps=3, max_staleness=1, anchor_choice="informed")
    trainer = trainer_for(config)
    try:
        trainer.train(progress=False)
    finally:
        trainer.adapter.close()
        trainer.core.close()
    rows = anchor_rows(tmp_path)
    assert rows and all(0.0 < float(r["inclusion_probability"]) <= 1.0 for r in rows)
    assert trainer.calibrator.n_pairs == len(rows) and not trainer._in_flight
