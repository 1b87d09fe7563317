"""WMRL environments.

Importing this package registers every environment id with Gymnasium using string entry
points, so nothing heavy is imported until an environment is made::

    import gymnasium as gym
    import wmrl_envs  # noqa: F401  (registers the ids)
    env = gym.make("wmrl/MLEDojo-v0", reward="real")
"""

from gymnasium.envs.registration import register, registry

__version__ = "0.1.0"

_ENVS = {
    "wmrl/MLEDojo-v0": "wmrl_envs.mle:MLEDojoEnv",
    "wmrl/DSBench-v0": "wmrl_envs.dsbench:DSBenchEnv",
    "wmrl/LIBERO-Long-v0": "wmrl_envs.libero.env:LiberoLongEnv",
}

for _env_id, _entry_point in _ENVS.items():
    if _env_id not in registry:
        register(id=_env_id, entry_point=_entry_point)

ENV_IDS: tuple[str, ...] = tuple(_ENVS)
