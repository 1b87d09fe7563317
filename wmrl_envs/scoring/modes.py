"""Env reward modes: what ``gym.make(..., reward=...)`` accepts, and the scoring core each one gets.

Every env family (MLE-Dojo, DSBench, LIBERO) builds its core here, so one reward mode means
the same schedule and the same calibrator in each of them:

* ``"real"``: every group executed (:class:`ConstantSchedule` ``"real"``);
* ``"world_model"``: every group scored by the world model (:class:`ConstantSchedule`
  ``"world_model"``);
* ``"fused"``: the hash schedule of the group id, or an injected one (a trainer's).
"""

from __future__ import annotations

from collections.abc import Callable

from wmrl_envs.calibration import Calibrator
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring.calibrators import shared_calibrator
from wmrl_envs.scoring.core import GroupScorer, ScoringCore
from wmrl_envs.scoring.fusion import FusionConfig
from wmrl_envs.scoring.schedule import AnchorSchedule, ConstantSchedule, HashSchedule

REWARD_MODES: tuple[str, ...] = ("real", "world_model", "fused")


def check_reward_mode(reward: str, *, schedule: AnchorSchedule | None = None,
                      core: ScoringCore | None = None) -> None:
    """Raise :class:`ConfigError` unless ``reward`` is a mode, a ``schedule`` comes only with
    ``"fused"``, and a given ``core`` serves ``reward``."""
    if reward not in REWARD_MODES:
        raise ConfigError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
    if schedule is not None and reward != "fused":
        raise ConfigError(f"an anchor schedule needs reward='fused', not {reward!r}")
    if core is not None and core.reward != reward:
        raise ConfigError(f"the given core serves reward={core.reward!r}, not {reward!r}")


def env_core(reward: str, shared_key: Callable[[], str], *, scorer: GroupScorer | None = None,
             schedule: AnchorSchedule | None = None, calibrator: Calibrator | None = None,
             anchor_fraction: float = 0.1, anchor_seed: int = 0, fusion: FusionConfig | None = None,
             debias: bool = True) -> ScoringCore:
    """The scoring core of an env made with ``reward`` (and no core of its own).

    Args:
        reward: One of :data:`REWARD_MODES`.
        shared_key: The env's process-wide calibrator key (``"<suite>/<world model>"``);
            called only when that calibrator is used, since naming the world model may load it.
        scorer: Produces raw scores (None for a family whose episodes call ``fuse``).
        schedule: ``fused`` only: the anchor schedule (default the hash schedule of
            ``anchor_fraction`` and ``anchor_seed``).
        calibrator: The calibrator to use instead of the default.
        anchor_fraction, anchor_seed: The default hash schedule's share and seed.
        fusion: ``w_max`` and ``c`` of the anchor weight.
        debias: Reward world-model samples with calibrated scores (False: raw, clipped).

    The default calibrator of ``world_model`` and ``fused`` is the process-wide one of
    ``shared_key()``, so every env of that suite and world model pools its anchors. A ``real``
    env gets a private, empty one: it has no world-model score to calibrate and no anchor
    pair to give, so the shared one would only cost it the world model's loading (LIBERO names
    its calibrator after the success model) and report other envs' pairs in its metrics.
    """
    check_reward_mode(reward, schedule=schedule)
    if reward == "fused":
        schedule = schedule or HashSchedule(anchor_fraction, anchor_seed)
    else:
        schedule = ConstantSchedule(reward)
    if calibrator is None:
        calibrator = Calibrator() if reward == "real" else shared_calibrator(shared_key())
    return ScoringCore(schedule, calibrator, fusion, debias=debias, scorer=scorer)
