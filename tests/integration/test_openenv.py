"""``wmrl serve``: a real OpenEnv 0.10 server (a subprocess on 127.0.0.1) and OpenEnv's own client.

Two sessions step at once, in two threads, against one fused server whose calibrator they share.
The server's rewards must equal those of one in-process env (its own fresh calibrator) replaying
the same episodes in the order the server fused them: ``metadata["calibrator_pairs"]`` orders
the anchors, and a world-model step comes after the anchors it saw. Executed scores come from
separate sandbox runs of the same scripts, so scores are compared to 1e-9 absolute; streams and
pair counts exactly. Bad actions must get a short error, and the server must go on serving.
The example client runs against a server; DSBench, the refused env ids and a missing OpenEnv are
checked in process.
"""

from __future__ import annotations

import json
import os
import runpy
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from wmrl_envs.calibration import Calibrator
from wmrl_envs.mle import MLEDojoEnv
from wmrl_envs.scoring import HashSchedule

openenv = pytest.importorskip("openenv", reason="the openenv extra: pip install 'wmrl[openenv]'")

pytestmark = pytest.mark.openenv

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "environments" / "wmrl_code"  # the OpenEnv Space package
OPENENV = Path(sys.executable).with_name("openenv")
TASK = "chemical-process-yield"  # the smallest train task: an anchor's run takes well under a second
ANCHOR_FRACTION, ANCHOR_SEED = 0.5, 7
ATOL = 1e-9
# Per session: anchors, then world-model groups; the calibrator's map starts at 20 pairs.
ANCHORS_PER_SESSION, WM_PER_SESSION = 12, 8
MESSAGE_TIMEOUT_S = 600  # a step waits for its sandbox run; on a loaded machine that can take long
FEATURES = ("bio_material_01", "bio_material_03", "man_proc_04", "bio_material_05", "man_proc_10",
            "bio_material_09", "man_proc_22", "man_proc_28")


def response(group: int) -> str:
    """A quick pure-Python script: a least-squares fit on one feature. The feature sets the real
    score, the number of helper functions the world model's score."""
    feature, helpers = FEATURES[group % len(FEATURES)], group % 5
    pad = "".join(f"\ndef helper_{i}(v):\n    for _ in range({i}):\n        v = v\n    return v\n"
                  for i in range(helpers))
    return f'''A one-feature least-squares fit on `{feature}`.

```python
import csv
{pad}
FEATURE = "{feature}"

def value(row, default):
    return float(row[FEATURE]) if row[FEATURE] not in ("", "NA") else default

train = list(csv.DictReader(open("data/train.csv")))
pairs = [(float(r[FEATURE]), float(r["yield"])) for r in train if r[FEATURE] not in ("", "NA")]
mx = sum(x for x, _ in pairs) / len(pairs)
my = sum(y for _, y in pairs) / len(pairs)
slope = sum((x - mx) * (y - my) for x, y in pairs) / (sum((x - mx) ** 2 for x, _ in pairs) or 1.0)
with open("submission.csv", "w") as out:
    out.write("id,yield\\n")
    for row in csv.DictReader(open("data/test.csv")):
        out.write(f"{{row['id']}},{{my + slope * (value(row, mx) - mx)}}\\n")
```
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


def post(url: str, body: dict) -> tuple[int, str]:
    """POST ``body`` as JSON: the status and the answer's ``detail`` (its text when it has none)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=MESSAGE_TIMEOUT_S) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        try:
            return error.code, json.loads(text)["detail"]
        except (ValueError, KeyError, TypeError):
            return error.code, text


class Server:
    """``python -m trainers.cli serve ...`` on a free loopback port; :meth:`stop` always ends it."""

    def __init__(self, log_dir: Path, *args: str, space: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out, self.err = log_dir / "serve.out", log_dir / "serve.err"
        env = {**os.environ, "OMP_NUM_THREADS": "1", **(space or {})}
        if space is None:
            argv, cwd = ["-m", "trainers.cli", "serve", "--port", str(self.port), "--max-sessions", "3",
                         "--tasks", TASK, "--workers", "1", *args], REPO
        else:  # the OpenEnv Space package's app, configured by its WMRL_* variables, from its own folder
            argv, cwd = ["-m", "uvicorn", "server.app:app", "--port", str(self.port)], SPACE
            env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])  # this checkout's wmrl
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env, stdout=out, stderr=err)

    def wait_ready(self, deadline_s: float = 300.0) -> None:
        # Poll /health until the server answers; a server that exits or never answers fails the test.
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"wmrl serve exited with {self.proc.returncode}: {self.err.read_text()[-2000:]}")
            try:
                if get_json(self.url + "/health")["status"] == "healthy":
                    return
            except OSError:
                time.sleep(0.2)
        pytest.fail(f"wmrl serve did not answer within {deadline_s:.0f}s: {self.err.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def calibrator(self) -> dict:
        return get_json(self.url + "/wmrl/calibrator")

    def client(self):
        return openenv.GenericEnvClient(base_url=self.url, message_timeout_s=MESSAGE_TIMEOUT_S).sync()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two fused servers, started together: ``parity`` for the parity test alone (its calibrator
    must have no other test's pairs), ``shared`` for the others."""
    started = {}
    try:
        for name in ("parity", "shared"):
            started[name] = Server(tmp_path_factory.mktemp(name), "--reward", "fused", "--anchor-fraction",
                                   str(ANCHOR_FRACTION), "--anchor-seed", str(ANCHOR_SEED), "--fusion-rule", "eta2")
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


def plans() -> list[tuple[list[int], list[int]]]:
    """Two sessions' group ids in two phases: anchors with a few world-model groups among them,
    then (once both sessions finished the first) world-model groups only."""
    schedule = HashSchedule(ANCHOR_FRACTION, ANCHOR_SEED)
    anchors = [g for g in range(400) if schedule.stream(g) == "anchor"][:2 * ANCHORS_PER_SESSION]
    others = [g for g in range(400) if schedule.stream(g) == "world_model"][:2 * WM_PER_SESSION]
    out = []
    for s in range(2):
        mine, wm = anchors[s::2], others[s::2]
        out.append(([*mine[:4], wm[0], *mine[4:8], wm[1], *mine[8:]], wm[2:]))
    return out


def run_session(server: Server, phases: tuple[list[int], list[int]], barrier: threading.Barrier) -> list[dict]:
    records = []
    try:
        with server.client() as env:
            for phase, groups in enumerate(phases):
                if phase:
                    barrier.wait()  # so the second phase's world-model steps meet a fitted map
                for g in groups:
                    reset = env.reset(seed=g, task_id=TASK, group_id=g)
                    assert reset.metadata["group_id"] == g and reset.observation["text"].startswith("# Task:")
                    step = env.step({"response": response(g)})
                    records.append({"group": g, "reward": step.reward, "done": step.done, "info": step.metadata})
    except BaseException:
        barrier.abort()  # the other session must not wait for this one
        raise
    return records


def test_two_concurrent_sessions_share_one_calibrator_and_match_an_in_process_env(servers):
    server = servers["parity"]
    barrier = threading.Barrier(2, timeout=MESSAGE_TIMEOUT_S)
    with ThreadPoolExecutor(2) as pool:
        sessions = [f.result() for f in [pool.submit(run_session, server, p, barrier) for p in plans()]]
    report = server.calibrator()
    assert server.url in server.out.read_text()  # the command printed where it serves

    records = [r for session in sessions for r in session]
    # Executed scripts all run clean; a world-model step's predicted outcome is the world model's
    # opinion of these synthetic scripts, and what is compared below is that server and in-process
    # env give the same one.
    assert all(r["done"] and r["info"]["valid"] is not False for r in records)
    assert all(r["info"]["error"] is None for r in records if r["info"]["stream"] == "anchor")
    anchors = [r for r in records if r["info"]["stream"] == "anchor"]
    assert len(anchors) == 2 * ANCHORS_PER_SESSION and len(records) - len(anchors) == 2 * WM_PER_SESSION
    # The fuse lock: each anchor's step saw its own pair enter, and no two saw the same count.
    assert sorted(r["info"]["calibrator_pairs"] for r in anchors) == list(range(1, len(anchors) + 1))
    # The server's one calibrator holds every anchor pair of both sessions.
    assert report["n_pairs"] == len(anchors)
    for session in sessions:
        mine = sorted((r["info"]["wm_score_raw"], r["info"]["real_score"]) for r in session
                      if r["info"]["stream"] == "anchor")
        assert len(mine) == ANCHORS_PER_SESSION
        served = list(zip(report["wm_scores"], report["real_scores"]))
        assert all(any(abs(w - a) <= ATOL and abs(x - b) <= ATOL for a, b in served) for w, x in mine)

    # One in-process env, its own calibrator, the same episodes in the server's fuse order.
    env = MLEDojoEnv(reward="fused", task_ids=[TASK], anchor_fraction=ANCHOR_FRACTION, anchor_seed=ANCHOR_SEED,
                     calibrator=(calibrator := Calibrator()), workers=1, fusion_rule="eta2")
    order = sorted(records, key=lambda r: (r["info"]["calibrator_pairs"], r["info"]["stream"] != "anchor"))
    for r in order:
        env.reset(seed=r["group"], options={"task_id": TASK, "group_id": r["group"]})
        _, reward, terminated, _, info = env.step(response(r["group"]))
        served = r["info"]
        assert terminated and info["stream"] == served["stream"], r["group"]
        assert calibrator.n_pairs == served["calibrator_pairs"]
        assert reward == pytest.approx(r["reward"], abs=ATOL), r["group"]
        for key in ("score", "wm_score_raw", "wm_score_calibrated", "fusion_weight"):
            assert info[key] == pytest.approx(served[key], abs=ATOL), (r["group"], key)
        assert (info["status"], info["error"]) == (served["status"], served["error"]), r["group"]
        assert (info["real_score"] is None) == (served["real_score"] is None)
    env.close()
    replayed = calibrator.state_dict()  # the same pairs, in the same order
    np.testing.assert_allclose(report["wm_scores"], replayed["wm_scores"], rtol=0, atol=ATOL)
    np.testing.assert_allclose(report["real_scores"], replayed["real_scores"], rtol=0, atol=ATOL)
    assert report["eta2"] == pytest.approx(calibrator.eta2, abs=ATOL)

    # The comparison covered calibration at work: world-model rewards moved off their raw scores
    # once the map existed, and anchors were weighted above 1.
    calibrated = [r for r in records if r["info"]["stream"] == "world_model"
                  and r["info"]["calibrator_pairs"] >= calibrator.config.min_pairs_global]
    assert calibrated and any(abs(r["reward"] - r["info"]["wm_score_raw"]) > 1e-3 for r in calibrated)
    assert any(r["info"]["fusion_weight"] > 1.0 for r in anchors)


def step_error(env, action) -> str:
    with pytest.raises(RuntimeError) as caught:
        env.step(action)
    return str(caught.value)


def test_bad_actions_get_short_errors_and_the_server_stays_up(servers):
    server = servers["shared"]
    schedule = HashSchedule(ANCHOR_FRACTION, ANCHOR_SEED)
    group = next(g for g in range(100) if schedule.stream(g) == "world_model")
    pairs = server.calibrator()["n_pairs"]
    with server.client() as env:
        env.reset(seed=0, task_id=TASK, group_id=group)
        oversized = step_error(env, {"response": "x" * 100_000})
        assert "100,000 characters" in oversized and "64,000" in oversized and len(oversized) < 300
        unknown = step_error(env, {"code": "y" * 50_000, "response": "ok"})
        assert "unknown action field(s) ['code']" in unknown and len(unknown) < 300
        assert "must be text" in step_error(env, {"response": ["not", "text"]})
        with pytest.raises(RuntimeError, match=r"unknown reset option\(s\) \['task'\]"):
            env.reset(task=TASK)
        # The session is still usable, and nothing above reached the calibrator.
        env.reset(seed=0, task_id=TASK, group_id=group)
        result = env.step({"response": response(group)})
        assert result.done and result.metadata["stream"] == "world_model" and 0.0 <= result.reward <= 1.0
    assert server.calibrator()["n_pairs"] == pairs

    # A message over the transport limit (1 MiB) closes only its own connection.
    env = server.client()
    env.reset(seed=0, task_id=TASK, group_id=group)
    with pytest.raises(Exception, match="1009|too big"):
        env.step({"response": "z" * 2_000_000})
    try:
        env.close()
    except Exception:  # the server already closed this connection
        pass
    assert get_json(server.url + "/health")["status"] == "healthy"
    with server.client() as again:
        assert again.reset(seed=1, task_id=TASK).metadata["task_id"] == TASK


def test_http_routes_answer_user_errors_with_a_4xx_and_one_line(servers):
    server = servers["shared"]
    logged = server.err.stat().st_size
    cases = {  # route, body, status, words of the answer
        "unknown task id": ("/reset", {"task_id": "no-such-task"}, 404, "no-such-task"),
        "unknown reset option": ("/reset", {"task": TASK}, 400, "unknown reset option(s) ['task']"),
        "a step (HTTP is stateless)": ("/step", {"action": {"response": response(0)}}, 409, "WebSocket session"),
        "a 5 MB action": ("/step", {"action": {"response": "x" * 5_000_000}}, 422, "5,000,000 characters"),
    }
    for case, (route, body, status, words) in cases.items():
        code, detail = post(server.url + route, body)
        assert code == status and words in detail, (case, code, detail[:300])
        assert "\n" not in detail and len(detail) <= 500, case
    code, reply = post(server.url + "/reset", {"task_id": TASK, "seed": 1})  # the routes still serve
    assert code == 200 and json.loads(reply)["observation"]["text"].startswith("# Task:")
    log = server.err.read_bytes()[logged:].decode()
    answered = [line for line in log.splitlines() if " -> 4" in line]
    assert len(answered) == len(cases) and all(len(line) < 600 for line in answered), log[-2000:]
    assert "Traceback" not in log


def test_the_example_client_runs_against_the_server(servers, monkeypatch, capsys):
    # In this process (OpenEnv is imported already), with the server's URL as its argument.
    monkeypatch.setattr(sys, "argv", ["openenv_example.py", servers["shared"].url])
    runpy.run_path(str(REPO / "docs" / "examples" / "openenv_example.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("reward ") == 3 and "stream " in out and "calibrator pairs" in out


def test_dsbench_is_served_by_the_same_wrapper():
    # In process: the session class over DSBench, whose info adds its RPG (None for a world-model score).
    from wmrl_envs.integrations.openenv import WMRLAction, WMRLEnvironment, WMRLServer

    built = WMRLServer.build("wmrl/DSBench-v0", reward="world_model", workers=1, calibrator=Calibrator())
    session = WMRLEnvironment(built)
    reset = session.reset(seed=0)
    assert reset.metadata["task_id"] in built.options["task_ids"] and reset.text.startswith("# Task:")
    step = session.step(WMRLAction(response="```python\nimport shutil\n"
                                            "shutil.copy('data/sample_submission.csv', 'submission.csv')\n```"))
    assert step.done and step.metadata["stream"] == "world_model" and "rpg" in step.metadata
    assert step.reward == pytest.approx(step.metadata["wm_score_calibrated"]) and session.state.step_count == 1
    session.close()
    built.close()


def test_only_code_envs_are_served():
    from wmrl_envs.errors import ConfigError
    from wmrl_envs.integrations.openenv import WMRLServer

    with pytest.raises(ConfigError, match="control vector"):
        WMRLServer.build("wmrl/LIBERO-Long-v0")
    with pytest.raises(ConfigError, match="unknown env id"):
        WMRLServer.build("wmrl/NoSuchEnv-v0")


def test_serve_without_openenv_says_what_to_install():
    code = "import sys; sys.modules['openenv'] = None; from trainers.cli import main; sys.exit(main(['serve']))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "wmrl: error:" in done.stderr and "pip install 'wmrl[openenv]'" in done.stderr


def test_openenv_validate_accepts_the_space_package_offline():
    # The static level, the one that builds nothing: the runtime level builds and plays the Space
    # (test_openenv_runtime.py), and checks OpenEnv 0.10 has not built answer "skip", a warning.
    done = subprocess.run([str(OPENENV), "validate", str(SPACE), "--level", "static", "--json"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["signature"] == "openenv.yaml" and report["verdict"] == "pass", report["results"]
    assert [(r["check_id"], r["status"]) for r in report["results"]] == [("static.manifest", "pass")]
    assert report["manifest"]["execution"]["probe_path"] == "validation/runtime.json"


def test_the_space_serves_passes_openenv_validate_url_and_its_client_scores_as_the_env(tmp_path):
    server = Server(tmp_path, space={"WMRL_ENV": "wmrl/MLEDojo-v0", "WMRL_REWARD": "real", "WMRL_TASKS": TASK,
                                     "WMRL_MAX_SESSIONS": "2"})
    try:
        server.wait_ready()
        done = subprocess.run([str(OPENENV), "validate", "--url", server.url, "--json"], capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        report = json.loads(done.stdout)
        assert report["passed"] and report["summary"]["passed_count"] == report["summary"]["total_count"] > 0, report
        assert get_json(server.url + "/metadata")["name"] == "wmrl/MLEDojo-v0"

        sys.path.insert(0, str(SPACE.parent))
        try:
            from wmrl_code import WMRLAction, WmrlCodeEnv
        finally:
            sys.path.remove(str(SPACE.parent))
        with WmrlCodeEnv(base_url=server.url, message_timeout_s=MESSAGE_TIMEOUT_S).sync() as client:
            reset = client.reset(task_id=TASK, group_id=3)
            result = client.step(WMRLAction(response=response(3)))
            state = client.state()
        assert reset.observation.text.startswith("# Task:")
        assert state.task_id == TASK and state.step_count == 1
    finally:
        server.stop()
    env = MLEDojoEnv(reward="real", task_ids=[TASK], workers=1)
    env.reset(options={"task_id": TASK, "group_id": 3})
    _, reward, *_ = env.step(response(3))
    env.close()
    assert result.done and result.observation.metadata["stream"] == "real"
    assert result.reward == pytest.approx(reward, abs=ATOL) and reward > 0
