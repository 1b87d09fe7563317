"""What the hub integrations share: one scoring core for every episode of a process.

``wmrl serve`` (OpenEnv, :mod:`wmrl_envs.integrations.openenv`) and the verifiers environment
(:mod:`wmrl_envs.integrations.verifiers`) run many episodes of a text code env at once, each with
an env of its own (its task, group, turn) and all with **one** :class:`SharedScoringCore`: one
calibrator that every episode's anchors feed and every world-model score is calibrated by, one
world model loaded once, one sandbox pool. :meth:`SharedScoringCore.fuse` runs under a lock, so
the rewards equal those of one in-process env fed the same steps in the order of their fuses.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

from wmrl_envs.errors import ConfigError
from wmrl_envs.mle import MLEDojoEnv
from wmrl_envs.scoring import ScoredGroup, ScoringCore

DEFAULT_ENV = "wmrl/MLEDojo-v0"


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: numpy scalars as Python numbers, NaN and infinities as None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class SharedScoringCore(ScoringCore):
    """A :class:`ScoringCore` that the episodes of one process share across threads.

    :meth:`fuse` runs under a lock: every step's calibration, anchor pairs and anchor weight form
    one indivisible update, so concurrent steps equal some serial order of them (the order of
    their fuses). Raw scoring (world model, sandbox) stays concurrent.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fuse_lock = threading.Lock()
        self._fused = threading.local()

    @classmethod
    def of(cls, core: ScoringCore) -> SharedScoringCore:
        """A shared core with ``core``'s schedule, calibrator, fusion settings, ``c`` and scorer."""
        shared = cls(core.schedule, core.calibrator, core.fusion, debias=core.debias, denoise=core.denoise,
                     measure_c=core.measure_c, scorer=core.scorer)
        shared.c = core.c
        return shared

    def fuse(self, groups: Sequence[ScoredGroup]) -> list[ScoredGroup]:
        with self._fuse_lock:
            out = super().fuse(groups)
            self._fused.pairs = self.calibrator.n_pairs
        return out

    def take_fused_pairs(self) -> int | None:
        """The calibrator's pair count right after this thread's last fuse (None: no fuse since
        the last call). A step fuses in its caller's thread, so this is that step's count."""
        pairs, self._fused.pairs = getattr(self._fused, "pairs", None), None
        return pairs


def code_env_class(env_id: str) -> type[MLEDojoEnv]:
    try:
        entry_point = gym.spec(env_id).entry_point
    except gym.error.Error as exc:
        raise ConfigError(f"unknown env id {env_id!r}: {exc}") from exc
    env_cls = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    if not (isinstance(env_cls, type) and issubclass(env_cls, MLEDojoEnv)):
        raise ConfigError(f"only the text code envs (wmrl/MLEDojo-v0, wmrl/DSBench-v0) are shared this way, not "
                          f"{env_id!r}: an env whose action is a control vector per step is not served")
    return env_cls


@dataclass
class SharedEnvs:
    """What every episode of one process shares: the env class, its options and one scoring core.

    Build it with :meth:`build`, make each episode's env with :meth:`make_env`, and :meth:`close`
    it once, when the last episode is over.
    """

    env_id: str
    env_cls: type[MLEDojoEnv]
    options: dict[str, Any]
    core: SharedScoringCore

    @classmethod
    def build(cls, env_id: str = DEFAULT_ENV, *, reward: str = "fused", split: str = "train",
              task_ids: Sequence[str] | None = None, max_turns: int = 1, **scoring: Any) -> SharedEnvs:
        """Make the env once (every option of :class:`~wmrl_envs.mle.MLEDojoEnv` applies) and share its core.

        ``scoring`` holds the env's scoring options (``executor``, ``workers``, ``world_model``,
        ``anchor_fraction``, ``anchor_seed``, ``calibrator``, ``c``, ...). Without a
        ``calibrator`` the core takes the env's default, the process-wide one of
        ``"<suite>/<world model>"``: in a server process, the server's own.
        """
        env_cls = code_env_class(env_id)
        template = env_cls(reward=reward, split=split, task_ids=task_ids, max_turns=max_turns, **scoring)
        core = SharedScoringCore.of(template.core)
        if core.reward != "real":
            # Load the world model now: the first sessions would otherwise race to build it.
            _ = core.scorer.world_model
        options = {"reward": reward, "split": split, "task_ids": list(template.task_ids), "max_turns": max_turns}
        return cls(env_id, env_cls, options, core)

    def make_env(self) -> MLEDojoEnv:
        """An episode's env: its own episode state, the shared core."""
        return self.env_cls(core=self.core, **self.options)

    def calibrator_report(self) -> dict[str, Any]:
        """The shared calibrator's pairs (in the order they entered), η̂² and the anchor weight's ``c``."""
        calibrator = self.core.calibrator
        state = calibrator.state_dict()
        return jsonable({"env_id": self.env_id, "reward": self.options["reward"],
                         "n_pairs": len(state["wm_scores"]), "eta2": calibrator.eta2, "c": self.core.c,
                         "wm_scores": state["wm_scores"], "real_scores": state["real_scores"],
                         "task_ids": state["task_ids"]})

    def close(self) -> None:
        """Stop the shared sandbox pool (episodes never close the core; their owner does, once)."""
        self.core.close()
