"""The scoring core: one per run, shared by every path that turns samples into rewards.

``gym.make(..., reward="fused")``, the WMRL trainer and the RL-library adapters all hold a
:class:`ScoringCore`. It owns the three things WMRL adds to GRPO:

* the **anchor schedule** (:mod:`wmrl_envs.scoring.schedule`): which groups are anchors;
* the **calibrator** (:class:`~wmrl_envs.calibration.Calibrator`): online debiasing,
  fed by anchor pairs;
* the **anchor weight** (:mod:`wmrl_envs.scoring.fusion`: the rule :attr:`FusionConfig.rule`
  picks, its constant ``c`` and, for the ``paper`` rule, the tracked disagreement).

A family's *scorer* produces raw scores (code: one world-model batch and one sandbox fan-out,
:class:`~wmrl_envs.scoring.code.CodeScorer`; LIBERO: a simulated episode scored by the success
model). :meth:`ScoringCore.fuse` then turns raw scores into rewards, the same way for every family:

1. every anchor's world-model score is calibrated by the current map (an out-of-sample value
   for ``info``), then the batch's anchor pairs are added to the calibrator, in order; a
   calibrator lost for good (a Ray actor that could not be restarted) makes them all
   infrastructure failures instead;
2. world-model groups get calibrated scores (``debias``) or raw scores clipped to range; a
   proved failure keeps its exact 0; a potential-shaped episode (one with ``potential_start``)
   gets its success plus the rise of the potential, both readings mapped the same way
   (:mod:`wmrl_envs.scoring.shaping`);
3. executed samples get their real score; an infrastructure failure gets NaN (dropped); an
   anchor's reward blends in its out-of-sample calibrated score when
   :attr:`FusionConfig.anchor_real_share` is below 1 (the paper's anchor reward is the real score);
4. every anchor sample gets the current weight ``w_A``, every other sample 1 (the ``paper``
   rule first folds the batch's anchor groups, out-of-sample calibrated against real, into
   its disagreement);
5. the anchors' out-of-sample errors (step 1's world-model reward against the real score) feed
   a split-conformal bound (:mod:`wmrl_envs.calibration.bound`), and every world-model sample
   carries it as ``reward_error_bound``: at least ``error_bound_level`` of world-model samples
   have ``|reward - real|`` within it (None until enough anchors are in).

Within one call, all anchor pairs enter before any world-model group is calibrated. An env
step is a batch of one sample, so a user loop that visits a step's anchor groups before its
world-model groups reproduces the trainer's rewards exactly (``tests/integration/test_parity.py``).

Asynchronous anchors (:meth:`ScoringCore.score_async`, :meth:`ScoringCore.land`): a batch's
world-model groups are fused at once, against the calibrator as it stands, while its anchor
groups run in the background (:mod:`wmrl_envs.scoring.inflight`); a landed batch is fused then,
steps 1 to 5 on its own, so its pairs reach the calibrator in submission order.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from wmrl_envs.calibration import Calibrator
from wmrl_envs.calibration.bound import RewardErrorBound
from wmrl_envs.errors import CalibratorLostError, ConfigError
from wmrl_envs.scoring.calibrators import shared_calibrator
from wmrl_envs.scoring.fusion import DisagreementTracker, FusionConfig, anchor_reward, anchor_weight
from wmrl_envs.scoring.inflight import InFlightAnchors
from wmrl_envs.scoring.results import ScoredGroup, bounded
from wmrl_envs.scoring.schedule import (
    AnchorSchedule,
    ConstantSchedule,
    InformedSchedule,
    StepSchedule,
    check_stream,
    group_information,
    group_price,
)
from wmrl_envs.scoring.shaping import shaped_return


class GroupScorer(Protocol):
    """Produces raw scores for groups on given streams (a family's part of scoring)."""

    def score(self, groups: Sequence[Any], streams: Sequence[str]) -> list[ScoredGroup]: ...

    def close(self) -> None: ...


class ScoringCore:
    """Streams, calibration and anchor weights for one run.

    Args:
        schedule: Decides each group's stream from its id.
        calibrator: Debiases world-model scores; the one every sample of the run shares.
        fusion: The anchor weight's rule and settings.
        debias: Reward world-model samples with calibrated scores (False: raw scores).
        denoise: Give anchor samples the weight ``w_A`` (False: weight 1).
        measure_c: ``c`` is set by a measurement (the trainer's warmup); until then the
            weight is 1. False: without a configured ``c``, take ``1/η̂²`` at the first residual.
        scorer: Produces raw scores for :meth:`score` (absent for families whose episodes
            score themselves and call :meth:`fuse`).
    """

    def __init__(self, schedule: AnchorSchedule, calibrator: Calibrator, fusion: FusionConfig | None = None, *,
                 debias: bool = True, denoise: bool = True, measure_c: bool = False,
                 scorer: GroupScorer | None = None) -> None:
        self.schedule = schedule
        self.calibrator = calibrator
        self.fusion = fusion or FusionConfig()
        self.debias = debias
        self.denoise = denoise
        self.measure_c = measure_c
        self.scorer = scorer
        self.c: float | None = self.fusion.c
        self.disagreement = DisagreementTracker(self.fusion)
        self.error_bound = RewardErrorBound(self.fusion.error_bound_level, self.fusion.error_bound_window)
        self._fusion_cpu_s = self._fusion_wall_s = 0.0

    @property
    def reward(self) -> str:
        """The env reward this core serves: ``"real"``, ``"world_model"`` or ``"fused"``."""
        if isinstance(self.schedule, ConstantSchedule):
            return self.schedule.stream_name
        return "fused"

    # ------------------------------------------------------------------ streams
    def streams(self, group_ids: Sequence[Any]) -> list[str]:
        """The stream of each group, from the schedule (an informed schedule has none before its
        groups are scored: a :class:`~wmrl_envs.errors.ConfigError`)."""
        return [check_stream(self.schedule.stream(g)) for g in group_ids]

    # ------------------------------------------------------------------ scoring
    def score(self, groups: Sequence[Any], streams: Sequence[str] | None = None) -> list[ScoredGroup]:
        """Score groups through the scorer (one batch), then :meth:`fuse` them.

        ``streams`` overrides the schedule (for tools); by default each group's id decides, or,
        under an :class:`~wmrl_envs.scoring.schedule.InformedSchedule`, the world model's
        predictions of the groups (every group offered; ``streams`` may hold back some as ``real``).
        """
        if self.scorer is None:
            raise ConfigError("this scoring core has no scorer: its episodes score themselves and call fuse()")
        streams, informed = self._batch_streams(groups, streams)
        # Only a batch scorer takes choose(); the config refuses an informed schedule for the others.
        return self.fuse(self.scorer.score(groups, streams, choose=self._choose, price=self._prices_groups)
                         if informed else self.scorer.score(groups, streams))

    def score_async(self, groups: Sequence[Any], streams: Sequence[str] | None = None, *, tag: Hashable = None,
                    timeout_s: float | None = None, anchors: bool = True) -> tuple[list[ScoredGroup], InFlightAnchors | None]:
        """Score groups without waiting for the anchors' runs: the batch's other groups, fused now
        (world-model groups calibrated by the calibrator as it stands), and its anchor groups in
        flight (None without any), for :meth:`land`, each sample provisionally scored as a
        world-model sample until then. ``tag`` names the batch (the trainer's step);
        a run not back ``timeout_s`` after submission is an infrastructure failure; ``streams``
        overrides the schedule as in :meth:`score`. ``anchors=False``: the batch has no anchor group
        (the schedule's are world-model groups; nothing is chosen), as past a run's
        :func:`~wmrl_envs.scoring.schedule.anchor_steps`."""
        if self.scorer is None or not hasattr(self.scorer, "score_submitting"):
            raise ConfigError("asynchronous anchors need a batch scorer that submits runs (the code families')")
        streams, informed = self._batch_streams(groups, streams)
        if not anchors:
            streams, informed = ["world_model" if s == "anchor" else s for s in streams], False
        scored, flight = self.scorer.score_submitting(groups, streams, self._choose if informed else None,
                                                      price=informed and self._prices_groups,
                                                      tag=tag, timeout_s=timeout_s)
        for g in flight.scored if flight is not None else []:
            self._provisional(g)
        return self.fuse([g for g in scored if g.stream != "anchor"]), flight

    def _batch_streams(self, groups: Sequence[Any], streams: Sequence[str] | None) -> tuple[list[str], bool]:
        """Each group's stream for a batch call (the schedule's unless given; every group offered as
        world-model under an informed schedule, which then chooses), and whether it is informed."""
        informed = isinstance(self.schedule, InformedSchedule)
        if streams is None:
            streams = ["world_model"] * len(groups) if informed else self.streams([g.group_id for g in groups])
        streams = [check_stream(s) for s in streams]
        if len(streams) != len(groups):
            raise ConfigError(f"{len(groups)} groups but {len(streams)} streams")
        return streams, informed

    def _provisional(self, group: ScoredGroup) -> None:
        """An anchor group in flight is scored as a world-model group would be, until it lands (an
        out-of-sample value, as step 1 of :meth:`fuse` gives; its pairs wait for the runs)."""
        self._calibrate(group)
        for s in group.samples:
            if s.infra_failure:
                s.score = np.nan
            elif s.proved:  # exact: a proved failure's 0, a reused run's score
                s.score = 0.0 if s.wm_score_raw is None else float(s.wm_score_raw)
            else:
                value = self._world_model_score(s)
                s.score = np.nan if value is None else value

    def land(self, flight: InFlightAnchors, wait: bool = False) -> list[ScoredGroup] | None:
        """The in-flight batch's anchor groups, fused, once its runs returned (``wait``: block until
        then); None while some are under way."""
        if not self.scorer.land(flight, wait):
            return None
        return self.fuse(flight.scored)

    @property
    def _prices_groups(self) -> bool:
        """Whether the schedule weighs groups by their predicted execution cost."""
        return isinstance(self.schedule, InformedSchedule) and self.schedule.per_cost

    def _choose(self, predicted: list[ScoredGroup]) -> list[bool]:
        """The informed schedule's anchors among predicted world-model groups; every sample records
        its group's inclusion probability (an anchor pair weighs its inverse)."""
        information = [group_information([s.p_valid for s in g.samples], [s.wm_uncertainty for s in g.samples],
                                         [s.proved for s in g.samples]) for g in predicted]
        prices = [group_price([s.predicted_cpu_s for s in g.samples], [s.proved for s in g.samples])
                  for g in predicted]
        chosen, probabilities = self.schedule.choose([g.group_id for g in predicted], information, prices)
        for g, probability in zip(predicted, probabilities):
            for s in g.samples:
                s.inclusion_probability = float(probability)
        return [bool(c) for c in chosen]

    def fuse(self, groups: Sequence[ScoredGroup]) -> list[ScoredGroup]:
        """Turn raw scores into rewards and weights (the steps in the module docstring); in place.
        Its time is the world model's upkeep, kept for :meth:`take_fusion_time` and out of the
        samples' ``cost`` (an env step's ``info`` must not depend on how fast it ran)."""
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            return self._fuse(groups)
        finally:
            self._fusion_cpu_s += time.process_time() - cpu0
            self._fusion_wall_s += time.perf_counter() - wall0

    def take_fusion_time(self) -> tuple[float, float]:
        """The CPU- and wall-seconds :meth:`fuse` spent since the last call, for a compute ledger
        (the trainer charges them to the world model each step)."""
        spent = (self._fusion_cpu_s, self._fusion_wall_s)
        self._fusion_cpu_s = self._fusion_wall_s = 0.0
        return spent

    def _fuse(self, groups: Sequence[ScoredGroup]) -> list[ScoredGroup]:
        anchors = [g for g in groups if g.stream == "anchor"]
        for g in anchors:
            self._calibrate(g)
        for g in anchors:  # each calibrated, as a world-model sample would be, by maps that had not seen it
            self.error_bound.observe(np.array([np.nan if (v := self._world_model_score(s)) is None or s.infra_failure
                                               else v for s in g.samples], dtype=float),
                                     np.array([np.nan if s.real_score is None else s.real_score
                                               for s in g.samples], dtype=float),
                                     _bound_weights(g.samples))
        fed = self._feed(anchors)
        if fed and self.fusion.rule == "paper":
            for g in anchors:  # before feeding, each was calibrated by a map that had not seen it
                self.disagreement.observe(np.array([np.nan if s.wm_score_calibrated is None
                                                    else s.wm_score_calibrated for s in g.samples], dtype=float),
                                          np.array([np.nan if s.real_score is None else s.real_score
                                                    for s in g.samples], dtype=float))
        for g in groups:
            if g.stream == "world_model":
                self._calibrate(g)
        weight = self.anchor_weight() if anchors and fed else 1.0
        bound = self.reward_error_bound()
        for g in groups:
            # A group drawn by an informed schedule weighs the residuals by its own odds against being drawn.
            probability = g.samples[0].inclusion_probability if g.samples else None
            if probability is None or g.stream != "world_model":
                group_bound = bound
            else:  # a group its step could not draw (the step's count rounded to none) has no weighted bound
                group_bound = self.reward_error_bound(_odds_against(probability)) if probability > 0 else None
            for s in g.samples:
                if g.stream in ("real", "anchor"):
                    s.score = np.nan if s.infra_failure or s.real_score is None else float(s.real_score)
                    if g.stream == "anchor" and np.isfinite(s.score):
                        s.score = anchor_reward(s.score, self._world_model_score(s), self.fusion.anchor_real_share)
                elif s.infra_failure:
                    s.score = np.nan
                elif s.proved:
                    # An exact outcome (a proved failure's 0, an executed run's score reused): no map may move it.
                    s.score = 0.0 if s.wm_score_raw is None else float(s.wm_score_raw)
                elif s.wm_score_raw is not None:
                    s.score = self._world_model_score(s)
                    if s.potential_start is not None:
                        s.score = float(shaped_return(s.real_score, s.score,
                                                      self.potential(s.potential_start, g.task_id)))
                s.fusion_weight = weight if g.stream == "anchor" else 1.0
                if g.stream == "world_model":
                    s.reward_error_bound = group_bound
        return list(groups)

    def _feed(self, anchors: list[ScoredGroup]) -> bool:
        """Add the anchors' pairs to the calibrator, in order; False when it is lost for good, and
        then every anchor sample is an infrastructure failure (its pair can enter no calibrator)."""
        try:
            for g in anchors:
                wm, real = g.pairs
                if wm.size:
                    self.calibrator.add_pairs(wm, real, [g.task_id] * int(wm.size), strata=g.pair_strata,
                                              weights=g.pair_weights)
        except CalibratorLostError as exc:
            error = bounded(f"infrastructure failure (not a score): {exc}")
            for g in anchors:
                for s in g.samples:
                    s.infra_failure, s.error = True, error
            return False
        return True

    def _calibrate(self, group: ScoredGroup) -> None:
        wm = group.wm_raw
        ok = np.isfinite(wm)
        for s, keep in zip(group.samples, ok):
            if keep and s.proved:
                s.wm_score_calibrated = s.wm_score_raw  # exact, whatever the map says
        ok &= ~np.array([s.proved for s in group.samples], dtype=bool)
        if not ok.any():
            return
        strata = [s.stratum for s, keep in zip(group.samples, ok) if keep]
        calibrated = self.calibrator.calibrate(wm[ok], [group.task_id] * int(ok.sum()), strata)
        for s, value in zip([s for s, keep in zip(group.samples, ok) if keep], calibrated):
            s.wm_score_calibrated = float(value)

    def _world_model_score(self, sample: Any) -> float | None:
        """A sample's world-model score as a reward: calibrated (``debias``; a proved failure's
        exact value), else the raw score clipped to range; None without one."""
        if self.debias:
            return None if sample.wm_score_calibrated is None else float(sample.wm_score_calibrated)
        return None if sample.wm_score_raw is None else self._clip(sample.wm_score_raw)

    def potential(self, raw: float, task_id: str) -> float:
        """A raw potential reading on the reward's scale, mapped as world-model scores are: by the
        calibrator's current map (``debias``), else clipped to range."""
        if not self.debias:
            return self._clip(raw)
        return float(self.calibrator.calibrate(np.array([raw], dtype=float), [task_id])[0])

    def _clip(self, value: float) -> float:
        lo, hi = self.calibrator.config.score_range
        return min(max(float(value), lo), hi)

    # ------------------------------------------------------------------ the anchor weight
    def anchor_weight(self) -> float:
        """The current weight of an anchor sample under :attr:`FusionConfig.rule`.

        ``eta2``/``sampling``: ``clip(1 + c·η̂², 1, w_max)``; 1 before the calibrator has
        ``min_pairs_global`` pairs and while ``c`` is unknown (awaiting the warmup measurement,
        or a residual of exactly 0). ``paper``: the tracker's weight. 1 without denoising and
        under ``none``.
        """
        if not self.denoise or self.fusion.rule == "none":
            return 1.0
        if self.fusion.rule == "paper":
            return self.disagreement.weight()
        calibrator = self.calibrator
        if calibrator.n_pairs < calibrator.config.min_pairs_global:
            return 1.0
        eta2 = calibrator.eta2
        if not np.isfinite(eta2):
            return 1.0
        if self.c is None:
            if self.measure_c or eta2 <= 0:
                return 1.0
            self.c = 1.0 / eta2  # the paper's default, fixed at the first measurement
        return anchor_weight(eta2, self.c, self.fusion.w_max)

    def reward_error_bound(self, test_weight: float | None = None) -> float | None:
        """The bound on a world-model sample's ``|reward - real|`` at ``error_bound_level``; None
        while too few anchor residuals are in (:mod:`wmrl_envs.calibration.bound`). Under an
        informed schedule a sample's ``test_weight`` is its group's odds against being drawn."""
        value = self.error_bound.bound(test_weight)
        return value if np.isfinite(value) else None

    def bound_metrics(self) -> dict[str, float]:
        """``bound/reward_error`` (NaN while too few anchors are in) and ``bound/residuals``."""
        bound = self.reward_error_bound()
        return {"bound/reward_error": float("nan") if bound is None else bound,
                "bound/residuals": float(len(self.error_bound))}

    def metrics(self) -> dict[str, float]:
        """``calibration/*``, ``bound/*`` and ``fusion/*`` scalars to log."""
        out = dict(self.calibrator.metrics()) | self.bound_metrics()
        out["fusion/w_anchor"] = self.anchor_weight()
        c = self.disagreement.c if self.fusion.rule == "paper" else self.c
        out["fusion/c"] = float("nan") if c is None else float(c)
        if self.fusion.rule == "paper":
            ema = self.disagreement.ema
            out["fusion/disagreement"] = float("nan") if ema is None else float(ema)
        return out

    # ------------------------------------------------------------------ state
    def __getstate__(self) -> dict[str, Any]:
        # A shared calibrator does not travel: the other process takes its own of the same key.
        state = self.__dict__.copy()
        key = self.calibrator.shared_key
        if key is not None:
            state["calibrator"] = key
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state["calibrator"], str):
            state["calibrator"] = shared_calibrator(state["calibrator"])
        self.__dict__.update(state)

    def state_dict(self) -> dict[str, Any]:
        """The run's scoring state: the calibrator's pairs, ``c`` and what an adaptive schedule
        recorded (None for a schedule that is configuration only)."""
        schedule = self.schedule.state_dict() if isinstance(self.schedule, (StepSchedule, InformedSchedule)) else None
        scorer = self.scorer.state_dict() if hasattr(self.scorer, "state_dict") else None
        return {"calibrator": self.calibrator.state_dict(), "c": self.c, "schedule": schedule,
                "disagreement": self.disagreement.state_dict(), "scorer": scorer,
                "error_bound": self.error_bound.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calibrator.load_state_dict(state["calibrator"])
        self.c = state["c"]
        if "disagreement" in state:  # absent from checkpoints written before the paper rule
            self.disagreement.load_state_dict(state["disagreement"])
        if state["schedule"] is not None:
            self.schedule.load_state_dict(state["schedule"])
        if "error_bound" in state:  # absent from checkpoints written before the bound
            self.error_bound.load_state_dict(state["error_bound"])
        if state.get("scorer") is not None and hasattr(self.scorer, "load_state_dict"):
            self.scorer.load_state_dict(state["scorer"])  # absent from checkpoints written before reuse

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.close()


def _odds_against(probability: float) -> float:
    """``(1 - p) / p``: how much more often a group of inclusion probability ``p`` is a world-model
    group than an anchor, its weight in the world-model stream's error distribution."""
    return max(1.0 - probability, 1e-12) / probability


def _bound_weights(samples: Sequence[Any]) -> np.ndarray | None:
    """The bound's weight of each anchor sample's residual (None: all equal, the random schedules)."""
    if all(s.inclusion_probability is None for s in samples):
        return None
    return np.array([_odds_against(s.inclusion_probability) for s in samples], dtype=float)
