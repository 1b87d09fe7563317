"""A world model made wrong on purpose: stress tests of WMRL's corrections (docs/architecture.md §10).

:class:`CorruptedWorldModel` wraps any :class:`~wmrl_envs.world_models.WorldModel` and distorts
each parsed score ``s`` (clipped to [0, 1] first, the result clipped to [0, 1] again) by one
:class:`Corruption`. Every draw is a keyed hash of ``(seed, task id, script sha256)``, never a
global RNG, so a script gets the same score every time it is predicted, as from a real world
model. Build one directly or by name::

    CorruptedWorldModel(SurrogateWorldModel(), Corruption("swap", 0.3), seed=0)
    make_world_model("corrupted", base="surrogate", corruption="swap", strength=0.3, seed=0)

**What reaches a GRPO gradient.** Advantages are group-relative, and every member of a group
shares its task and its stream. An error shared by the whole group cancels; std-normalised
advantages (GRPO) also remove a group's scale, mean-only ones (Dr.GRPO) keep it. What is left
to harm the update: errors that change the order or the spacing of a group's scores, and the
scale between the anchor stream (real scores) and the world-model stream. Per corruption, with
its default ``strength`` (:data:`DEFAULT_STRENGTHS`):

* ``saturate`` (4): ``φ_k(s) = (1 - e^(-k s)) / (1 - e^(-k))`` with ``k = strength``, plus
  Gaussian noise (``noise_sd``, default 0.03). Monotone and concave: φ(0) = 0, φ(1) = 1, slope
  ``k / (1 - e^(-k))`` at 0 and ``k e^(-k) / (1 - e^(-k))`` at 1 (4.07 and 0.075 at k = 4), so
  the top of the scale is compressed. Order is kept in expectation; within a narrow group φ is
  nearly affine, which std-normalisation undoes but which shrinks mean-only advantages (and the
  world-model stream against the anchors) by φ'(s); the noise, unchanged in size, swamps the
  compressed differences at the top. Fixed by debiasing (the isotonic map inverts φ), except
  the noise it magnifies there, which the anchor weight answers.
* ``task_offset`` (0.15): ``s + strength · u_task`` with ``u_task`` uniform on [-1, 1] from
  ``(seed, task id)``. Shared by a whole group, so it cancels, except where clipping at 0 or 1
  ties scores. Through the calibrator it does harm: a global map sees offsets as noise, which
  flattens it (spacing shrinks) and inflates η̂². Fixed by per-task maps (partial pooling,
  chosen out of fold: ``CalibratorConfig.task_prior_pairs``).
* ``family_bias`` (0.5): scripts of one solution family (``family``, default ``constant``) get
  ``+strength`` on every task. Group members of different families change order: the policy is
  pulled to the favoured family, an exploit. The default is the realistic reward hack, a world
  model that likes trivial baselines: +0.5 lifts a constant predictor (real score about 0.1 on
  MLE-Dojo) above most real models, so following it costs real score (over-scoring a family
  that is nearly as good as the rest, such as ``knn``, harms little). The bias depends on the script, not on the score,
  so no monotone map fixes it, and rank statistics barely move. Only real rewards do: the
  anchors, their weight, and a larger anchor share (adaptive anchoring through the η̂² bound,
  since the bias inflates η̂²).
* ``swap`` (0.3): family ``swap[0]`` (default ``knn``) gets ``+strength`` and ``swap[1]``
  (default ``hist_gb``) ``-strength``, so their order inverts while the other families keep
  theirs. Non-monotone: in every group holding both, the gradient points the wrong way. No
  monotone map fixes it; the audit must detect it (``Calibrator.audit``) and adaptive
  anchoring take over, up to pure real execution.
* ``drift`` (4): a saturation whose ``k`` grows with the training step,
  ``k = strength · min(1, step / drift_steps)``, from the identity to ``saturate``'s φ. Within
  a step as ``saturate``; across steps a map fitted on old pairs goes stale (biased spacing
  and stream scale, inflated η̂²). Tracked by forgetting (``CalibratorConfig.pair_window``).
  The caller advances the step: set ``model.step = trainer.step`` before each
  ``train_step`` (``bench/stress.py`` does); it starts at 0.
* ``noise`` (0.1): Gaussian noise of standard deviation ``strength``. Zero mean and
  independent per script: order errors within groups, variance rather than bias (bar clipping
  at the ends). A map cannot remove it (the isotonic map only shrinks towards the mean);
  denoising does, the inverse-variance anchor weight ``clip(1 + c·η̂², 1, w_max)``.

The solution family of a script is read from its text (:func:`script_family`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

from wmrl_envs.analysis.code_features import solution_family
from wmrl_envs.errors import ConfigError
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.base import Prediction, WorldModel, make_world_model

#: The solution families of the grammar policy (``agents/code/grammar.py``, slot ``model``).
FAMILIES = ("constant", "linear", "knn", "tree", "random_forest", "extra_trees", "hist_gb", "mlp")
#: Every corruption and its default strength (see the module docstring for units).
DEFAULT_STRENGTHS = {"saturate": 4.0, "task_offset": 0.15, "family_bias": 0.5, "swap": 0.3, "drift": 4.0,
                     "noise": 0.1}
KINDS = tuple(DEFAULT_STRENGTHS)
# The surrogate's features call HistGradientBoosting (and other boosting) "boosting".
_GRAMMAR_NAMES = {"boosting": "hist_gb"}
_NORMAL = NormalDist()


def script_family(script: str) -> str | None:
    """The grammar family (:data:`FAMILIES`) of the first estimator ``script`` constructs, or
    None (:func:`~wmrl_envs.analysis.code_features.solution_family`, in the grammar's names:
    an SVM or naive Bayes is no grammar family)."""
    family = solution_family(script)
    family = _GRAMMAR_NAMES.get(family, family)
    return family if family in FAMILIES else None


def saturation(score: float, k: float) -> float:
    """``φ_k(s) = (1 - e^(-k s)) / (1 - e^(-k))``: increasing and concave for ``k > 0``, the
    identity at ``k = 0``; maps [0, 1] onto [0, 1]."""
    if k < 1e-9:  # the limit; the formula divides 0 by 0
        return score
    return math.expm1(-k * score) / math.expm1(-k)


@dataclass(frozen=True)
class Corruption:
    """One distortion of world-model scores (formulas and effects in the module docstring).

    Attributes:
        kind: One of :data:`KINDS`.
        strength: Its size (default: :data:`DEFAULT_STRENGTHS`).
        family: ``family_bias``: the over-scored family.
        swap: ``swap``: the family moved up and the family moved down.
        drift_steps: ``drift``: steps until the full strength.
        noise_sd: Gaussian noise added after the distortion (default 0.03 for ``saturate``,
            0 otherwise); for ``noise`` it is the strength and may not be given.
    """

    kind: str
    strength: float | None = None
    family: str = "constant"
    swap: tuple[str, str] = ("knn", "hist_gb")
    drift_steps: int = 20
    noise_sd: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"unknown corruption {self.kind!r}; known: {KINDS}")
        strength = DEFAULT_STRENGTHS[self.kind] if self.strength is None else float(self.strength)
        if not (math.isfinite(strength) and strength >= 0):
            raise ConfigError(f"strength must be a finite number >= 0, got {self.strength}")
        if self.kind == "noise" and self.noise_sd is not None:
            raise ConfigError("the noise corruption's standard deviation is its strength; leave noise_sd out")
        noise_sd = strength if self.kind == "noise" else (
            (0.03 if self.kind == "saturate" else 0.0) if self.noise_sd is None else float(self.noise_sd))
        if not (math.isfinite(noise_sd) and noise_sd >= 0):
            raise ConfigError(f"noise_sd must be a finite number >= 0, got {self.noise_sd}")
        swap = tuple(self.swap)
        if self.family not in FAMILIES or len(swap) != 2 or swap[0] == swap[1] or not set(swap) <= set(FAMILIES):
            raise ConfigError(f"family must be one of {FAMILIES} and swap two different ones, "
                              f"got {self.family!r} and {self.swap!r}")
        if isinstance(self.drift_steps, bool) or not isinstance(self.drift_steps, int) or self.drift_steps < 1:
            raise ConfigError(f"drift_steps must be an int >= 1, got {self.drift_steps!r}")
        object.__setattr__(self, "strength", strength)
        object.__setattr__(self, "noise_sd", noise_sd)
        object.__setattr__(self, "swap", swap)

    def distort(self, score: float, task_id: str, family: str | None, step: int, seed: int) -> float:
        """The noise-free distortion of a score in [0, 1] (not yet clipped)."""
        k = self.strength
        if self.kind == "saturate":
            return saturation(score, k)
        if self.kind == "drift":
            return saturation(score, k * min(1.0, step / self.drift_steps))
        if self.kind == "task_offset":
            return score + k * (2 * _unit(seed, "task_offset", task_id) - 1)
        if self.kind == "family_bias":
            return score + (k if family == self.family else 0.0)
        if self.kind == "swap":
            return score + (k if family == self.swap[0] else -k if family == self.swap[1] else 0.0)
        return score  # noise: all of it is added by the caller


class CorruptedWorldModel:
    """``base`` with its scores distorted by ``corruption`` (see the module docstring).

    Args:
        base: Any world model.
        corruption: A :class:`Corruption`, or a kind name at its default strength.
        seed: Keys every draw (the task offsets and the noise).

    Attributes:
        step: The training step ``drift`` reads; the caller advances it.
    """

    def __init__(self, base: WorldModel, corruption: Corruption | str, seed: int = 0) -> None:
        self.base = base
        self.corruption = corruption if isinstance(corruption, Corruption) else Corruption(corruption)
        self.seed = seed
        self.step = 0
        self.name = f"{base.name}+{self.corruption.kind}"

    @classmethod
    def from_options(cls, *, corruption: str | None = None, base: str | WorldModel = "surrogate",
                     base_options: dict[str, Any] | None = None, seed: int = 0, **fields: Any) -> CorruptedWorldModel:
        """``make_world_model("corrupted", ...)``: ``base`` by name (with ``base_options``) or
        instance, ``corruption`` a kind, ``fields`` the other :class:`Corruption` fields
        (``strength``, ``family``, ...)."""
        if corruption is None:
            raise ConfigError(f"the corrupted world model needs corruption=, one of {KINDS}")
        model = make_world_model(base, **(base_options or {})) if isinstance(base, str) else base
        return cls(model, Corruption(corruption, **fields), seed)

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        """The base model's predictions, each parsed score distorted; others pass unchanged."""
        predictions = self.base.predict(tasks, scripts)
        return [self._corrupt(task, script, p) if p.parsed and math.isfinite(p.score) else p
                for task, script, p in zip(tasks, scripts, predictions)]

    def _corrupt(self, task: Task, script: str, prediction: Prediction) -> Prediction:
        c = self.corruption
        score = c.distort(min(max(prediction.score, 0.0), 1.0), task.id, script_family(script), self.step, self.seed)
        if c.noise_sd > 0:
            digest = hashlib.sha256(script.encode()).hexdigest()
            score += c.noise_sd * _NORMAL.inv_cdf(_unit(self.seed, "noise", task.id, digest))
        # The uncertainty stays the base model's: a wrong world model is not less confident.
        return replace(prediction, score=min(max(score, 0.0), 1.0))


def _unit(*parts: Any) -> float:
    """A number in (0, 1), uniform over keys: a keyed hash of ``parts``, no RNG state."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / 2.0**64
