"""Agent code on a Ray cluster: each run is the bubblewrap executor inside a Ray task.

::

    ray.init()                                   # or ray.init(address="auto") on a cluster
    executor = make_executor("ray")              # RayExecutor; kwargs go to the node's bwrap
    executor.prewarm()                           # build the runtime venv on every node now
    result = executor.run(script, task)          # -> ExecutionResult, graded on the driver

What travels, and what does not:

* **to the node**: the script, the limits, and a handle to the task's public files (their
  content hash and an object-store reference to a tar of them). The task itself, its folder
  and its private answers never leave the driver. Each distinct set of public files is packed
  once per executor (cached by content hash) and unpacked once per node, into a node-local
  cache keyed by the hash.
* **back to the driver**: the result fields and the submission's *bytes* (at most
  ``limits.file_mb``, or ``max_submission_mb``), never a node-local path. The driver writes
  them to a local file and sets ``submission_path`` there, so grading happens on the driver
  exactly as with a local executor.

The wall-clock limit is enforced inside the sandbox, as locally. Ray adds a backstop: a task
still running ``cancel_grace_s`` after the wall-clock limit is cancelled with
``ray.cancel(force=True)``. A crashed worker, a lost object, a failure in this module's task
code and a cancellation all come back as ``INFRA_ERROR`` results (never scores, never raised).
The run folder a crashed worker leaves on its node is removed when that node next builds an
executor (:func:`~wmrl_envs.sandbox.sweep.sweep_run_dirs`), as a killed driver's received
submissions are by the next ``RayExecutor`` on its host.
Each run holds one Ray CPU (``num_cpus=1``), so ``ray.init(num_cpus=2)`` runs at most two at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from wmrl_envs.errors import SandboxUnavailableError, WMRLError
from wmrl_envs.paths import wmrl_home
from wmrl_envs.sandbox.base import ExecutionResult, ExecutionStatus
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.runtime import ensure_runtime
from wmrl_envs.sandbox.sweep import owned_prefix, sweep_run_dirs

#: What a node's task yields once the sandbox is about to start: from here the run's
#: wall-clock limit (plus the grace) bounds the wait; before it, set-up and Ray's queue do.
STARTED = "started"
# Longest Ray error text an infrastructure result quotes (characters).
_MAX_ERROR_CHARS = 2000

#: The executors a node can run, by ``make_executor`` name (imported on the node, on first use;
#: named here rather than through ``make_executor`` so that this module and the package
#: ``wmrl_envs.sandbox``, which registers it, do not import each other).
NODE_EXECUTORS = {
    "bwrap": ("wmrl_envs.sandbox.bwrap", "BwrapExecutor"),
    "warm": ("wmrl_envs.sandbox.warm", "WarmExecutor"),
    "auto": ("wmrl_envs.sandbox.auto", "AutoExecutor"),
    "unsafe-subprocess": ("wmrl_envs.sandbox.unsafe", "UnsafeSubprocessExecutor"),
}
# Per worker process: the executors this node built, keyed by their spec (bwrap probes once).
_NODE_EXECUTORS: dict[tuple, Any] = {}


def require_ray(feature: str = "the Ray executor", error: type[WMRLError] = SandboxUnavailableError):
    """The ``ray`` module, once it is installed and initialised in this process.

    Raises ``error`` with how to fix it otherwise: Ray must not start a cluster of its own
    behind the caller's back, since a second cluster shares nothing with the first.
    """
    try:
        import ray  # noqa: PLC0415 - ray is the optional [ray] extra
    except ImportError as exc:
        raise error(f"{feature} needs Ray: pip install 'wmrl[ray]'") from exc
    if not ray.is_initialized():
        raise error(f"{feature} needs a running Ray: call ray.init() (or ray.init(address=...)) first")
    return ray


@dataclass(frozen=True)
class PublicFiles:
    """A handle to one task's public files: their content hash and the tar in the object store."""

    digest: str
    ref: Any  # ray.ObjectRef of the tar bytes; nested in this object, so Ray does not fetch it eagerly


@dataclass(frozen=True)
class _NodeSpec:
    """What a node needs to build its executor and place files (no task data)."""

    executor: str
    executor_kwargs: tuple[tuple[str, Any], ...]
    cache_dir: Path | None
    max_submission_mb: int | None


class RayExecutor:
    """Runs each script through a node-local executor (bwrap by default) in a Ray task.

    Args:
        executor: The executor each node runs (``"bwrap"``, ``"warm"``, which keeps a preloaded
            zygote in each Ray worker process that runs scripts, ``"auto"``, warm where its
            zygote starts on the node and bwrap elsewhere, or ``"unsafe-subprocess"``).
        max_submission_mb: Largest submission shipped back; a bigger one is the script's scored
            ``ERROR`` (default: ``limits.file_mb``, which the sandbox already enforces).
        cancel_grace_s: How long past the wall-clock limit a task may run before it is
            cancelled (the sandbox's own kill needs a few seconds).
        queue_timeout_s: How long a run may wait for a free CPU and its node's set-up (None:
            no bound; a cold node first builds the runtime venv, see :meth:`prewarm`).
        cache_dir: The node-local cache of unpacked public files (default:
            ``wmrl_home()/"ray-public"`` on each node).
        submission_root: Where the driver writes received submissions (default: temp dir).
        **executor_kwargs: Passed to the node's executor (``runtime``, ``work_root``, ...).

    Raises :class:`SandboxUnavailableError` when Ray is not installed or not initialised.
    Results keep the node executor's ``enforced`` record; their ``executor`` is ``"ray"``.
    """

    name = "ray"

    def __init__(self, executor: str = "bwrap", *, max_submission_mb: int | None = None,
                 cancel_grace_s: float = 30.0, queue_timeout_s: float | None = None,
                 cache_dir: Path | None = None, submission_root: Path | None = None,
                 **executor_kwargs: Any) -> None:
        if executor not in NODE_EXECUTORS:
            raise SandboxUnavailableError(f"a Ray node cannot run executor {executor!r}; choose one of "
                                          f"{sorted(NODE_EXECUTORS)}")
        ray = require_ray()
        self._spec = _NodeSpec(executor, tuple(sorted(executor_kwargs.items())),
                               Path(cache_dir) if cache_dir is not None else None, max_submission_mb)
        self.cancel_grace_s = cancel_grace_s
        self.queue_timeout_s = queue_timeout_s
        self.submission_root = Path(submission_root) if submission_root is not None else None
        # Received submissions of a killed driver; each node's executor sweeps its own work root.
        sweep_run_dirs(self.submission_root or Path(tempfile.gettempdir()))
        # max_retries=0: a retried run would restart its wall clock unseen, and an
        # infrastructure failure costs one dropped sample, not a wrong score.
        self._task = ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")(_run_on_node)
        self._prewarm_task = ray.remote(num_cpus=1, max_retries=0)(_prewarm_node)
        self._digests: dict[tuple, str] = {}  # (folder, file stats) -> content hash
        self._shipped: dict[str, Any] = {}  # content hash -> ObjectRef of the tar (kept alive here)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ public API
    def run(self, script: str, task: Any, limits: Limits | None = None) -> ExecutionResult:
        """Run ``script`` against ``task``'s public files on a Ray node; never raises for Ray failures."""
        limits = limits if limits is not None else task.limits
        try:
            ray = require_ray()
            public = self.public_files(Path(task.public_dir))
        except (SandboxUnavailableError, OSError, tarfile.TarError) as exc:
            return self._infra(f"could not ship the task's public files: {exc}")
        try:
            stream = self._task.remote(script, limits, public, self._spec)
            first = self._next(ray, stream, self.queue_timeout_s, "waiting for a CPU and the node's set-up")
            if first != STARTED:  # the node's set-up failed and reported why
                return self._received(first)
            return self._received(self._next(ray, stream, limits.wall_s + self.cancel_grace_s,
                                             f"past the wall-clock limit of {limits.wall_s:g} s"))
        except ray.exceptions.RayError as exc:
            return self._infra(f"the Ray task failed ({_ray_error_text(exc)})")
        except StopIteration:
            return self._infra("the Ray task ended without a result")

    def public_files(self, public_dir: Path) -> PublicFiles:
        """The handle of ``public_dir``'s files, packed and put in the object store once per content."""
        ray = require_ray()
        signature = (str(public_dir.resolve()), tuple(_file_stats(public_dir)))
        with self._lock:
            digest = self._digests.get(signature)
            if digest is not None:
                return PublicFiles(digest, self._shipped[digest])
        data = pack_public_files(public_dir)
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            if digest not in self._shipped:
                self._shipped[digest] = ray.put(data)
            self._digests[signature] = digest
            return PublicFiles(digest, self._shipped[digest])

    def prewarm(self, tasks: Any = ()) -> dict[str, float]:
        """Build the runtime venv and this executor on every alive node, and unpack ``tasks``' public files.

        A cold node otherwise spends its first run (about 75 s here) building the venv.
        Returns the seconds each node spent, by node id. Raises
        :class:`SandboxUnavailableError` when a node fails to prepare.
        """
        ray = require_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - ray is the optional [ray] extra

        handles = [self.public_files(Path(t.public_dir)) for t in tasks]
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= 1]
        refs = {node: self._prewarm_task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(self._spec, handles)
            for node in nodes}
        seconds = {}
        for node, ref in refs.items():
            try:
                seconds[node] = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise SandboxUnavailableError(f"node {node} could not prepare: {_ray_error_text(exc)}") from exc
        return seconds

    # ------------------------------------------------------------------ internals
    def _next(self, ray, stream, timeout: float | None, waiting_for: str) -> Any:
        ready, _ = ray.wait([stream], timeout=timeout)
        if not ready:
            ray.cancel(stream, force=True)  # the backstop: the worker and its sandbox are killed
            return {"status": ExecutionStatus.INFRA_ERROR.value,
                    "error": f"the Ray task was cancelled after {timeout:g} s {waiting_for}", "submission": None}
        return ray.get(next(stream))

    def _received(self, fields: dict[str, Any]) -> ExecutionResult:
        fields = dict(fields)
        data = fields.pop("submission")
        status = ExecutionStatus(fields.pop("status"))
        path = None
        if data is not None:
            try:
                folder = Path(tempfile.mkdtemp(prefix=owned_prefix(), dir=self.submission_root))
                path = folder / "submission.csv"
                path.write_bytes(data)
            except OSError as exc:
                return self._infra(f"could not write the received submission on the driver: {exc}")
        return ExecutionResult(status=status, submission_path=path, **fields, executor=self.name)

    def _infra(self, message: str) -> ExecutionResult:
        return ExecutionResult(status=ExecutionStatus.INFRA_ERROR, error=message, executor=self.name)


def prewarm(tasks: Any = (), **executor_kwargs: Any) -> dict[str, float]:
    """Prepare every alive node for runs of ``RayExecutor(**executor_kwargs)`` (see :meth:`RayExecutor.prewarm`)."""
    return RayExecutor(**executor_kwargs).prewarm(tasks)


def pack_public_files(public_dir: Path) -> bytes:
    """A deterministic tar of ``public_dir``: sorted, no owners or times, readable modes.

    Symlinks are kept as links (never followed, so a link into ``private/`` ships no content);
    one that points outside the folder is refused when a node unpacks it.
    """
    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        if not info.issym():
            info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644  # the sandbox runs as nobody
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(public_dir, arcname=".", recursive=True, filter=normalise)
    return buffer.getvalue()


def _file_stats(root: Path) -> list[tuple[str, int, int, int]]:
    """Every entry's relative path, size, mtime and mode: a cheap key for the content hash."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out.append((os.path.relpath(path, root), st.st_size, st.st_mtime_ns, st.st_mode))
    return out


def _ray_error_text(exc: BaseException) -> str:
    """``Name: message`` of a Ray error, unwrapped to its cause and cut to a bounded length."""
    cause = getattr(exc, "cause", None) or exc
    text = f"{type(cause).__name__}: {cause}".strip()
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + " [...]"


# ---------------------------------------------------------------------- on the node
def _node_executor(spec: _NodeSpec):
    key = (spec.executor, spec.executor_kwargs)
    if key not in _NODE_EXECUTORS:
        module, cls = NODE_EXECUTORS[spec.executor]
        _NODE_EXECUTORS[key] = getattr(importlib.import_module(module), cls)(**dict(spec.executor_kwargs))
    return _NODE_EXECUTORS[key]


def _node_public_dir(public: PublicFiles, spec: _NodeSpec) -> Path:
    """The node-local folder of ``public``'s files, unpacked on first use (once per node)."""
    root = spec.cache_dir if spec.cache_dir is not None else wmrl_home() / "ray-public"
    final = root / public.digest
    if final.is_dir():  # complete folders only ever appear by rename
        return final
    import ray  # noqa: PLC0415 - ray is the optional [ray] extra

    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{public.digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other workers of this node may unpack the same files
        if not final.is_dir():
            data = ray.get(public.ref)
            if hashlib.sha256(data).hexdigest() != public.digest:
                raise SandboxUnavailableError(f"the public files received do not match their hash {public.digest}")
            partial = Path(tempfile.mkdtemp(prefix=f".{public.digest[:16]}-", dir=root))
            try:
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    tar.extractall(partial, filter="data")  # refuses absolute paths and links leaving the folder
                partial.chmod(0o755)
                partial.rename(final)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
    return final


def _run_on_node(script: str, limits: Limits, public: PublicFiles, spec: _NodeSpec):
    """The Ray task: yields :data:`STARTED` and then the result fields (or set-up failure fields)."""
    try:
        executor = _node_executor(spec)
        public_dir = _node_public_dir(public, spec)
    except (WMRLError, OSError, tarfile.TarError) as exc:
        yield _fields(ExecutionResult(ExecutionStatus.INFRA_ERROR, error=f"node set-up failed: {exc}"), spec, limits)
        return
    yield STARTED
    yield _fields(executor.run(script, SimpleNamespace(public_dir=public_dir, limits=limits), limits), spec, limits)


def _prewarm_node(spec: _NodeSpec, handles: list[PublicFiles]) -> float:
    """The prewarm task: the runtime venv, the node's executor and the given public files."""
    start = time.monotonic()
    ensure_runtime(dict(spec.executor_kwargs).get("runtime"))
    executor = _node_executor(spec)
    if hasattr(executor, "start"):  # a warm executor: its zygote preloads now, not in the first run
        executor.start()
    for public in handles:
        _node_public_dir(public, spec)
    return time.monotonic() - start


def _fields(result: ExecutionResult, spec: _NodeSpec, limits: Limits) -> dict[str, Any]:
    """The result as plain fields plus the submission's bytes; the node's copy is deleted."""
    fields = {k: v for k, v in asdict(result).items() if k not in ("submission_path", "executor")}
    fields["status"] = result.status.value
    fields["submission"] = None
    try:
        if result.submission_path is not None:
            bound_mb = spec.max_submission_mb if spec.max_submission_mb is not None else limits.file_mb
            size = result.submission_path.stat().st_size
            if size > bound_mb << 20:  # the script's doing: a scored failure, never an unscored one
                fields["status"] = ExecutionStatus.ERROR.value
                fields["error"] = (f"submission.csv is {size:,} bytes, over the {bound_mb} MB the Ray "
                                   "executor ships back (max_submission_mb)")
            else:
                fields["submission"] = result.submission_path.read_bytes()
    finally:
        result.cleanup()
    return fields
