"""World-model and fused reward sources (DESIGN §6-§8).

* :class:`WorldModelReward` scores scripts with a world model and, by default, maps the
  prediction through the shared calibrator (identity until it has enough anchor pairs).
* :class:`FusedReward` routes each *group* to one stream. Anchor groups (about 10%, chosen
  deterministically from the seed and the group id) are executed **and** world-model scored;
  their (world-model, real) pairs feed the calibrator that every env in the process shares.
  Other groups get the calibrated world-model score.

The anchor weight reported in ``fusion_weight`` is the inverse-variance weight
``clip(1 + c * eta2, 1, w_max)`` of :mod:`trainers`' fusion; until a trainer sets ``c`` from
its warmup measurement, ``c = 1 / eta2_cal`` with ``eta2_cal`` the first residual measured
once the calibrator has enough pairs (the paper's default).
"""

from __future__ import annotations

import hashlib
import math
import threading
from typing import Any, Sequence

import numpy as np

from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.rewards import RealReward, ScoreResult
from wmrl_envs.tasks.spec import Task

_SHARED: dict[str, Calibrator] = {}
_SHARED_LOCK = threading.Lock()


def shared_calibrator(key: str, config: CalibratorConfig | None = None) -> Calibrator:
    """The process-wide calibrator for ``key`` (one per suite and world model)."""
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Calibrator(config)
        return _SHARED[key]


def is_anchor_group(group_id: Any, anchor_fraction: float, seed: int) -> bool:
    """Deterministic anchor choice: a hash of (seed, group id) below ``anchor_fraction``."""
    digest = hashlib.sha256(f"{seed}:{group_id!r}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < anchor_fraction


class WorldModelReward:
    """Scores scripts with a world model, optionally through the shared calibrator.

    Args:
        world_model: A :class:`~wmrl_envs.world_models.WorldModel` or a registry name.
        calibrator: Calibrator to apply; default the process-wide one for ``calibrator_key``.
        calibrate: False gives the raw world-model score (the uncorrected baseline).
        calibrator_key: Which shared calibrator to use when none is given; default
            ``"<suite>/<world model name>"``.
        suite: The task suite scored (``mle``, ``dsbench``): suites reward different quantities
            (position score, RPG), so each gets its own shared calibrator.
        world_model_kwargs: Options for :func:`~wmrl_envs.world_models.make_world_model`.
    """

    name = "world_model"

    def __init__(self, world_model: Any = "surrogate", calibrator: Calibrator | None = None,
                 calibrate: bool = True, calibrator_key: str | None = None, suite: str = "mle",
                 world_model_kwargs: dict[str, Any] | None = None) -> None:
        self._world_model_spec = world_model
        self._world_model_kwargs = dict(world_model_kwargs or {})
        self._world_model = None if isinstance(world_model, str) else world_model
        self.calibrate = calibrate
        self.calibrator_key = calibrator_key or f"{suite}/{self.world_model_name}"
        self._calibrator = calibrator
        self._own_calibrator = calibrator is not None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if isinstance(self._world_model_spec, str):
            state["_world_model"] = None  # rebuilt lazily; model weights do not travel
        if not self._own_calibrator:
            state["_calibrator"] = None  # the new process's shared calibrator is fetched on use
        return state

    @property
    def world_model_name(self) -> str:
        spec = self._world_model_spec
        return spec if isinstance(spec, str) else getattr(spec, "name", type(spec).__name__)

    @property
    def world_model(self):
        if self._world_model is None:
            from wmrl_envs.world_models import make_world_model

            self._world_model = make_world_model(self._world_model_spec, **self._world_model_kwargs)
        return self._world_model

    @property
    def calibrator(self) -> Calibrator:
        if self._calibrator is None:
            self._calibrator = shared_calibrator(self.calibrator_key)
        return self._calibrator

    def predict(self, task: Task, scripts: Sequence[str | None]) -> list[ScoreResult]:
        """Raw and calibrated world-model scores; ``None`` scripts (no code) score 0."""
        results = [ScoreResult(task_id=task.id, stream="world_model",
                               error="no fenced ```python block found in the response") for _ in scripts]
        todo = [(i, s) for i, s in enumerate(scripts) if s is not None]
        if not todo:
            return results
        predictions = self.world_model.predict([task] * len(todo), [s for _, s in todo])
        raw = np.array([p.score for p in predictions], dtype=float)
        ok = np.isfinite(raw)
        calibrated = np.full_like(raw, np.nan)
        if ok.any():
            calibrated[ok] = (self.calibrator.calibrate(raw[ok], [task.id] * int(ok.sum()))
                              if self.calibrate else raw[ok])
        for (i, _), pred, r, c in zip(todo, predictions, raw, calibrated):
            res = results[i]
            # A parsed prediction may still carry the model's reason (e.g. "script does not parse").
            res.error = pred.error if pred.parsed else f"world model gave no score: {pred.error}"
            res.cost = {"execution_s": 0.0, "world_model_s": pred.cost_s}
            if not math.isfinite(r):
                # An unscorable prediction is not a score: treat it like an infra failure.
                res.infra_failure = True
                continue
            res.wm_score_raw, res.wm_score_calibrated = float(r), float(c)
            res.score, res.valid = float(c), True
        return results

    def score_group(self, task: Task, scripts: Sequence[str | None], group_id: Any = None) -> list[ScoreResult]:
        return self.predict(task, scripts)


class FusedReward:
    """Anchor groups executed and world-model scored; other groups world-model scored.

    Args:
        anchor_fraction: Expected share of anchor groups.
        seed: Seeds the anchor choice (with the group id).
        executor: Sandbox backend for anchors.
        workers: Parallel executions for anchors.
        w_max: Upper clip of the anchor fusion weight.
        c: Fusion constant; None uses ``1 / eta2_cal`` from the first calibrated residual.
        world_model, calibrator, calibrator_key, suite, world_model_kwargs: as :class:`WorldModelReward`.
    """

    name = "fused"

    def __init__(self, world_model: Any = "surrogate", anchor_fraction: float = 0.1, seed: int = 0,
                 executor: str = "bwrap", workers: int | None = None, w_max: float = 4.0,
                 c: float | None = None, calibrator: Calibrator | None = None,
                 calibrator_key: str | None = None, suite: str = "mle",
                 world_model_kwargs: dict[str, Any] | None = None) -> None:
        if not 0.0 < anchor_fraction <= 1.0:
            raise ConfigError(f"anchor_fraction must be in (0, 1], got {anchor_fraction}")
        if w_max < 1.0:
            raise ConfigError(f"w_max must be >= 1, got {w_max}")
        self.anchor_fraction = anchor_fraction
        self.seed = seed
        self.w_max = w_max
        self.c = c
        self.real = RealReward(executor=executor, workers=workers)
        self.wm = WorldModelReward(world_model, calibrator=calibrator, calibrator_key=calibrator_key, suite=suite,
                                   world_model_kwargs=world_model_kwargs)

    @property
    def calibrator(self) -> Calibrator:
        return self.wm.calibrator

    def stream_for(self, group_id: Any) -> str:
        return "anchor" if is_anchor_group(group_id, self.anchor_fraction, self.seed) else "world_model"

    def anchor_weight(self) -> float:
        """Current inverse-variance weight of an anchor sample (1 until eta2 is measured)."""
        calibrator = self.calibrator
        if calibrator.n_pairs < calibrator.config.min_pairs_global:
            return 1.0
        eta2 = calibrator.eta2
        if self.c is None:
            if eta2 <= 0:
                return 1.0
            self.c = 1.0 / eta2  # the paper's default, fixed at the first measurement
        return float(min(max(1.0 + self.c * eta2, 1.0), self.w_max))

    def score_group(self, task: Task, scripts: Sequence[str | None], group_id: Any = None,
                    stream: str | None = None) -> list[ScoreResult]:
        """Score a group on ``stream`` (default: the one its group id draws)."""
        stream = stream or self.stream_for(group_id)
        if stream == "world_model":
            return self.wm.predict(task, scripts)
        if stream != "anchor":
            raise ConfigError(f"stream must be 'anchor' or 'world_model', got {stream!r}")
        real = self.real.score_group(task, scripts)
        predicted = self.wm.predict(task, scripts)
        pairs = [(p.wm_score_raw, r.real_score) for r, p, s in zip(real, predicted, scripts)
                 if s is not None and not r.infra_failure and p.wm_score_raw is not None]
        if pairs:
            wm_scores, real_scores = zip(*pairs)
            self.calibrator.add_pairs(list(wm_scores), list(real_scores), [task.id] * len(pairs))
        weight = self.anchor_weight()
        for r, p in zip(real, predicted):
            r.stream = "anchor"
            r.wm_score_raw, r.wm_score_calibrated = p.wm_score_raw, p.wm_score_calibrated
            r.cost["world_model_s"] = p.cost.get("world_model_s", 0.0)
            r.fusion_weight = weight
        return real

    def close(self) -> None:
        self.real.close()


def make_reward_source(reward: str, executor: str = "bwrap", **kwargs: Any):
    """Build the ``world_model`` or ``fused`` reward source for an environment."""
    if reward == "world_model":
        kwargs.pop("workers", None)
        return WorldModelReward(**kwargs)
    if reward == "fused":
        return FusedReward(executor=executor, **kwargs)
    raise ConfigError(f"make_reward_source handles 'world_model' and 'fused', not {reward!r}")
