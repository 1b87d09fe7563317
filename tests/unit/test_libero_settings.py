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
    with pytest.raises(ConfigError, match="mode 'real' has none"):
        config(mode="real", wm_reward="shaped")
    with pytest.raises(ConfigError, match="runs no simulator"):
        WMRLConfig.from_flat(env_id="wmrl/MLEDojo-v0", sim_workers=2)
    with pytest.raises(ConfigError, match="runs no simulator"):
        WMRLConfig.from_flat(env_id="wmrl/MLEDojo-v0", wm_reward="shaped")


def test_the_adapter_takes_the_settings_and_builds_no_pool_before_an_update():
    config = WMRLConfig.from_flat(env_id=LIBERO, policy="vla", steps=3, warmup_steps=1, wm_reward="shaped",
                                  sim_workers=3, executor="ray")
    adapter = get_family(LIBERO).make_adapter(config)
    assert (adapter.sim_workers, adapter.executor, adapter.wm_reward) == (3, "ray", "shaped")
    assert adapter.pooled and adapter.pool is None  # Ray is only needed once episodes run
    plain = get_family(LIBERO).make_adapter(WMRLConfig.from_flat(env_id=LIBERO, policy="vla", steps=3,
                                                                 warmup_steps=1))
    assert not plain.pooled  # one worker, truncated episodes: this process, as before
