"""The ``docker`` CLI as WMRL calls it outside a run: a failed command is a typed error.

The Docker executor's control commands (info, inspect, import, rm) and the image exporters
(Harbor's grader image, OpenEnv's Space base) share one way to call the CLI and one way to
fail: :class:`~wmrl_envs.errors.SandboxUnavailableError` with the tail of the CLI's stderr and,
when the engine does not answer, how to start one.
"""

from __future__ import annotations

import shutil
import subprocess

from wmrl_envs.errors import SandboxUnavailableError

INSTALL_HINT = "install it with `apt-get install docker.io` (or run `WMRL_SETUP_DOCKER=1 bash scripts/setup.sh`)"
START_HINT = (
    "start one (as root, `python -m wmrl_envs.sandbox.dockerd` runs a private engine and prints "
    "its DOCKER_HOST), or point DOCKER_HOST or make_executor('docker', host=...) at a running one"
)
# What the CLI prints when no engine listens at its address.
_NO_ENGINE = ("Cannot connect", "connection refused")


def docker_cli(host: str | None = None) -> list[str]:
    """The CLI's argv prefix for the engine at ``host`` (None: the CLI's own default)."""
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxUnavailableError(f"the docker CLI is not installed: {INSTALL_HINT}")
    return [docker, "--host", host] if host else [docker]


def run_docker(cli: list[str], *args: str, what: str, data: bytes | None = None,
               timeout_s: float | None = None) -> str:
    """Run ``cli + args`` (``data`` on stdin); its stdout, or :class:`SandboxUnavailableError`
    naming ``what`` failed, the engine's address, the CLI's stderr and, if no engine answered,
    :data:`START_HINT`. ``timeout_s`` None waits as long as the command takes (an image commit)."""
    try:
        done = subprocess.run([*cli, *args], input=data, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SandboxUnavailableError(f"{what}: `docker {args[0]}` took over {timeout_s:g} s") from exc
    if done.returncode != 0:
        where = f" at {cli[cli.index('--host') + 1]}" if "--host" in cli else ""
        detail = done.stderr.decode(errors="replace").strip()[-2000:]
        hint = f"; {START_HINT}" if any(sign in detail for sign in _NO_ENGINE) else ""
        raise SandboxUnavailableError(f"{what}{where} (`docker {args[0]}`): {detail}{hint}")
    return done.stdout.decode(errors="replace")
