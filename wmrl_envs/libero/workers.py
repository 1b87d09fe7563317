"""Simulation workers: the LIBERO-Long episodes of an update, fanned out over processes or a Ray cluster.

::

    pool = SimulationPool(workers=2, backend="local", env_options={"obs_mode": "state"})
    pool.ship(payload)                 # the policy: once per update, cached by version
    results = pool.run(jobs)           # one JobResult per job, in the jobs' order
    pool.close()

* **Workers.** A worker is a process (``"local"``: multiprocessing with ``spawn``, so a child
  imports this checkout afresh and inherits no MuJoCo, EGL or torch state), a Ray actor
  (``"ray"``: one CPU each, on any node of an initialised cluster), or the calling process
  itself (``"inline"``: one worker, no pickling). Each holds one
  :class:`~wmrl_envs.libero.env.LiberoLongEnv`, built on its first job. The env keeps its
  simulator while the task stays the same (a rebuild costs 2-14 s and about 1.5 GB), so an
  idle worker is handed the next job of the task it holds before the next job in order.
* **Jobs** are picklable objects with ``task_index`` and ``run(worker) -> output``: a training
  episode of a VLA policy (``agents.vla.remote.SampledEpisode``) or an evaluation episode
  (:class:`~wmrl_envs.libero.pooled_eval.EvalEpisode`). A job's output depends only on the job
  and the shipped policy, never on the worker that runs it or on what that worker ran before:
  a job carries its own seed, and a reset is bit-identical to a fresh build (:mod:`.sim`). So
  one worker and two give the same episodes.
* **The policy** travels as a *payload*: ``blob`` (bytes) and ``build() -> policy``. The pool
  numbers each distinct payload by its content and sends it to a worker only when that worker
  holds another version, so it crosses to each worker once per update (on Ray, ``ray.put``
  stores it once and each node fetches it once). A worker builds it once per version.
* **Crashes and hangs.** A worker that dies (killed, out of memory, a fault in the simulator)
  loses the job it was running; so does one that runs a job longer than ``episode_timeout_s``
  (a simulator stuck in a contact solve, a deadlocked renderer), which the pool kills; the clock
  runs from the hand-over, so it covers a new worker's start-up and a simulator build. That job
  comes back as an infrastructure failure (``infra_failure=True``, no output), which callers
  count as neither a success nor a failure. The pool starts a replacement worker and the run
  goes on. (An ``inline`` worker is the calling process: it can neither die alone nor be
  stopped.) A job that *raises* is a bug, not a crash: the run lets the jobs in flight finish,
  then raises :class:`~wmrl_envs.errors.SimulationWorkerError` with the worker's traceback.
* **Cost.** Each result carries the CPU and wall seconds its worker spent on the job (its own
  process time), so the compute ledger charges what the workers used, lost jobs included: a
  local worker's CPU is read from ``/proc`` when the job starts and when it is stopped, or, for
  one that died, from its whole-life usage once reaped; a worker's first job also carries the
  rest of its start-up. (A lost job on Ray is charged its wall time only: the actor's process
  is on another node.)
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import pickle
import resource
import signal
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from wmrl_envs.calibration import Calibrator
from wmrl_envs.errors import ConfigError, SimulationWorkerError
from wmrl_envs.scoring import ScoringCore
from wmrl_envs.scoring.results import bounded

BACKENDS = ("inline", "local", "ray")
#: The longest an episode may run on a worker before the pool stops it. A state-input episode takes
#: 2-4 s on one core and a camera one about 30 times that, so only a hung simulator reaches it.
DEFAULT_EPISODE_TIMEOUT_S = 900.0
#: Variables a local worker starts with: one compute thread each, since a pool of N workers on N
#: cores gains nothing from more and loses much to contention (tests/conftest.py).
_WORKER_ENVIRON = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


class Payload(Protocol):
    """A shipped policy: its bytes (what is sent and what the version is computed from) and how a
    worker turns them into the object its jobs use."""

    blob: bytes

    def build(self) -> Any: ...


class Job(Protocol):
    """One episode to run on a worker."""

    task_index: int

    def run(self, worker: Worker) -> Any: ...


@dataclass
class JobResult:
    """What one job gave: its output, or an infrastructure failure (its worker died).

    Attributes:
        output: What ``job.run`` returned (None on an infrastructure failure).
        cpu_s: CPU seconds of the worker process on the job (0 when it died).
        wall_s: Wall seconds of the job in the worker (0 when it died).
        infra_failure: The worker died while running the job: no result, not a score.
        error: Why, on an infrastructure failure.
    """

    output: Any = None
    cpu_s: float = 0.0
    wall_s: float = 0.0
    infra_failure: bool = False
    error: str | None = None


class _OneStream:
    """The anchor schedule of a worker's env for one episode: its group is on ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def stream(self, group_id: Any) -> str:
        return self.name


class Worker:
    """What one worker holds: one env (one simulator) and the policy of the last version shipped.

    Args:
        env_options: :class:`~wmrl_envs.libero.env.LiberoLongEnv` keywords (``obs_mode``,
            ``max_steps``, ``wm_horizon``, ``reward_model``, ...), except ``reward``.
    """

    def __init__(self, env_options: dict[str, Any] | None = None) -> None:
        self.env_options = dict(env_options or {})
        if "reward" in self.env_options:
            raise ConfigError("a worker's env takes each episode's stream from its job, not a reward option")
        self._env: Any = None
        self.version: int | None = None
        self._payload: Payload | None = None
        self._policy: Any = None

    @property
    def env(self):
        """The worker's env (built on first use)."""
        if self._env is None:
            from wmrl_envs.libero.env import LiberoLongEnv  # noqa: PLC0415 - keeps the LIBERO env out of wmrl --help (wmrl_config reads a constant here)

            self._env = LiberoLongEnv(reward="fused", **self.env_options)
        return self._env

    def env_for(self, stream: str):
        """The env, set to run its next episode on ``stream`` (``"real"``, ``"world_model"`` or
        ``"anchor"``). Its scoring core is a new one for that episode alone: a job returns the raw
        scores (the real success, the success model's prediction), and the driver's core turns the
        whole update's into rewards in one batch, so a worker never calibrates or weights."""
        env = self.env
        env.core = ScoringCore(_OneStream(stream), Calibrator())
        return env

    @property
    def policy(self) -> Any:
        """The shipped policy, built once per version."""
        if self._policy is None:
            if self._payload is None:
                raise ConfigError("no policy was shipped to this worker: call SimulationPool.ship() first")
            self._policy = self._payload.build()
        return self._policy

    def receive(self, version: int, payload: Payload) -> None:
        """Keep the payload of ``version`` (built when a job first asks for the policy)."""
        if version != self.version:
            self.version, self._payload, self._policy = version, payload, None

    def execute(self, job: Job) -> tuple:
        """``("done", output, cpu_s, wall_s)``, or ``("error", traceback)`` when the job raised."""
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            output = job.run(self)
        except Exception:  # whatever the job's code raised goes to the driver, which raises it typed
            return ("error", traceback.format_exc())
        return ("done", output, time.process_time() - cpu, time.perf_counter() - wall)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def _limit_threads() -> None:
    """One torch thread in a worker (the environment variables above cover the BLAS libraries)."""
    try:
        import torch  # noqa: PLC0415 - torch is the optional [torch] extra; a scripted evaluation runs without it
    except ImportError:  # a scripted evaluation needs no torch
        return
    torch.set_num_threads(1)


def _serve(conn: Connection, env_options: dict[str, Any]) -> None:
    """A local worker's loop: messages are pickled bytes, so tensors travel as plain bytes
    (torch's multiprocessing pickler would pass file descriptors of shared memory instead)."""
    _limit_threads()
    worker = Worker(env_options)
    try:
        while True:
            try:
                message = pickle.loads(conn.recv_bytes())
            except EOFError:  # the driver is gone
                return
            if message[0] == "payload":
                worker.receive(message[1], message[2])
            elif message[0] == "job":
                conn.send_bytes(pickle.dumps(worker.execute(message[1])))
            else:  # "close"
                return
    finally:
        worker.close()


# ---------------------------------------------------------------------- backends
class _Slot:
    """One worker as the driver sees it: its handle, the version and task it holds, its job."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.version: int | None = None
        self.task: int | None = None
        self.job: int | None = None
        self.outcome: Any = None  # inline: the result of the job just run; ray: the pending reference
        self.started = 0.0  # time.monotonic() when the job was handed over
        self.cpu_at_start: float | None = None  # the worker's CPU seconds then (None: unknown)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` while a child process starts (spawn copies it then)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process so far, from ``/proc`` (None where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _death(pid: int, exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            how = f"signal {signal.Signals(-exitcode).name}"
        except ValueError:  # a signal without a name (real-time signals)
            how = f"signal {-exitcode}"
    else:
        how = f"exit code {exitcode}"
    return f"simulation worker (pid {pid}) died ({how}) while running this episode: infrastructure failure (not a score)"


class _LocalProcess:
    def __init__(self, process: Any, conn: Connection) -> None:
        self.process, self.conn = process, conn
        self.lifetime_cpu_s: float | None = None  # once it died and was reaped here: its whole-life CPU

    def reap(self) -> None:
        """Wait for the dead process, keeping the CPU it used (the driver's children's usage grows
        by exactly that when it is reaped)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.process.join(timeout=5)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if self.process.exitcode is not None:
            self.lifetime_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    @property
    def pid(self) -> int:
        return int(self.process.pid)


class _Local:
    """Worker processes on this machine, one pipe each."""

    def __init__(self, env_options: dict[str, Any]) -> None:
        self.env_options = env_options
        self.context = multiprocessing.get_context("spawn")

    def start(self, n: int) -> list[_LocalProcess]:
        handles = []
        for _ in range(n):
            parent, child = self.context.Pipe()
            process = self.context.Process(target=_serve, args=(child, self.env_options), daemon=True,
                                           name="wmrl-simulation-worker")
            with _environ(_WORKER_ENVIRON):
                process.start()
            child.close()
            handles.append(_LocalProcess(process, parent))
        return handles

    def submit(self, slot: _Slot, job: Job, shipment: tuple[int, Payload] | None) -> str | None:
        """Send the job (after the payload); the death message if the worker is already gone."""
        handle = slot.handle
        try:
            if shipment is not None:
                handle.conn.send_bytes(pickle.dumps(("payload", *shipment)))
            handle.conn.send_bytes(pickle.dumps(("job", job)))
        except (BrokenPipeError, ConnectionResetError):
            handle.reap()
            return _death(handle.pid, handle.process.exitcode)
        return None

    def wait(self, busy: list[_Slot], timeout: float | None) -> list[tuple[_Slot, tuple | None, str | None]]:
        """Block until some busy worker answers or dies, at most ``timeout`` seconds (then nothing):
        ``(slot, message, None)`` or ``(slot, None, death)``."""
        by_object: dict[Any, _Slot] = {}
        for slot in busy:
            by_object[slot.handle.conn] = slot
            by_object[slot.handle.process.sentinel] = slot
        done: dict[_Slot, tuple[tuple | None, str | None]] = {}
        for ready in wait(list(by_object), timeout):
            slot = by_object[ready]
            if slot in done:
                continue
            handle = slot.handle
            try:
                if handle.conn.poll():  # an answer sent just before a death still counts
                    done[slot] = (pickle.loads(handle.conn.recv_bytes()), None)
                    continue
            except (EOFError, ConnectionResetError):
                pass
            handle.reap()
            done[slot] = (None, _death(handle.pid, handle.process.exitcode))
        return [(slot, message, death) for slot, (message, death) in done.items()]

    def alive(self, handle: _LocalProcess) -> bool:
        return handle.process.is_alive()

    def cpu_s(self, handle: _LocalProcess) -> float | None:
        return handle.lifetime_cpu_s if handle.lifetime_cpu_s is not None else _process_cpu_s(handle.pid)

    def kill(self, handle: _LocalProcess) -> None:
        handle.process.kill()
        handle.reap()

    def stop(self, handle: _LocalProcess) -> None:
        try:
            handle.conn.send_bytes(pickle.dumps(("close",)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        handle.process.join(timeout=30)
        if handle.process.is_alive():
            handle.process.kill()
            handle.process.join()
        handle.conn.close()


class _Inline:
    """The calling process as the one worker (no crash to survive: a death here ends the driver)."""

    def __init__(self, env_options: dict[str, Any]) -> None:
        self.env_options = env_options

    def start(self, n: int) -> list[Worker]:
        return [Worker(self.env_options) for _ in range(n)]

    def submit(self, slot: _Slot, job: Job, shipment: tuple[int, Payload] | None) -> None:
        if shipment is not None:
            slot.handle.receive(*shipment)
        slot.outcome = slot.handle.execute(job)

    def wait(self, busy: list[_Slot], timeout: float | None) -> list[tuple[_Slot, tuple | None, str | None]]:
        return [(slot, slot.outcome, None) for slot in busy]  # already run: nothing to wait for or stop

    def alive(self, handle: Worker) -> bool:
        return True

    def cpu_s(self, handle: Worker) -> float | None:
        return None

    def kill(self, handle: Worker) -> None:
        raise AssertionError("an inline job has finished before the pool looks at it")

    def stop(self, handle: Worker) -> None:
        handle.close()


class _Actor:
    """A Ray actor around a :class:`Worker` (made remote by :class:`_Ray`)."""

    def __init__(self, env_options: dict[str, Any]) -> None:
        _limit_threads()
        self.worker = Worker(env_options)

    def pid(self) -> int:
        return os.getpid()

    def receive(self, version: int, payload: Payload) -> None:
        self.worker.receive(version, payload)

    def execute(self, job: Job) -> tuple:
        return self.worker.execute(job)


@dataclass
class _RayActor:
    actor: Any
    pid: int


def _require_ray():
    """Ray, initialised: joins the cluster ``RAY_ADDRESS`` names when the caller has not called
    ``ray.init()``; never starts a cluster of its own, which would share nothing with the user's."""
    from wmrl_envs.sandbox.ray_executor import require_ray  # noqa: PLC0415 - keeps the Ray executor out of wmrl --help (wmrl_config reads a constant here)

    try:
        import ray  # noqa: PLC0415 - ray is the optional [ray] extra
    except ImportError:
        return require_ray("the Ray simulation pool", ConfigError)  # raises, saying how to install it
    if not ray.is_initialized() and os.environ.get("RAY_ADDRESS"):
        ray.init()
    return require_ray("the Ray simulation pool (set RAY_ADDRESS to join a cluster)", ConfigError)


class _Ray:
    """One Ray actor per worker, one CPU each; the payload is put in the object store once per version."""

    def __init__(self, env_options: dict[str, Any]) -> None:
        self.ray = _require_ray()
        self.env_options = env_options
        self.actor_class = self.ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        self._put: tuple[int, Any] | None = None

    def start(self, n: int) -> list[_RayActor]:
        actors = [self.actor_class.remote(self.env_options) for _ in range(n)]
        pids = self.ray.get([a.pid.remote() for a in actors])
        return [_RayActor(a, pid) for a, pid in zip(actors, pids)]

    def submit(self, slot: _Slot, job: Job, shipment: tuple[int, Payload] | None) -> None:
        actor = slot.handle.actor
        if shipment is not None:
            version, payload = shipment
            if self._put is None or self._put[0] != version:
                self._put = (version, self.ray.put(payload))
            actor.receive.remote(version, self._put[1])  # an actor runs its calls in order: before the job
        slot.outcome = actor.execute.remote(job)

    def wait(self, busy: list[_Slot], timeout: float | None) -> list[tuple[_Slot, tuple | None, str | None]]:
        from ray.exceptions import ActorUnavailableError, RayActorError  # noqa: PLC0415 - ray is the optional [ray] extra

        by_ref = {slot.outcome: slot for slot in busy}
        ready, _ = self.ray.wait(list(by_ref), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            slot = by_ref[ref]
            try:
                out.append((slot, self.ray.get(ref), None))
            except (RayActorError, ActorUnavailableError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                out.append((slot, None, bounded(f"simulation worker (Ray actor, pid {slot.handle.pid}) died while "
                                                f"running this episode: infrastructure failure (not a score): "
                                                f"{type(exc).__name__}: {first}")))
        return out

    def alive(self, handle: _RayActor) -> bool:
        return True  # a dead actor shows when its next call fails: that job is then an infrastructure failure

    def cpu_s(self, handle: _RayActor) -> float | None:
        return None  # the actor's process may be on another node

    def kill(self, handle: _RayActor) -> None:
        self.ray.kill(handle.actor)

    def stop(self, handle: _RayActor) -> None:
        self.ray.kill(handle.actor)


# ---------------------------------------------------------------------- the pool
class SimulationPool:
    """Runs LIBERO episode jobs on ``workers`` workers (see the module docstring).

    Args:
        workers: How many workers, each with its own simulator.
        backend: ``"local"`` (processes), ``"ray"`` (actors; ``ray.init()`` first, or set
            ``RAY_ADDRESS``) or ``"inline"`` (this process; one worker).
        env_options: Keywords of every worker's :class:`~wmrl_envs.libero.env.LiberoLongEnv`.
        episode_timeout_s: Seconds a job may run on a worker before the pool stops the worker and
            counts the job as an infrastructure failure (not enforced ``inline``).
    """

    def __init__(self, workers: int = 1, backend: str = "local", env_options: dict[str, Any] | None = None,
                 episode_timeout_s: float = DEFAULT_EPISODE_TIMEOUT_S) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if not episode_timeout_s > 0:
            raise ConfigError(f"episode_timeout_s must be > 0, got {episode_timeout_s}")
        self.episode_timeout_s = float(episode_timeout_s)
        if workers < 1 or (backend == "inline" and workers != 1):
            raise ConfigError(f"need workers >= 1 (exactly 1 inline), got {workers} for backend {backend!r}")
        self.backend_name = backend
        self.env_options = dict(env_options or {})
        if "reward" in self.env_options:
            raise ConfigError("a worker's env takes each episode's stream from its job, not a reward option")
        from wmrl_envs.libero.env import LiberoEnvConfig  # noqa: PLC0415 - keeps the LIBERO env out of wmrl --help (wmrl_config reads a constant here)

        LiberoEnvConfig(**self.env_options)  # a bad option is the caller's error here, not a worker's traceback later
        self._backend = {"inline": _Inline, "local": _Local, "ray": _Ray}[backend](self.env_options)
        self._slots = [_Slot(h) for h in self._backend.start(workers)]
        self._version = 0
        self._digest: bytes | None = None
        self._payload: Payload | None = None
        self.replaced = 0

    @property
    def workers(self) -> int:
        return len(self._slots)

    def ship(self, payload: Payload) -> int:
        """Make ``payload`` the policy of later jobs; returns its version (unchanged for the same bytes)."""
        digest = hashlib.blake2b(payload.blob, digest_size=16).digest()
        if digest != self._digest:
            self._version += 1
            self._digest, self._payload = digest, payload
        return self._version

    def run(self, jobs: Sequence[Job]) -> list[JobResult]:
        """Run every job once; results in the jobs' order (infrastructure failures included)."""
        if self._payload is None and jobs:
            raise ConfigError("ship a policy before running jobs")
        results: list[JobResult | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))
        failure: str | None = None
        while pending or any(s.job is not None for s in self._slots):
            if failure is None:
                for slot in (s for s in self._slots if s.job is None):
                    if not pending:
                        break
                    self._start(slot, jobs, pending, results)
            else:
                pending.clear()  # a job raised: finish what runs, start nothing new
            busy = [s for s in self._slots if s.job is not None]
            if not busy:
                continue
            first_deadline = min(s.started for s in busy) + self.episode_timeout_s
            for slot, message, death in self._backend.wait(busy, max(first_deadline - time.monotonic(), 0.0)):
                index, slot.job = slot.job, None
                if death is not None:
                    results[index] = JobResult(cpu_s=self._lost_cpu_s(slot), wall_s=time.monotonic() - slot.started,
                                               infra_failure=True, error=death)
                    self._replace(slot)
                elif message[0] == "error":
                    failure = failure or message[1]
                else:
                    _, output, cpu_s, wall_s = message
                    results[index] = JobResult(output, cpu_s, wall_s)
            for slot in busy:
                if slot.job is not None and time.monotonic() - slot.started >= self.episode_timeout_s:
                    index, slot.job = slot.job, None
                    results[index] = self._stop_overdue(slot)
        if failure is not None:
            raise SimulationWorkerError(bounded(f"an episode raised in a simulation worker:\n{failure}", 4000))
        return [r for r in results if r is not None]

    def _start(self, slot: _Slot, jobs: Sequence[Job], pending: list[int], results: list[JobResult | None]) -> None:
        """Hand ``slot`` the next job of the task it holds, else the next in order."""
        index = next((i for i in pending if jobs[i].task_index == slot.task), pending[0])
        pending.remove(index)
        if not self._backend.alive(slot.handle):
            self._replace(slot)
        shipment = (self._version, self._payload) if slot.version != self._version else None
        death = self._backend.submit(slot, jobs[index], shipment)
        if death is not None:  # it died while idle: this job never ran, and is lost like any other
            results[index] = JobResult(infra_failure=True, error=death)
            self._replace(slot)
            return
        slot.version, slot.task, slot.job = self._version, jobs[index].task_index, index
        slot.started, slot.cpu_at_start = time.monotonic(), self._backend.cpu_s(slot.handle)

    def _lost_cpu_s(self, slot: _Slot) -> float:
        """CPU seconds the worker spent on the job it lost (0 where either reading is unknown)."""
        now = self._backend.cpu_s(slot.handle)
        return max(now - slot.cpu_at_start, 0.0) if now is not None and slot.cpu_at_start is not None else 0.0

    def _stop_overdue(self, slot: _Slot) -> JobResult:
        """Stop a worker whose job ran past the timeout: the job is lost, charged what it used."""
        pid, wall = slot.handle.pid, time.monotonic() - slot.started
        cpu = self._lost_cpu_s(slot)  # read before the kill: a Ray actor's is unknown anyway
        self._backend.kill(slot.handle)
        self._replace(slot)
        return JobResult(cpu_s=cpu, wall_s=wall, infra_failure=True,
                         error=f"simulation worker (pid {pid}) ran this episode for {wall:.0f} s, more than the "
                               f"{self.episode_timeout_s:g} s allowed: stopped; infrastructure failure (not a score)")

    def _replace(self, slot: _Slot) -> None:
        self._backend.stop(slot.handle)
        [slot.handle] = self._backend.start(1)
        slot.version = slot.task = None
        self.replaced += 1

    def pids(self) -> list[int]:
        """The process id of every worker (this process for ``inline``)."""
        return [os.getpid() if self.backend_name == "inline" else s.handle.pid for s in self._slots]

    def busy_pids(self) -> list[int]:
        """The process ids of the workers running a job now (for monitoring, from another thread)."""
        return [pid for pid, s in zip(self.pids(), list(self._slots)) if s.job is not None]

    def close(self) -> None:
        for slot in self._slots:
            self._backend.stop(slot.handle)
        self._slots = []

    def __enter__(self) -> SimulationPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
