"""The LIBERO-Long settings of simulation workers and shaped rewards, from the config to the adapter."""

from __future__ import annotations

import pytest

from trainers.families import get_family
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.errors import ConfigError

LIBERO = "wmrl/LIBERO-Long-v0"


def test_the_reward_and_worker_settings_are_checked():
    def config(**kw):
        base = {"env_id": LIBERO, "policy": "vla", "steps": 3, "warmup_steps": 1}
        return WMRLConfig.from_flat(**{**base, **kw})

    assert config(wm_reward="shaped", sim_workers=4).family.sim_workers == 4
    assert config(mode="world_model", wm_reward="shaped").family.wm_reward == "shaped"
    with pytest.raises(ConfigError, match="wm_reward must be one of"):
        config(wm_reward="dense")
    with pytest.raises(ConfigError, match="sim_workers must be >= 1"):
        config(sim_workers=0)
    with pytest.raises(ConfigError, match="sim_timeout_s must be > 0"):
        config(sim_timeout_s=0)
    with pytest.raises(ConfigError, match="mode 'real' has none"):
        config(mode="real", wm_reward="shaped")
    with pytest.raises(ConfigError, match="runs no simulator"):
        WMRLConfig.from_flat(env_id="wmrl/MLEDojo-v0", sim_workers=2)
    with pytest.raises(ConfigError, match="runs no simulator"):
        WMRLConfig.from_flat(env_id="wmrl/MLEDojo-v0", wm_reward="shaped")
    with pytest.raises(ConfigError, match="runs no simulator"):
        WMRLConfig.from_flat(env_id="wmrl/MLEDojo-v0", sim_timeout_s=60)


def test_the_adapter_takes_the_settings_and_builds_no_pool_before_an_update():
    config = WMRLConfig.from_flat(env_id=LIBERO, policy="vla", steps=3, warmup_steps=1, wm_reward="shaped",
                                  sim_workers=3, executor="ray", sim_timeout_s=120)
    adapter = get_family(LIBERO).make_adapter(config)
    assert (adapter.sim_workers, adapter.executor, adapter.wm_reward) == (3, "ray", "shaped")
    assert adapter.sim_timeout_s == 120
    assert adapter.pooled and adapter.pool is None  # Ray is only needed once episodes run
    plain = get_family(LIBERO).make_adapter(WMRLConfig.from_flat(env_id=LIBERO, policy="vla", steps=3,
                                                                 warmup_steps=1))
    assert not plain.pooled  # one worker, truncated episodes: this process, as before


def test_a_lost_episode_is_charged_as_simulation_what_its_worker_spent_on_it():
    from types import SimpleNamespace

    from trainers.families.libero_pool import _scored_episode
    from wmrl_envs.libero.workers import JobResult

    job = SimpleNamespace(task_index=2, init_state=7, group_id=("g", 1))
    lost = JobResult(cpu_s=1.5, wall_s=2.0, infra_failure=True, error="stopped; infrastructure failure (not a score)")
    rollout, sample = _scored_episode(job, lost, "anchor")
    assert sample.infra_failure and sample.error == lost.error and rollout.meta["infra_failure"]
    assert (sample.cost["simulation_cpu_s"], sample.cost["simulation_s"], sample.cost["simulation_steps"]) == (1.5, 2.0, 0)
