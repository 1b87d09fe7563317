"""One calibrator and one experience for a whole Ray job: a named actor holding both, and their clients.

A process-wide calibrator (:mod:`wmrl_envs.scoring.calibrators`), like a scorer's own
:class:`~wmrl_envs.scoring.experience.Experience`, splits into copies once scoring runs in
several processes (Ray workers, verl's reward actors). Here the one
:class:`~wmrl_envs.calibration.Calibrator` and the one Experience (executed outcomes, neighbour
residuals) live in a named actor; every process that holds a :class:`RemoteCalibrator` and a
:class:`RemoteExperience` feeds and reads those, and each reuses and is corrected by the anchors
any of them executed::

    ray.init()
    actor = calibrator_actor()                                # get-or-create "wmrl-calibrator"
    scorer = CodeScorer(executor="ray", experience=RemoteExperience(actor))
    core = ScoringCore(schedule, RemoteCalibrator(actor), scorer=scorer)
    # the core pickles with its clients: in a Ray task or actor it feeds the same actor

The clients forward every call with ``ray.get``, the experience's a scoring batch at a time (one
round trip for its lookups, one for its neighbour corrections, one for its executed samples); the
calibrator's own errors (e.g. :class:`~wmrl_envs.errors.CalibrationDataError`) reach the caller as
that type. What survives which fault:

* **The actor's process dies** (killed, out of memory, its worker crashed): Ray restarts it, up
  to :data:`MAX_RESTARTS` times, from the state it saved after its last change (a file in the Ray
  session folder of its node: the calibrator's and the experience's), and resends the calls in
  flight; a resent change is applied once. Nothing is lost. A restart on another node finds no
  saved state and counts as the next case.
* **It cannot be restarted** (restarts used up, its node lost, ``ray.kill``, its owner exited):
  each client goes on without it, with a warning logged once. World-model scores are
  calibrated by the last map it saw; ``n_pairs``, ``eta2``, ``metrics()`` and ``audit()`` answer
  their last values; a calibrator change or ``state_dict()`` raises
  :class:`~wmrl_envs.errors.CalibratorLostError`, which makes the batch's anchors infrastructure
  failures in :meth:`~wmrl_envs.scoring.core.ScoringCore.fuse` (not scores, never pairs). The
  experience answers that it has none (no reuse, no neighbour correction: the world model
  predicts, as before any anchor ran) and drops what executions would record; its
  ``state_dict()`` and ``load_state_dict()`` raise CalibratorLostError. No reward is taken from
  a stale copy.
* **Asking for the actor again** after such a loss (:func:`calibrator_actor`) creates a new, empty
  one, and logs that the state of the lost one (its pair count, its executed codes) was reset.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from wmrl_envs.calibration import AuditReport, CalibrationMap, Calibrator, CalibratorConfig
from wmrl_envs.errors import CalibratorLostError, ConfigError, MissingDependencyError
from wmrl_envs.sandbox.ray_executor import require_ray
from wmrl_envs.scoring.experience import ExecutedOutcome, Experience
from wmrl_envs.scoring.results import ScoreResult, bounded

log = logging.getLogger(__name__)

DEFAULT_NAME = "wmrl-calibrator"
#: How often Ray restarts a dead calibrator actor before it stays dead (a crash loop ends).
MAX_RESTARTS = 5
_READS = frozenset({"audit", "metrics", "state_dict", "to_json"})
_CHANGES = frozenset({"add_pairs", "load_state_dict"})
_PROPERTIES = frozenset({"n_pairs", "eta2", "eta2_in_sample", "task_prior_pairs", "config"})
# Changes remembered by token, so that one Ray resends after a restart is not applied twice;
# far more than the calls in flight at once (one per client).
_TOKENS = 256
_EXPERIENCE_READS = frozenset({"__len__", "lookup", "corrections", "state_dict"})
_EXPERIENCE_CHANGES = frozenset({"record", "load_state_dict"})
# What a client keeps answering from its last read once the actor is lost (not state_dict: a
# checkpoint must not be a stale copy taken for the current state).
_LAST_READ = frozenset({"audit", "metrics"}) | _PROPERTIES


class CalibratorHolder:
    """The actor's body: one Calibrator and one Experience, reached only through the forwarded
    names, their state saved after every change so that a restarted actor resumes it."""

    def __init__(self, config: CalibratorConfig | None = None) -> None:
        import ray  # noqa: PLC0415 - ray is the optional [ray] extra

        context = ray.get_runtime_context()
        self.calibrator = Calibrator(config)
        self.experience = Experience()
        # Changes applied (the experience's too: at worst a client fetches an unchanged map again):
        # a client's copy of the map is current while this is.
        self.version = 0
        self._tokens: deque[str] = deque(maxlen=_TOKENS)
        self._id = context.get_actor_id()
        self._path = (Path(context.get_temp_dir()) / context.get_session_name() / "wmrl-calibrators"
                      / f"{quote(context.namespace, safe='')}.{quote(context.get_actor_name(), safe='')}.json")
        saved = json.loads(self._path.read_text()) if self._path.is_file() else None
        self.reset_note: str | None = None
        if context.was_current_actor_reconstructed:
            if saved is None or saved["actor_id"] != self._id:
                raise CalibratorLostError(f"restarted without its saved state ({self._path} is not this actor's)")
            self.calibrator.load_state_dict(saved["state"])
            self.experience.load_state_dict(saved["experience"])
            self.version = saved["version"]
            self._tokens.extend(saved["tokens"])
            return
        if saved is not None:  # the file of an actor of this name, earlier in this Ray session
            self.reset_note = (f"calibrator actor {context.get_actor_name()!r} is a new, empty actor: the one "
                               f"before it is gone, and its state ({len(saved['state']['wm_scores'])} pairs) "
                               "was reset, with its experience (executed codes: "
                               f"{len(saved['experience']['experience']['outcomes'])})")
        self._save()

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        partial = self._path.with_suffix(".partial")
        partial.write_text(json.dumps({"actor_id": self._id, "version": self.version, "tokens": list(self._tokens),
                                       "state": self.calibrator.state_dict(),
                                       "experience": self.experience.state_dict()}))
        os.replace(partial, self._path)  # a crash mid-write leaves the last whole state

    def describe(self) -> tuple[CalibratorConfig, str | None]:
        """The calibrator's config, and whether this actor replaced a lost one (why its state is empty)."""
        return self.calibrator.config, self.reset_note

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name not in _READS:
            raise AttributeError(f"Calibrator method {name!r} is not forwarded")
        return getattr(self.calibrator, name)(*args, **kwargs)

    def change(self, token: str, name: str, *args: Any, **kwargs: Any) -> None:
        """Apply a change to the calibrator once per ``token`` and save the state before answering."""
        if name not in _CHANGES:
            raise AttributeError(f"Calibrator method {name!r} is not forwarded")
        self._apply(token, getattr(self.calibrator, name), *args, **kwargs)

    def read_experience(self, name: str, *args: Any) -> Any:
        if name not in _EXPERIENCE_READS:
            raise AttributeError(f"Experience method {name!r} is not forwarded")
        return getattr(self.experience, name)(*args)

    def change_experience(self, token: str, name: str, *args: Any) -> None:
        """Apply a change to the experience once per ``token`` and save the state before answering."""
        if name not in _EXPERIENCE_CHANGES:
            raise AttributeError(f"Experience method {name!r} is not forwarded")
        self._apply(token, getattr(self.experience, name), *args)

    def _apply(self, token: str, method: Any, *args: Any, **kwargs: Any) -> None:
        if token in self._tokens:  # applied and saved before a restart; Ray resent it
            return
        method(*args, **kwargs)
        self.version += 1
        self._tokens.append(token)
        self._save()

    def calibrate(self, seen: int | None, *args: Any, **kwargs: Any) -> tuple[Any, tuple[int, CalibrationMap] | None]:
        """Calibrated scores, and the current map with its version unless the caller has it (``seen``)."""
        values = self.calibrator.calibrate(*args, **kwargs)
        return values, None if seen == self.version else (self.version, self.calibrator.current_map())

    def get(self, name: str) -> Any:
        if name not in _PROPERTIES:
            raise AttributeError(f"Calibrator property {name!r} is not forwarded")
        return getattr(self.calibrator, name)


def _ray():
    return require_ray("the calibrator actor", MissingDependencyError)


@functools.cache
def _actor_class():
    # num_cpus=0: the actor must never take a CPU that a sandboxed run is waiting for.
    # max_task_retries=-1: calls in flight when it dies are resent to the restarted actor.
    return _ray().remote(num_cpus=0, max_restarts=MAX_RESTARTS, max_task_retries=-1)(CalibratorHolder)


def calibrator_actor(name: str = DEFAULT_NAME, config: CalibratorConfig | None = None,
                     namespace: str | None = None) -> Any:
    """The named calibrator actor (an ActorHandle), created with ``config`` if none exists yet.

    ``namespace`` None is the caller's Ray namespace (shared by a job's driver and workers);
    drivers of different jobs share one actor by naming the same namespace. The actor lives as
    long as the process that created it. A new actor that replaces a lost one of the same name in
    this Ray session logs that the state was reset. Raises :class:`ConfigError` when ``config``
    differs from the existing actor's, and :class:`MissingDependencyError` without an initialised Ray.
    """
    ray = _ray()
    handle = _actor_class().options(name=name, namespace=namespace, get_if_exists=True).remote(
        config)
    existing, reset_note = ray.get(handle.describe.remote())
    if reset_note is not None:
        log.warning(reset_note)
    if config is not None and existing != config:
        raise ConfigError(f"calibrator actor {name!r} already exists with a different config: {existing}")
    return handle


class _ActorClient:
    """Calls to a calibrator actor. Picklable (it carries the actor handle), so a scoring core
    holding its clients travels to Ray workers and keeps reaching the same actor."""

    #: What this client does once the actor is lost, said in the warning it logs once.
    when_lost = ""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._lost: str | None = None

    def _remote(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``handle.method(*args, **kwargs)``; :class:`CalibratorLostError` once Ray cannot restart the actor."""
        ray = _ray()
        try:
            return ray.get(getattr(self.handle, method).remote(*args, **kwargs))
        except ray.exceptions.ActorDiedError as exc:
            if self._lost is None:
                self._lost = bounded(str(exc).strip().splitlines()[0], 300)
                log.warning("the calibrator actor is gone and Ray could not restart it (%s): %s", self._lost,
                            self.when_lost)
            raise CalibratorLostError(f"the calibrator actor is gone and could not be restarted ({self._lost})") from exc


class RemoteCalibrator(_ActorClient):
    """The :class:`~wmrl_envs.calibration.Calibrator` interface, forwarded to a calibrator actor.

    It keeps the last map and values it saw, which it answers with once the actor is lost
    (module docstring).
    """

    #: Not a process-wide calibrator: a pickled core carries this client itself, not a key.
    shared_key = None
    when_lost = ("this process calibrates world-model scores by the last map it saw, anchor batches are "
                 "infrastructure failures")

    def __init__(self, handle: Any) -> None:
        super().__init__(handle)
        self._last: dict[str, Any] = {}
        # (version, map): the actor's current map, which calibrates should it be lost before any use.
        self._map: tuple[int, CalibrationMap] = self._remote("calibrate", None, [])[1]

    def _read(self, method: str, name: str) -> Any:
        try:
            value = self._remote(method, name)
        except CalibratorLostError:
            if name in self._last:
                return self._last[name]
            raise
        if name in _LAST_READ:
            self._last[name] = value
        return value

    def _change(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._remote("change", uuid.uuid4().hex, name, *args, **kwargs)

    # The methods take the Calibrator's own arguments, forwarded as given.
    def add_pairs(self, *args: Any, **kwargs: Any) -> None:
        self._change("add_pairs", *args, **kwargs)

    def calibrate(self, wm_scores: Any, task_ids: Any = None, strata: Any = None) -> Any:
        seen, last_map = self._map
        try:
            values, current = self._remote("calibrate", seen, wm_scores, task_ids, strata)
        except CalibratorLostError:
            return last_map.calibrate(wm_scores, task_ids, strata)
        if current is not None:
            self._map = current
        return values

    def audit(self) -> AuditReport:
        return self._read("call", "audit")

    def metrics(self) -> dict[str, float]:
        return self._read("call", "metrics")

    def state_dict(self) -> dict[str, Any]:
        return self._read("call", "state_dict")

    def load_state_dict(self, state: Any) -> None:
        self._change("load_state_dict", state)

    def to_json(self) -> str:
        return self._read("call", "to_json")

    @property
    def n_pairs(self) -> int:
        return self._read("get", "n_pairs")

    @property
    def eta2(self) -> float:
        return self._read("get", "eta2")

    @property
    def eta2_in_sample(self) -> float:
        return self._read("get", "eta2_in_sample")

    @property
    def task_prior_pairs(self) -> float:
        return self._read("get", "task_prior_pairs")

    @property
    def config(self) -> CalibratorConfig:
        return self._read("get", "config")


class RemoteExperience(_ActorClient):
    """The :class:`~wmrl_envs.scoring.experience.Experience` interface, forwarded to the one a
    calibrator actor holds: ``CodeScorer(experience=RemoteExperience(handle))`` in every process.

    Once the actor is lost (module docstring) it answers that there is no experience and drops
    records; a checkpoint (``state_dict``) or a resume (``load_state_dict``) raises
    :class:`CalibratorLostError`.
    """

    when_lost = ("this process's world-model samples get no experience (no reuse, no neighbour correction: "
                 "the world model predicts), and its executions are not recorded")

    def __len__(self) -> int:
        try:
            return self._remote("read_experience", "__len__")
        except CalibratorLostError:
            return 0

    def lookup(self, scripts: Sequence[tuple[str, str]]) -> list[ExecutedOutcome | None]:
        try:
            return self._remote("read_experience", "lookup", list(scripts))
        except CalibratorLostError:
            return [None] * len(scripts)

    def corrections(self, predictions: Sequence[tuple[str, str]]) -> list[tuple[float, int]]:
        try:
            return self._remote("read_experience", "corrections", list(predictions))
        except CalibratorLostError:
            return [(0.0, 0)] * len(predictions)

    def record(self, executed: Sequence[tuple[str, str, ScoreResult, float | None]]) -> None:
        try:
            self._remote("change_experience", uuid.uuid4().hex, "record", list(executed))
        except CalibratorLostError:
            return  # dropped, as the warning logged once said

    def state_dict(self) -> dict[str, Any]:
        return self._remote("read_experience", "state_dict")

    def load_state_dict(self, state: Any) -> None:
        self._remote("change_experience", uuid.uuid4().hex, "load_state_dict", state)
