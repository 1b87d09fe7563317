"""One calibrator for a whole Ray job: a named actor holding a real Calibrator, and its client.

A process-wide calibrator (:mod:`wmrl_envs.scoring.calibrators`) splits into copies once
scoring runs in several processes (Ray workers, verl's reward actors). Here the one
:class:`~wmrl_envs.calibration.Calibrator` lives in a named actor; every process that holds a
:class:`RemoteCalibrator` feeds and reads that one::

    ray.init()
    calibrator = RemoteCalibrator(calibrator_actor())        # get-or-create "wmrl-calibrator"
    core = ScoringCore(schedule, calibrator, scorer=CodeScorer(executor="ray"))
    # the core pickles with its RemoteCalibrator: in a Ray task or actor it feeds the same actor

The client forwards every call with ``ray.get`` and adds no logic; the calibrator's own
errors (e.g. :class:`~wmrl_envs.errors.ConfigError`) reach the caller as that type.
"""

from __future__ import annotations

import functools
from typing import Any

from wmrl_envs.calibration import AuditReport, Calibrator, CalibratorConfig
from wmrl_envs.errors import ConfigError, MissingDependencyError

DEFAULT_NAME = "wmrl-calibrator"
_METHODS = frozenset({"add_pairs", "calibrate", "audit", "metrics", "state_dict", "load_state_dict", "to_json"})
_PROPERTIES = frozenset({"n_pairs", "eta2", "eta2_in_sample", "task_prior_pairs", "config"})


class CalibratorHolder:
    """The actor's body: one Calibrator, reached only through the forwarded names."""

    def __init__(self, config: CalibratorConfig | None = None) -> None:
        self.calibrator = Calibrator(config)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name not in _METHODS:
            raise AttributeError(f"Calibrator method {name!r} is not forwarded")
        return getattr(self.calibrator, name)(*args, **kwargs)

    def get(self, name: str) -> Any:
        if name not in _PROPERTIES:
            raise AttributeError(f"Calibrator property {name!r} is not forwarded")
        return getattr(self.calibrator, name)


def _ray():
    from wmrl_envs.sandbox.ray_executor import require_ray

    return require_ray("the calibrator actor", MissingDependencyError)


@functools.cache
def _actor_class():
    # num_cpus=0: the actor must never take a CPU that a sandboxed run is waiting for.
    return _ray().remote(num_cpus=0)(CalibratorHolder)


def calibrator_actor(name: str = DEFAULT_NAME, config: CalibratorConfig | None = None,
                     namespace: str | None = None) -> Any:
    """The named calibrator actor (an ActorHandle), created with ``config`` if none exists yet.

    ``namespace`` None is the caller's Ray namespace (shared by a job's driver and workers);
    drivers of different jobs share one actor by naming the same namespace. The actor lives as
    long as the process that created it. Raises :class:`ConfigError` when ``config`` differs
    from the existing actor's, and :class:`MissingDependencyError` without an initialised Ray.
    """
    ray = _ray()
    handle = _actor_class().options(name=name, namespace=namespace, get_if_exists=True).remote(config)
    if config is not None:
        existing = ray.get(handle.get.remote("config"))
        if existing != config:
            raise ConfigError(f"calibrator actor {name!r} already exists with a different config: {existing}")
    return handle


class RemoteCalibrator:
    """The :class:`~wmrl_envs.calibration.Calibrator` interface, forwarded to a calibrator actor.

    Picklable (it carries the actor handle), so a :class:`~wmrl_envs.scoring.core.ScoringCore`
    holding it travels to Ray workers and keeps feeding the same calibrator.
    """

    #: Not a process-wide calibrator: a pickled core carries this client itself, not a key.
    shared_key = None

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return _ray().get(self.handle.call.remote(name, *args, **kwargs))

    def _get(self, name: str) -> Any:
        return _ray().get(self.handle.get.remote(name))

    # The methods take the Calibrator's own arguments, forwarded as given.
    def add_pairs(self, *args: Any, **kwargs: Any) -> None:
        self._call("add_pairs", *args, **kwargs)

    def calibrate(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("calibrate", *args, **kwargs)

    def audit(self) -> AuditReport:
        return self._call("audit")

    def metrics(self) -> dict[str, float]:
        return self._call("metrics")

    def state_dict(self) -> dict[str, Any]:
        return self._call("state_dict")

    def load_state_dict(self, state: Any) -> None:
        self._call("load_state_dict", state)

    def to_json(self) -> str:
        return self._call("to_json")

    @property
    def n_pairs(self) -> int:
        return self._get("n_pairs")

    @property
    def eta2(self) -> float:
        return self._get("eta2")

    @property
    def eta2_in_sample(self) -> float:
        return self._get("eta2_in_sample")

    @property
    def task_prior_pairs(self) -> float:
        return self._get("task_prior_pairs")

    @property
    def config(self) -> CalibratorConfig:
        return self._get("config")
