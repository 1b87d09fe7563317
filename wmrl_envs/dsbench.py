"""``wmrl/DSBench-v0``: DSBench-style data-modeling tasks scored by the relative performance gap.

The environment is :class:`~wmrl_envs.mle.MLEDojoEnv` over the ``dsbench`` suite: the same
text observations and actions, sandbox, reward sources and ``info`` keys. What differs is the
reward quantity, which every DSBench task declares in its spec (``meta.reward: rpg``)::

    RPG = max(0, (p - b) / (g - b))

with ``p`` the submission's metric value, ``g`` the answers graded against themselves and ``b``
the trivial baseline's score (both recorded per task). ``info["rpg"]`` is the executed
submission's RPG (0 for an invalid one), ``None`` when the script was only world-model scored
and, like every test score, hidden mid-episode on held-out tasks.

Episodes are one-shot by default (``max_turns=1``, as DSBench runs its agents); pass
``max_turns=N`` for a multi-turn episode whose reward is the last valid submission's RPG.
World-model and fused rewards predict RPG and use their own shared calibrator
(``dsbench/<world model>``), so anchor pairs of the two suites never mix.
"""

from __future__ import annotations

from wmrl_envs.mle import MLEDojoEnv


class DSBenchEnv(MLEDojoEnv):
    """Text environment over the DSBench suite; arguments as :class:`~wmrl_envs.mle.MLEDojoEnv`."""

    suite = "dsbench"
    env_id = "wmrl/DSBench-v0"

    def step(self, action: str):
        obs, reward, terminated, truncated, info = super().step(action)
        # The real score of a DSBench task is its RPG; reusing it keeps the held-out masking.
        info["rpg"] = info["real_score"]
        return obs, reward, terminated, truncated, info
