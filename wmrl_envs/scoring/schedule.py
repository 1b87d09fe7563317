"""Anchor schedules: which groups are executed as anchors (the anchor rule lives here only).

A schedule maps a group id to the group's stream. Every member of a group shares it, so a
GRPO group is compared within one stream.

* :class:`HashSchedule`, the default of ``gym.make(..., reward="fused")``: a group is an anchor
  when a hash of (seed, group id) falls below ``anchor_fraction``. It needs no coordination,
  so every process (and every worker of a TRL or verl run) takes the same decision for a group.
* :class:`StepSchedule`, the trainer's: per training step of ``groups_per_step`` groups with
  ids ``step * groups_per_step + j``, ``fraction * groups_per_step`` anchors rounded down or up so
  that the run executes its share exactly (:meth:`StepSchedule.anchor_count`: 0.8 groups a step
  is one anchor group on four steps of five), at least ``min_anchor_groups``, at positions drawn
  from (seed, step); a warmup phase may use a larger fraction. An env user who
  injects it (``gym.make(..., schedule=trainer.core.schedule)``) gets the trainer's streams.
  With ``adaptive=True`` its fraction follows the audit (:meth:`StepSchedule.adapt`).
* :class:`ConstantSchedule`: one stream for every group (``real`` GRPO, the raw world model).
* :class:`InformedSchedule`: anchors chosen by what they would teach. It wraps a hash or step
  schedule, which says *how many* groups a batch anchors, and decides *which* after the world
  model has scored every group: a group's inclusion probability rises with the world model's
  predictive variance of its rewards (:func:`group_information`; a proved outcome teaches
  nothing), above a floor that leaves every group a chance, and sums to the budget
  (:func:`inclusion_probabilities`). Groups are then drawn by systematic sampling in a seeded
  order (:func:`systematic_draw`): the batch anchors exactly the budget's count (rounded at
  random when it is fractional) and each group with its own probability, so that the scoring core
  can weigh each anchor pair by ``1 / probability`` and keep calibration unbiased
  (:mod:`wmrl_envs.calibration.maps`). The decision is deterministic given the seed, the batch's
  group ids and the world model's predictions. It needs every member of a group scored before
  the group's stream is known: a batch scorer's path (the trainer, ``ScoringCore.score``), not a
  per-sample env step (:meth:`InformedSchedule.stream` says so). With ``per_cost`` the
  information is weighed against each group's predicted execution cost
  (:func:`priority_per_cost`, from :mod:`wmrl_envs.world_models.execution_cost`): the scripts a
  world model is least sure of are often the expensive ones, and the same budget of groups can
  buy what they teach for less.

Schedules are small, picklable and deterministic: the stream of a group never depends on
the order in which groups are scored.

**Adaptive anchoring** (:meth:`StepSchedule.adapt`, the one place of the rule). The trainer
calls it once per step, after the step's anchors reached the calibrator, with the audit's
verdict and η̂². A step *fails* when the audit finds a non-monotone bias (``monotone_ok`` is
False: debiasing cannot help, only real rewards can) or η̂² is above ``eta2_bound`` (the
calibrated scores are too noisy to be worth their saving). After a failing step the anchor
fraction doubles, up to ``max_anchor_fraction`` (1.0: every group executed, pure real
rewards). Once the last three steps passed, each passing step halves it, down to the
configured ``anchor_fraction``: a step that passes says less than one that fails (an audit
near its power limit flags a real swap on some steps only), so recovery waits for a run of
passes while escalation does not. A call after step ``s`` records the share from step
``s + 1`` on, so ``stream(group_id)`` of a step already collected never changes. The trainer
logs the reason as ``anchors/reason``, a bitmask of the checks that failed
(:data:`AUDIT_FAILED`, :data:`ETA2_ABOVE_BOUND`). The record is the schedule's state
(:meth:`StepSchedule.state_dict`), which the scoring core checkpoints; a pickled copy keeps the
record it was pickled with.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np

from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring.results import STREAMS

# Mixed into the step schedule's generator so its anchor draws never coincide with the
# trainer's task draws, which also seed on (seed, step).
_ANCHOR_STREAM = 0xA7C0
#: Bits of the reason code of :meth:`StepSchedule.adapt` (logged as ``anchors/reason``).
AUDIT_FAILED = 1
ETA2_ABOVE_BOUND = 2
# Passing steps in a row before adaptation lowers the anchor share.
_RECOVERY_STEPS = 3
#: What asynchronous anchors do at a run's end (:func:`anchor_steps`): 'land' (the last step waits
#: for the anchors of the last ``max_staleness`` steps and trains on them) or 'skip' (those steps
#: choose none).
FINAL_ANCHORS = ("land", "skip")


@runtime_checkable
class AnchorSchedule(Protocol):
    """Decides the stream of a group from its id."""

    def stream(self, group_id: Hashable) -> str:
        """``"anchor"``, ``"world_model"`` or ``"real"``."""
        ...


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ConfigError(f"{name} must be in (0, 1], got {value}")


@dataclass(frozen=True)
class ConstantSchedule:
    """Every group on ``stream_name`` (``"real"`` or ``"world_model"``)."""

    stream_name: str

    def __post_init__(self) -> None:
        if self.stream_name not in ("real", "world_model"):
            raise ConfigError(f"a constant schedule is 'real' or 'world_model', got {self.stream_name!r}")

    def stream(self, group_id: Hashable) -> str:
        return self.stream_name


@dataclass(frozen=True)
class HashSchedule:
    """A group is an anchor when ``sha256(f"{seed}:{group_id!r}")`` falls below ``anchor_fraction``.

    Group ids are compared by ``repr``, so ints, strings and tuples such as
    ``(global_step, prompt_uid)`` all work and give the same decision in every process.
    """

    anchor_fraction: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        _check_fraction("anchor_fraction", self.anchor_fraction)

    def stream(self, group_id: Hashable) -> str:
        digest = hashlib.sha256(f"{self.seed}:{group_id!r}".encode()).digest()
        return "anchor" if int.from_bytes(digest[:8], "big") / 2**64 < self.anchor_fraction else "world_model"


@dataclass
class StepSchedule:
    """The trainer's schedule: a number of anchor groups per step, drawn from (seed, step).

    Attributes:
        groups_per_step: Groups per training step; group ``j`` of step ``s`` has id
            ``s * groups_per_step + j``.
        anchor_fraction: Share of anchor groups after warmup (the floor of adaptation).
        seed: Seeds the draw (with the step).
        warmup_steps: Steps that use ``warmup_anchor_fraction`` instead.
        warmup_anchor_fraction: Anchor share during warmup (default: ``anchor_fraction``).
        adaptive: Whether :meth:`adapt` moves the share after warmup (see the module docstring).
        eta2_bound: A step with η̂² above this fails (None: only the audit fails a step).
        max_anchor_fraction: The most :meth:`adapt` raises the share to (1.0: every group).
        min_anchor_groups: The fewest anchor groups of a step (0: a step's count may round down
            to none; the reference release anchors at least 2, so that the anchor pairs accumulate
            fast and no step's anchor stream is one task).
        anchor_steps: Steps ``0..anchor_steps-1`` have anchor groups and later ones have none (None:
            every step). A run whose anchors train K steps late sets ``steps - K``: a later anchor's
            real scores could reach only the run's last update, which would wait for its runs.
    """

    groups_per_step: int
    anchor_fraction: float = 0.1
    seed: int = 0
    warmup_steps: int = 0
    warmup_anchor_fraction: float | None = None
    adaptive: bool = False
    eta2_bound: float | None = None
    max_anchor_fraction: float = 1.0
    min_anchor_groups: int = 1
    anchor_steps: int | None = None
    # The schedule's state: (first step, share) of every change adapt() made, in step order,
    # and how many steps in a row have passed.
    _changes: list[tuple[int, float]] = field(default_factory=list, init=False, repr=False)
    _passes: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.groups_per_step < 1:
            raise ConfigError(f"groups_per_step must be >= 1, got {self.groups_per_step}")
        if self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.anchor_steps is not None and self.anchor_steps < 1:
            raise ConfigError(f"anchor_steps must be None or >= 1, got {self.anchor_steps}")
        _check_fraction("anchor_fraction", self.anchor_fraction)
        if self.warmup_anchor_fraction is not None:
            _check_fraction("warmup_anchor_fraction", self.warmup_anchor_fraction)
        check_adaptation(self.anchor_fraction, self.eta2_bound, self.max_anchor_fraction)
        check_min_anchor_groups(self.min_anchor_groups, self.groups_per_step)

    def group_ids(self, step: int) -> list[int]:
        """The ids of step ``step``'s groups, in order."""
        return [step * self.groups_per_step + j for j in range(self.groups_per_step)]

    def fraction(self, step: int) -> float:
        """The anchor share of step ``step``."""
        if step < self.warmup_steps and self.warmup_anchor_fraction is not None:
            return self.warmup_anchor_fraction
        share = self.anchor_fraction
        for first, value in self._changes:
            if first > step:
                break
            share = value
        return share

    def anchor_count(self, step: int) -> int:
        """Anchor groups of step ``step``: its share of the groups, rounded down or up so that the
        anchors of steps ``0..step`` stay within one group of the sum of their shares (where a
        fraction rounds up is set by a seeded offset), and at least ``min_anchor_groups``; none
        from ``anchor_steps`` on. A share that is a whole number of groups is that number on every
        step."""
        if self.anchor_steps is not None and step >= self.anchor_steps:
            return 0
        offset = _count_offset(self.seed)
        before, through = self._shared_groups(step), self._shared_groups(step + 1)
        count = math.floor(through + offset) - math.floor(before + offset)
        return min(self.groups_per_step, max(self.min_anchor_groups, count))

    def _shared_groups(self, steps: int) -> float:
        """The sum over steps ``0..steps-1`` of their anchor share times the groups of a step."""
        starts = sorted({0, min(self.warmup_steps, steps), *(min(first, steps) for first, _ in self._changes)})
        ends = [*starts[1:], steps]
        return math.fsum(self.fraction(start) * self.groups_per_step * (end - start)
                         for start, end in zip(starts, ends) if end > start)

    def streams(self, step: int) -> list[str]:
        """The stream of each of step ``step``'s groups, in order."""
        anchors = _anchor_positions(self.groups_per_step, self.anchor_count(step), self.seed, step)
        return ["anchor" if j in anchors else "world_model" for j in range(self.groups_per_step)]

    def stream(self, group_id: Hashable) -> str:
        if not isinstance(group_id, (int, np.integer)) or isinstance(group_id, bool) or group_id < 0:
            raise ConfigError(f"a step schedule's group ids are the ints of group_ids(step), got {group_id!r}")
        step, j = divmod(int(group_id), self.groups_per_step)
        return "anchor" if j in _anchor_positions(self.groups_per_step, self.anchor_count(step), self.seed,
                                                  step) else "world_model"

    def adapt(self, step: int, monotone_ok: bool, eta2: float) -> tuple[float, int]:
        """The adaptive-anchoring rule, after step ``step``'s collection: ``(share of the next
        step, reason)``, the reason a bitmask of the checks that failed (:data:`AUDIT_FAILED`,
        :data:`ETA2_ABOVE_BOUND`; 0: none). Without ``adaptive`` the share never moves.

        Raises:
            ConfigError: For a step before one whose share is already recorded.
        """
        if self._changes and step + 1 < self._changes[-1][0]:
            raise ConfigError(f"adapt() after step {step} would change the recorded share of step "
                              f"{self._changes[-1][0]}")
        bound = self.eta2_bound
        reason = (0 if monotone_ok else AUDIT_FAILED) | (
            ETA2_ABOVE_BOUND if bound is not None and math.isfinite(eta2) and eta2 > bound else 0)
        self._passes = 0 if reason else self._passes + 1
        if self.adaptive:
            current = self.fraction(max(step + 1, self.warmup_steps))  # the post-warmup share
            share = adapted_fraction(current, self.anchor_fraction, self.max_anchor_fraction, self._passes)
            if share != current:
                self._changes.append((step + 1, share))
        return self.fraction(step + 1), reason

    def state_dict(self) -> dict[str, Any]:
        """What :meth:`adapt` recorded (the configuration is the run's config)."""
        return {"changes": [[first, share] for first, share in self._changes], "passes": self._passes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._changes = [(int(first), float(share)) for first, share in state["changes"]]
        self._passes = int(state["passes"])


def adapted_fraction(current: float, floor: float, ceiling: float, passes: int) -> float:
    """The anchor share after a step, given the passing steps in a row up to it (0: it failed):
    doubled after a failing step, halved once the last :data:`_RECOVERY_STEPS` passed, kept in
    ``[floor, ceiling]``."""
    if passes == 0:
        return min(ceiling, current * 2.0)
    return max(floor, current / 2.0) if passes >= _RECOVERY_STEPS else current


def check_final_anchors(final_anchors: str) -> None:
    """Refuse an unknown ``final_anchors`` (:data:`FINAL_ANCHORS`)."""
    if final_anchors not in FINAL_ANCHORS:
        raise ConfigError(f"final_anchors must be one of {FINAL_ANCHORS}, got {final_anchors!r}")


def anchor_steps(steps: int, max_staleness: int, final_anchors: str) -> int | None:
    """How many of a run's first steps may have anchor groups: with ``final_anchors='skip'`` the last
    ``max_staleness`` steps have none (their real scores could reach only the run's last update, which
    would wait for their runs); otherwise every step (None), as under synchronous anchors
    (``max_staleness`` 0: no step to skip). Every trainer path asks this.

    Raises:
        ConfigError: An unknown ``final_anchors``, or 'skip' with a bound that leaves no step an
            anchor group.
    """
    check_final_anchors(final_anchors)
    if final_anchors == "land" or not max_staleness:
        return None
    if max_staleness >= steps:
        raise ConfigError(f"final_anchors 'skip' with max_staleness {max_staleness} leaves none of the {steps} "
                          "steps an anchor group: lower max_staleness or use 'land'")
    return steps - max_staleness


def check_adaptation(anchor_fraction: float, eta2_bound: float | None, max_anchor_fraction: float) -> None:
    """Raise :class:`ConfigError` unless the adaptive-anchoring settings are usable."""
    _check_fraction("max_anchor_fraction", max_anchor_fraction)
    if max_anchor_fraction < anchor_fraction:
        raise ConfigError(f"max_anchor_fraction ({max_anchor_fraction}) must be >= anchor_fraction "
                          f"({anchor_fraction})")
    if eta2_bound is not None and not (math.isfinite(eta2_bound) and eta2_bound > 0):
        raise ConfigError(f"eta2_bound must be None or a finite number > 0, got {eta2_bound}")


@lru_cache(maxsize=256)
def check_min_anchor_groups(min_anchor_groups: int, groups_per_step: int) -> None:
    """Raise :class:`ConfigError` unless ``0 <= min_anchor_groups <= groups_per_step``."""
    if isinstance(min_anchor_groups, bool) or not isinstance(min_anchor_groups, int) \
            or not 0 <= min_anchor_groups <= groups_per_step:
        raise ConfigError(f"min_anchor_groups must be an int in [0, groups per step = {groups_per_step}], "
                          f"got {min_anchor_groups!r}")


#: Mixed into the seed of :func:`systematic_draw`'s order and start.
_INFORMED_STREAM = 0x1F0A


def group_information(p_valid: Sequence[float | None], uncertainty: Sequence[float | None],
                      proved: Sequence[bool]) -> float:
    """What executing a group would teach: the mean over its samples of the world model's
    predictive variance of the reward, ``p (1 - p) + sd^2`` (validity as a Bernoulli on the
    reward's unit scale, plus the score head's own spread; a missing number counts as 0). A proved
    or reused outcome is exact and teaches nothing."""
    values = [0.0 if exact else (0.0 if p is None or not math.isfinite(p) else p * (1.0 - p))
              + (0.0 if exact or sd is None or not math.isfinite(sd) else sd * sd)
              for p, sd, exact in zip(p_valid, uncertainty, proved)]
    return float(np.mean(values)) if values else 0.0


def group_price(predicted_cpu_s: Sequence[float | None], proved: Sequence[bool]) -> float:
    """What executing a group would cost: the sum of its members' predicted CPU-seconds, an exact
    outcome without a price counting 0 (it is not run); NaN when another member has no price."""
    prices = [float(cpu) if cpu is not None else (0.0 if exact else math.nan)
              for cpu, exact in zip(predicted_cpu_s, proved)]
    return float(np.sum(prices)) if prices else 0.0


def priority_per_cost(information: Sequence[float], prices: Sequence[float]) -> np.ndarray:
    """``sqrt(information / price)``: the shape of the inclusion probabilities that minimise a
    Horvitz-Thompson estimate's variance for a given expected cost (Neyman's allocation with costs;
    the information is the group's predictive variance). The schedule keeps its budget a count of
    groups, so this sets only how that count is spread; it differs from the plain informed
    priority (the information itself) both in the price and in the square root. A group without
    a price, or with a price of 0 (every member exact), is priced at the median of the others, so
    it is neither free nor shut out."""
    info = np.asarray(information, dtype=float)
    price = np.asarray(prices, dtype=float)
    if info.shape != price.shape:
        raise ConfigError(f"{info.size} groups' information but {price.size} prices")
    if np.any(price < 0):
        raise ConfigError("a group's price must be >= 0")
    known = np.isfinite(price) & (price > 0)
    fallback = float(np.median(price[known])) if known.any() else 1.0
    return np.sqrt(info / np.where(known, price, fallback))


def inclusion_probabilities(information: Sequence[float], budget: float, floor_share: float) -> np.ndarray:
    """Each group's probability of being an anchor: ``min(1, floor + scale * information)``, the
    floor ``floor_share * budget / n`` and the scale set so that the probabilities sum to
    ``budget`` (expected anchor groups, at most ``n``). Equal information gives equal shares; a
    budget beyond what the informative groups can take leaves them certain and spreads the rest
    evenly over the others."""
    info = np.asarray(information, dtype=float)
    n = info.size
    if n == 0:
        return info
    if np.any(~np.isfinite(info) | (info < 0)):
        raise ConfigError("a group's information must be a finite number >= 0")
    if not 0.0 <= budget <= n:
        raise ConfigError(f"the anchor budget must lie in [0, {n}] groups, got {budget}")
    if budget >= n:
        return np.ones(n)
    if budget == 0:  # a step whose count rounded down to no anchor
        return np.zeros(n)
    floor = floor_share * budget / n
    if info.max() == 0:
        return np.full(n, budget / n)
    informative = info > 0
    if budget >= informative.sum() + floor * (~informative).sum():
        # Every informative group is certain and the rest share what is left (at least the floor).
        return np.where(informative, 1.0, (budget - informative.sum()) / max(1, (~informative).sum()))

    def total(scale: float) -> float:
        return float(np.minimum(1.0, floor + scale * info).sum())

    lo, hi = 0.0, 1.0
    while total(hi) < budget:
        hi *= 2.0
    for _ in range(100):  # bisection to float precision: total() is continuous and increasing
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) < budget else (lo, mid)
    return np.minimum(1.0, floor + hi * info)


def systematic_draw(probabilities: np.ndarray, seed: int, group_ids: Sequence[Hashable]) -> np.ndarray:
    """Systematic sampling: in an order drawn from ``(seed, group ids)``, group ``i`` is chosen when
    the running sum of probabilities passes a point of ``u + k`` (``u`` uniform in [0, 1), k integer).
    Each group is chosen with exactly its probability, and the batch chooses ``floor`` or ``ceil`` of
    their sum."""
    digest = hashlib.sha256(f"{seed}:{_INFORMED_STREAM}:{[repr(g) for g in group_ids]}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    order = rng.permutation(len(probabilities))
    start = rng.uniform()
    upper = np.cumsum(probabilities[order])
    lower = upper - probabilities[order]
    chosen_in_order = np.floor(upper - start) > np.floor(lower - start)
    chosen = np.zeros(len(probabilities), dtype=bool)
    chosen[order] = chosen_in_order
    return chosen


@dataclass
class InformedSchedule:
    """Anchors chosen by information (the module docstring): ``base`` sets how many, the world
    model's predictions which.

    Attributes:
        base: The hash or step schedule whose share (per batch, or per step with warmup and
            adaptation) is the budget.
        floor_share: Every group's inclusion probability is at least this share of the budget's
            mean (``floor_share * budget / groups``): no kind of group is left out, and no pair's
            weight exceeds ``groups / (floor_share * budget)``.
        per_cost: Weigh information against the group's predicted execution cost
            (:func:`priority_per_cost`); the budget stays a count of groups.
    """

    base: HashSchedule | StepSchedule
    floor_share: float = 0.25
    per_cost: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.base, (HashSchedule, StepSchedule)):
            raise ConfigError(f"an informed schedule's base is a hash or step schedule, got {type(self.base).__name__}")
        if not 0.0 < self.floor_share <= 1.0:
            raise ConfigError(f"floor_share must be in (0, 1], got {self.floor_share}")

    @property
    def seed(self) -> int:
        return self.base.seed

    def stream(self, group_id: Hashable) -> str:
        raise ConfigError("an informed schedule decides a group's stream from its scored members: score whole "
                          "groups through ScoringCore.score (the trainer's path), not one sample at a time")

    def budget(self, group_ids: Sequence[Hashable]) -> float:
        """Expected anchor groups among ``group_ids``: the hash share of them, or for a step
        schedule the anchor count of each step they belong to (its warmup and adaptation included),
        over the share of that step's groups present."""
        if isinstance(self.base, HashSchedule):
            return self.base.anchor_fraction * len(group_ids)
        steps: dict[int, int] = {}
        for group_id in group_ids:
            self.base.stream(group_id)  # validates the id
            step = int(group_id) // self.base.groups_per_step
            steps[step] = steps.get(step, 0) + 1
        n = self.base.groups_per_step
        return sum(present / n * self.base.anchor_count(step) for step, present in steps.items())

    def choose(self, group_ids: Sequence[Hashable], information: Sequence[float],
               prices: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(anchor?, inclusion probability)`` of each group, from its information (and, with
        ``per_cost``, its price: :func:`group_price`)."""
        if self.per_cost:
            if prices is None:
                raise ConfigError("an informed schedule per cost needs each group's price")
            information = priority_per_cost(information, prices)
        probabilities = inclusion_probabilities(information, self.budget(group_ids), self.floor_share)
        return systematic_draw(probabilities, self.seed, group_ids), probabilities

    def adapt(self, step: int, monotone_ok: bool, eta2: float) -> tuple[float, int]:
        """The base step schedule's adaptive rule (:meth:`StepSchedule.adapt`)."""
        if not isinstance(self.base, StepSchedule):
            raise ConfigError("adaptive anchoring needs a step schedule as the informed schedule's base")
        return self.base.adapt(step, monotone_ok, eta2)

    def state_dict(self) -> dict[str, Any] | None:
        return self.base.state_dict() if isinstance(self.base, StepSchedule) else None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if isinstance(self.base, StepSchedule):
            self.base.load_state_dict(state)


def _anchor_positions(n: int, count: int, seed: int, step: int) -> frozenset[int]:
    rng = np.random.default_rng([seed, step, _ANCHOR_STREAM])
    return frozenset(rng.choice(n, size=count, replace=False).tolist())


@lru_cache(maxsize=64)
def _count_offset(seed: int) -> float:
    """Where a step schedule's fractional counts round up (:meth:`StepSchedule.anchor_count`)."""
    return float(np.random.default_rng([seed, _ANCHOR_STREAM]).uniform())


def check_stream(stream: str) -> str:
    """``stream`` if it is a known stream name, else a :class:`ConfigError`."""
    if stream not in STREAMS:
        raise ConfigError(f"stream must be one of {STREAMS}, got {stream!r}")
    return stream
