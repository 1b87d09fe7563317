"""The simulation pool's machinery with real worker processes and jobs that build no simulator:
dispatch, payload versions, a job that raises, and workers that die (SIGKILL, for real)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import pytest

from wmrl_envs.errors import ConfigError, SimulationWorkerError
from wmrl_envs.libero.workers import DEFAULT_EPISODE_TIMEOUT_S, SimulationPool


@dataclass(frozen=True)
class Blob:
    """A payload whose policy is its own bytes, decoded."""

    blob: bytes

    def build(self) -> str:
        return self.blob.decode()


@dataclass(frozen=True)
class Echo:
    """Returns the worker's pid, the policy it holds and the version it was sent."""

    task_index: int
    tag: int = 0

    def run(self, worker):
        return os.getpid(), worker.policy, worker.version, self.tag


@dataclass(frozen=True)
class Clock:
    """When the job ran, in the worker."""

    task_index: int

    def run(self, worker):
        return time.perf_counter_ns(), self.task_index


@dataclass(frozen=True)
class Raise:
    task_index: int = 0

    def run(self, worker):
        raise RuntimeError("the episode's own bug")


@dataclass(frozen=True)
class Die:
    """Kills its own worker: the crash a segfaulting simulator or the OOM killer gives."""

    task_index: int = 0

    def run(self, worker):
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class BurnThenDie:
    """Spends ``cpu_s`` of CPU, then kills its own worker: the lost job's CPU was still spent."""

    cpu_s: float
    task_index: int = 0

    def run(self, worker):
        start = time.process_time()
        while time.process_time() - start < self.cpu_s:
            pass
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Hang:
    """Never returns: a simulator stuck in a contact solve."""

    task_index: int = 0

    def run(self, worker):
        time.sleep(3600)


@pytest.fixture(scope="module")
def pool():
    with SimulationPool(workers=2, backend="local") as pool:
        yield pool


def test_bad_pools_are_config_errors():
    with pytest.raises(ConfigError, match="backend"):
        SimulationPool(backend="threads")
    with pytest.raises(ConfigError, match="exactly 1 inline"):
        SimulationPool(workers=2, backend="inline")
    with pytest.raises(ConfigError, match="wm_horizon must be in"):
        SimulationPool(env_options={"max_steps": 20})  # checked here, before any worker starts
    with pytest.raises(ConfigError, match="not a reward option"):
        SimulationPool(backend="inline", env_options={"reward": "real"})
    with pytest.raises(ConfigError, match="ship a policy"):
        SimulationPool(backend="inline").run([Echo(0)])
    with pytest.raises(ConfigError, match="episode_timeout_s must be > 0"):
        SimulationPool(backend="inline", episode_timeout_s=0)


def test_jobs_spread_over_the_workers_and_the_policy_is_sent_once_per_version(pool):
    assert pool.ship(Blob(b"v1")) == pool.ship(Blob(b"v1")) == 1  # the same bytes: the same version
    results = pool.run([Echo(task, tag) for task, tag in [(0, 0), (1, 1), (0, 2), (1, 3), (0, 4), (1, 5)]])
    assert [r.output[3] for r in results] == list(range(6))  # results in the jobs' order
    assert {r.output[0] for r in results} == set(pool.pids()) and os.getpid() not in pool.pids()
    assert {r.output[1:3] for r in results} == {("v1", 1)}
    assert all(not r.infra_failure and r.cpu_s >= 0 and r.wall_s > 0 for r in results)
    assert pool.ship(Blob(b"v2")) == 2
    assert {r.output[1:3] for r in pool.run([Echo(0), Echo(1)])} == {("v2", 2)}


def test_a_worker_runs_the_jobs_of_the_task_it_holds_first():
    with SimulationPool(backend="inline") as inline:
        inline.ship(Blob(b"v"))
        results = inline.run([Clock(task) for task in [2, 5, 2, 5, 2, 7]])
    assert [task for _, task in sorted(r.output for r in results)] == [2, 2, 2, 5, 5, 7]  # two simulator rebuilds, not five


def test_a_job_that_raises_is_a_typed_error_and_the_pool_goes_on(pool):
    pool.ship(Blob(b"v3"))
    with pytest.raises(SimulationWorkerError, match="the episode's own bug") as raised:
        pool.run([Echo(0), Raise(), Echo(0)])
    assert "RuntimeError" in str(raised.value)
    assert [r.output[1] for r in pool.run([Echo(0), Echo(1)])] == ["v3", "v3"]


def test_a_worker_that_dies_loses_its_job_only_and_is_replaced(pool):
    pool.ship(Blob(b"v4"))
    before, replaced = set(pool.pids()), pool.replaced
    results = pool.run([Echo(0, 0), Die(), Echo(0, 2), Echo(0, 3)])
    lost = results[1]
    assert lost.infra_failure and lost.output is None
    assert "died (signal SIGKILL)" in lost.error and "infrastructure failure (not a score)" in lost.error
    assert [r.output[3] for r in results if not r.infra_failure] == [0, 2, 3]
    assert pool.replaced == replaced + 1 and len(set(pool.pids()) - before) == 1
    # The replacement gets the policy before its first job, and the next run is whole.
    assert [r.output[1:3] for r in pool.run([Echo(1), Echo(1), Echo(1)])] == [("v4", 4)] * 3


def test_a_worker_killed_while_idle_is_replaced_before_it_gets_a_job(pool):
    pool.ship(Blob(b"v5"))
    victim = pool.pids()[0]
    os.kill(victim, signal.SIGKILL)
    # Dead before the run starts: waitid with WNOWAIT sees the exit and leaves the child for the pool to reap.
    os.waitid(os.P_PID, victim, os.WEXITED | os.WNOWAIT)
    results = pool.run([Echo(0), Echo(0)])
    assert [r.error for r in results] == [None, None] and victim not in pool.pids()


def test_a_lost_job_is_charged_the_cpu_its_worker_spent_on_it(pool):
    pool.ship(Blob(b"v6"))
    pool.run([Echo(0), Echo(1)])  # both workers up (see below)
    lost = pool.run([BurnThenDie(cpu_s=0.3), Echo(1)])[0]
    assert lost.infra_failure and "died (signal SIGKILL)" in lost.error
    # Read from the worker's whole-life usage once reaped, less what it had used before the job.
    assert 0.28 <= lost.cpu_s < 1 and lost.wall_s >= lost.cpu_s - 0.05


def test_a_job_past_the_timeout_is_stopped_as_an_infrastructure_failure_and_the_pool_goes_on():
    # The clock runs from the hand-over, a worker's start-up included, and on a loaded machine a
    # start-up (importing torch) can pass any short limit. So both workers start under the default
    # limit, and the short one holds only while they are warm.
    with SimulationPool(workers=2, backend="local") as short:
        short.ship(Blob(b"v"))
        assert not any(r.infra_failure for r in short.run([Echo(0), Echo(1)]))
        short.episode_timeout_s = 8.0
        replaced, before = short.replaced, set(short.pids())
        results = short.run([Echo(0, 0), Hang(), Echo(0, 2)])
        stuck = results[1]
        assert stuck.infra_failure and stuck.output is None
        assert "more than the 8 s allowed: stopped; infrastructure failure (not a score)" in stuck.error
        assert stuck.wall_s >= 8 and 0 <= stuck.cpu_s < 1  # it slept: waiting is not charged as CPU
        assert [r.output[3] for r in results if not r.infra_failure] == [0, 2]
        assert short.replaced == replaced + 1 and len(set(short.pids()) - before) == 1
        short.episode_timeout_s = DEFAULT_EPISODE_TIMEOUT_S  # the replacement starts under the default
        assert all(not r.infra_failure for r in short.run([Echo(0), Echo(1)]))
