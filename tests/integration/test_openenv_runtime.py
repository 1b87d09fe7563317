"""``openenv validate`` at its runtime level: the Space's image built from its package folder, started
under OpenEnv's own hardening, and its declared episode played (``validation/runtime.json``).

Offline, on a private dockerd (``private_dockerd`` in tests/conftest.py):

* the Space's base image comes from this host's files (``wmrl export openenv-image``);
* OpenEnv's validator pins its network helper image by digest on Docker Hub. A digest exists only
  for an image pushed to a registry, so the test pushes a minimal helper (this host's Python and
  ``sleep``, all the helper's stdlib scripts need) to Debian's ``docker-registry`` served on
  loopback, and gives OpenEnv's own Docker provider that digest. Everything else is OpenEnv's.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from trainers.cli import main
from wmrl_envs.sandbox.docker_executor import skeleton_tar
from wmrl_envs.sandbox.runtime import load_runtime

pytest.importorskip("openenv", reason="the openenv extra: pip install 'wmrl[openenv]'")

from openenv.validation.providers.docker import DockerValidationProvider
from openenv.validation.runner import run_validation
from openenv.validation.types import CheckStatus, Level

pytestmark = [pytest.mark.openenv, pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "environments" / "wmrl_code"
BASE = "wmrl-openenv-base:local"
#: The runtime checks OpenEnv 0.10 implements; every other runtime check answers "not implemented".
IMPLEMENTED = {"runtime.startup", "runtime.reward_well_formed", "runtime.observation_schema",
               "runtime.state_contract", "runtime.network_policy"}


def _libraries(binaries: list[Path]) -> set[Path]:
    """The shared libraries ``binaries`` load (``ldd``), the dynamic loader included."""
    found: set[Path] = set()
    for binary in binaries:
        listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
        for line in listing.splitlines():
            path = line.split("=>")[-1].split("(")[0].strip()
            if path.startswith("/"):
                found.add(Path(path))
    return found


def helper_tar() -> bytes:
    """A root filesystem with this host's base Python (no site-packages) and ``sleep``: what
    OpenEnv's network helper runs (stdlib scripts with ``python3 -c``, and ``sleep``)."""
    runtime = load_runtime()
    prefix = runtime.base_prefix
    version = ".".join(runtime.version.split(".")[:2])
    skipped = {str(p) for p in runtime.base_site_packages} | {str(prefix / "lib" / f"python{version}" / "test")}
    sleep = Path(shutil.which("sleep") or "/usr/bin/sleep")
    binaries = [prefix / "bin" / f"python{version}", sleep,
                *(prefix / "lib" / f"python{version}" / "lib-dynload").glob("*.so")]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        with tarfile.open(fileobj=io.BytesIO(skeleton_tar())) as skeleton:
            for member in skeleton.getmembers():
                tar.addfile(member)
        tar.add(prefix, arcname=str(prefix).lstrip("/"),
                filter=lambda info: None if "/" + info.name in skipped else info)
        # Through their folders' real paths: /lib and /lib64 are links into /usr in the skeleton.
        outside = {path.parent.resolve() / path.name for path in {sleep, *_libraries(binaries)}
                   if not path.resolve().is_relative_to(prefix)}
        for path in sorted(outside):
            tar.add(path.resolve(), arcname=str(path).lstrip("/"))
        link = tarfile.TarInfo("usr/local/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, str(prefix / "bin" / f"python{version}")
        tar.addfile(link)
    return buffer.getvalue()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path: Path):
    """Debian's docker-registry on a loopback port; its address."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("the OpenEnv runtime test needs docker-registry (`WMRL_SETUP_DOCKER=1 bash scripts/setup.sh`)")
    address = f"127.0.0.1:{_free_port()}"
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage: {{filesystem: {{rootdirectory: {tmp_path / 'data'}}}}}\n"
                      f"http: {{addr: {address}}}\n")
    server = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}/v2/", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"docker-registry did not start: {server.stderr.read().decode()[-2000:] if server.stderr else ''}")
                time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=30)


def _docker(host: str, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["docker", "--host", host, *args], input=stdin, capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode().strip()


def test_openenv_runtime_validation_builds_the_space_and_plays_its_episode(private_dockerd, agent_image, registry,
                                                                          tmp_path, monkeypatch) -> None:
    host = private_dockerd.host
    assert main(["export", "openenv-image", "--docker-host", host, "--agent-image", agent_image]) == 0
    helper = f"{registry}/openenv-helper:local"
    _docker(host, "import", "-", helper, stdin=helper_tar())
    _docker(host, "push", "--quiet", helper)
    pinned = _docker(host, "image", "inspect", helper, "--format", "{{index .RepoDigests 0}}")
    assert "@sha256:" in pinned

    monkeypatch.setenv("DOCKER_HOST", host)  # OpenEnv's provider runs the docker CLI
    report = run_validation(SPACE, max_level=Level.RUNTIME, provider=DockerValidationProvider(helper_image=pinned),
                                    artifacts_dir=tmp_path / "artifacts")
    status = {r.check_id: r.status for r in report.results}
    why = {r.check_id: r.evidence for r in report.results}
    assert Level.RUNTIME in report.levels_run, why
    assert status["static.manifest"] is CheckStatus.PASS
    for check in ("runtime.startup", "runtime.reward_well_formed", "runtime.observation_schema",
                  "runtime.state_contract"):
        assert status[check] is CheckStatus.PASS, (check, why[check])
    # The network check needs a bridge for its sink, which a private dockerd does not make.
    assert status["runtime.network_policy"] in (CheckStatus.PASS, CheckStatus.SKIP), why["runtime.network_policy"]
    not_built = {c for c, s in status.items() if c not in IMPLEMENTED and not c.startswith("static.")}
    assert all(status[c] is CheckStatus.SKIP and why[c] == ["grader not implemented in this build"]
               for c in not_built), {c: why[c] for c in not_built}
    # The episode: a world-model group, scored in range, its state echoing the plan's episode.
    trace = json.loads((tmp_path / "artifacts" / "collector-trace.json").read_text())
    step = next(e for e in trace if e["operation"] == "step")["response_json"]["data"]
    assert step["done"] and 0.0 <= step["reward"] <= 1.0
    assert step["observation"]["metadata"]["stream"] == "world_model"
    assert trace[-1]["response_json"]["data"]["episode_id"] == "openenv-validation"
