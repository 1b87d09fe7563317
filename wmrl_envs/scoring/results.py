"""What scoring produces: one :class:`ScoreResult` per sample, one :class:`ScoredGroup` per group.

A sample ends in one of three outcomes that must never be confused:

* scored: a valid executed submission, or a world-model estimate;
* an invalid submission or a crashing script: a legitimate real score of 0 (``valid=False``);
* an infrastructure failure (the sandbox could not start, the world model gave no number):
  **not a score** (``infra_failure=True``). Its reward is NaN; trainers drop it and it never
  reaches the calibrator.

Every message a result carries is bounded (:func:`bounded`), because it reaches observations,
``info`` dicts and logs: agent code controls how long its own error output is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_envs.grading.runs import bounded, tail

STREAMS = ("real", "world_model", "anchor")
__all__ = ["DECIDERS", "STREAMS", "ScoreResult", "ScoredGroup", "bounded", "charge_world_model", "tail"]
#: What settled a sample's outcome (``ScoreResult.decided_by``): a static proof, the script's run
#: in the sandbox, its run on a sample of the task, an earlier full run of the same code on the
#: task reused, a world model's estimate moved by the residuals of executed scripts that differ
#: from it only in numbers, or a world model's estimate ("" until scored).
DECIDERS = ("proof", "execution", "sample_run", "reuse", "neighbours", "world_model")


@dataclass
class ScoreResult:
    """How one sample was scored. ``score`` is the reward quantity (position score, RPG or
    success), NaN for an infrastructure failure.

    Attributes:
        task_id: The task.
        stream: ``"real"`` (executed), ``"world_model"`` (predicted) or ``"anchor"`` (both).
        score: The sample's reward on its stream.
        raw_score: The metric value of an executed submission.
        real_score: The reward quantity of an executed submission (0 when invalid).
        wm_score_raw: The world model's prediction.
        wm_score_calibrated: The prediction through the calibrator (for an anchor: the map
            fitted before its own pairs were added, an out-of-sample value).
        valid: Whether the executed submission was valid; ``None`` when nothing ran.
        error: Why the sample did not score, or the world model's warning (bounded).
        infra_failure: The sample has no score (see the module docstring).
        fusion_weight: The inverse-variance weight of the sample (``w_A`` for an anchor, 1
            otherwise) at the time it was scored.
        stdout, stderr: Tails of the run's output.
        status: How the script ended, in the one vocabulary of :mod:`wmrl_envs.outcome` on every
            stream: executed, proved without running, or predicted by the world model
            (``""`` until scored; ``infra_failure`` when nothing could be said). A simulated
            episode's is one of :data:`wmrl_envs.info.EPISODE_STATUSES`.
        exception: The short class of the exception the script raised (or is proved or
            predicted to raise); None otherwise.
        proved: The outcome is exact without running the script in full: a static proof
            (:mod:`wmrl_envs.analysis.proofs`), a sample run's failure of a class measured exact
            (:mod:`wmrl_envs.world_models.sample_run`), or the same code's executed outcome reused
            (:mod:`wmrl_envs.scoring.experience`). Its reward and calibrator pair are what executing
            it gives (for a reuse, up to the script's own randomness); no map moves it.
        executed: The script ran in the sandbox.
        wm_status, wm_stage: The world model's predicted outcome and the stage that predicted it
            (``proof``, ``sample_run``, ``world_model``; ``neighbours`` when executed neighbours
            moved the estimate), kept when the sample is also executed, so
            an anchor's prediction can be scored against its run; None when nothing was predicted.
        decided_by: What settled the outcome, one of :data:`DECIDERS` (``""`` until scored): on an
            anchor, the execution; on a world-model sample, the world model's stage that answered.
        execution_status: The executor's own status of an executed run (``ok``, ``error``,
            ``timeout``, ``memory``, ``infra_error``); ``""`` when nothing ran.
        p_valid: The world model's probability that the script gives a valid submission
            (1 or 0 when the outcome is exact); None when not predicted.
        leaderboard: The grading report (position, medal, above median, rpg).
        stratum: The kind of solution (a script's model family), which the calibrator's
            audit checks residuals by; None when the family scores no such thing.
        potential_start: For a potential-shaped episode (:mod:`wmrl_envs.scoring.shaping`): the
            world model's reading at its first state, ``Phi_0``, while ``wm_score_raw`` is the
            reading at its last, ``Phi_T``, and ``real_score`` its success. A world-model sample
            that has it is rewarded ``success + Phi_T - Phi_0`` (on the calibrated scale); None
            for every other sample.
        wm_uncertainty: The world model's standard deviation of its score estimate, when it gives
            one; None otherwise.
        inclusion_probability: Under an informed schedule, the probability with which the
            sample's group was drawn as an anchor (an anchor pair then weighs its inverse); None
            under the other schedules, whose draws do not depend on the predictions.
        predicted_cpu_s: Under an informed schedule, the CPU-seconds a full run of the sample was
            predicted to cost before the group was chosen
            (:mod:`~wmrl_envs.world_models.execution_cost`; 0 for a response without code, which
            never runs); None otherwise, and for an exact outcome.
        reward_error_bound: On a world-model sample: the scoring core's split-conformal bound on
            ``|reward - real|`` at ``FusionConfig.error_bound_level``, from the anchors' out-of-sample
            errors (:mod:`wmrl_envs.calibration.bound`); None on other streams and while too few
            anchors are in.
        cost: Seconds spent: ``execution_s``, ``execution_cpu_s``, ``world_model_s`` and,
            for simulated episodes, ``simulation_s``, ``simulation_cpu_s``, ``simulation_steps``.
    """

    task_id: str
    stream: str
    score: float = math.nan
    raw_score: float | None = None
    real_score: float | None = None
    wm_score_raw: float | None = None
    wm_score_calibrated: float | None = None
    valid: bool | None = None
    error: str | None = None
    infra_failure: bool = False
    fusion_weight: float = 1.0
    stdout: str = ""
    stderr: str = ""
    status: str = ""
    exception: str | None = None
    proved: bool = False
    executed: bool = False
    decided_by: str = ""
    wm_status: str | None = None
    wm_stage: str | None = None
    execution_status: str = ""
    p_valid: float | None = None
    leaderboard: dict[str, Any] = field(default_factory=dict)
    stratum: str | None = None
    potential_start: float | None = None
    reward_error_bound: float | None = None
    wm_uncertainty: float | None = None
    inclusion_probability: float | None = None
    predicted_cpu_s: float | None = None
    cost: dict[str, float] = field(default_factory=lambda: {"execution_s": 0.0, "world_model_s": 0.0})

    def __post_init__(self) -> None:
        self.error = bounded(self.error)
        self.stdout, self.stderr = tail(self.stdout), tail(self.stderr)


def _values(samples: list[ScoreResult], name: str, scored_only: bool = False) -> np.ndarray:
    """Field ``name`` of every sample, NaN where None (and, with ``scored_only``, on an infra failure)."""
    return np.array([math.nan if getattr(s, name) is None or (scored_only and s.infra_failure)
                     else float(getattr(s, name)) for s in samples])


@dataclass
class ScoredGroup:
    """One GRPO group, scored on one stream. The arrays are per sample, NaN where missing."""

    task_id: str
    group_id: Hashable
    stream: str
    samples: list[ScoreResult]

    @property
    def real(self) -> np.ndarray:
        """Real scores; NaN when not executed or on an infrastructure failure."""
        return _values(self.samples, "real_score", scored_only=True)

    @property
    def wm_raw(self) -> np.ndarray:
        """Raw world-model scores; NaN when not world-model scored."""
        return _values(self.samples, "wm_score_raw")

    @property
    def rewards(self) -> np.ndarray:
        """Training rewards; NaN for a sample without a score (dropped from training)."""
        return _values(self.samples, "score", scored_only=True)

    @property
    def valid(self) -> np.ndarray:
        """Executed and valid (False for a world-model-only sample, whose validity is unknown)."""
        return np.array([s.valid is True for s in self.samples])

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The (world-model, real) pairs this group gives the calibrator: anchors only, both scores finite."""
        if self.stream != "anchor":
            return np.empty(0), np.empty(0)
        wm, real = self.wm_raw, self.real
        keep = self._paired(wm, real)
        return wm[keep], real[keep]

    @property
    def pair_weights(self) -> np.ndarray | None:
        """The design weight of each of :attr:`pairs` (1 / the group's inclusion probability);
        None when the group was not drawn by an informed schedule."""
        if self.stream != "anchor" or all(s.inclusion_probability is None for s in self.samples):
            return None
        keep = self._paired(self.wm_raw, self.real)
        return np.array([1.0 / s.inclusion_probability for s, k in zip(self.samples, keep) if k], dtype=float)

    @property
    def pair_strata(self) -> list[str | None]:
        """The stratum of each of :attr:`pairs`, in the same order."""
        if self.stream != "anchor":
            return []
        return [s.stratum for s, keep in zip(self.samples, self._paired(self.wm_raw, self.real)) if keep]

    @staticmethod
    def _paired(wm: np.ndarray, real: np.ndarray) -> np.ndarray:
        return np.isfinite(wm) & np.isfinite(real)


def charge_world_model(samples: Iterable[ScoreResult], start: float, cpu: float) -> None:
    """Charge the wall and CPU time since ``start`` (``time.perf_counter``) and ``cpu``
    (``time.process_time``) to ``samples`` evenly, as world-model time: work done so that those
    samples need not run (proofs, pricing, reuse and neighbour lookups)."""
    samples = list(samples)
    if not samples:
        return
    wall, cpu = (time.perf_counter() - start) / len(samples), (time.process_time() - cpu) / len(samples)
    for sample in samples:
        sample.cost["world_model_s"] = sample.cost.get("world_model_s", 0.0) + wall
        sample.cost["world_model_cpu_s"] = sample.cost.get("world_model_cpu_s", 0.0) + cpu
