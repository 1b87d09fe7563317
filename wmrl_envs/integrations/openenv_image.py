"""The OpenEnv Space's base image, made offline from this host.

::

    wmrl export openenv-image [--docker-host unix:///.../docker.sock]

The Space's own image (``environments/wmrl_code/server/Dockerfile``) is built from the package
folder alone, as ``openenv validate`` and the hub build it, so WMRL itself must come from its base
image (:data:`DEFAULT_SPACE_BASE_IMAGE`). This module makes that base without a registry: the Harbor
agent image (:func:`~wmrl_envs.integrations.harbor_image.build_agent_image`: this host's userland,
bubblewrap included, and the agent runtime) plus

* a venv at :data:`SPACE_VENV` with this WMRL checkout and its ``openenv`` extra, first on ``PATH``;
* a read-only seed of WMRL's home at :data:`SEED_HOME`: the built-in suites' generated tasks and a
  link to the agent runtime, which the Space's command links into a writable ``WMRL_HOME`` at start
  (OpenEnv runs a Space with a read-only root and a ``/tmp`` of its own).

``environments/wmrl_code/server/base.Dockerfile`` builds the same base from ``python:3.11-slim``
for a user with a registry (``docs/hubs.md``).
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import IO

from wmrl_envs.integrations.harbor import RUNTIME_VENV
from wmrl_envs.integrations.harbor_image import build_agent_image, commit_layer, wmrl_venv
from wmrl_envs.sandbox.docker_cli import docker_cli
from wmrl_envs.sandbox.runtime import Runtime, load_runtime
from wmrl_envs.tasks.builtin import ensure_suite

DEFAULT_SPACE_BASE_IMAGE = "wmrl-openenv-base:local"
#: The Space server's venv (WMRL with the openenv extra).
SPACE_VENV = "/opt/wmrl-space"
#: What the Space links into its writable ``WMRL_HOME``: generated tasks and the agent runtime.
SEED_HOME = "/opt/wmrl-home"
SUITES = ("mle", "dsbench")


def _write_layer(stdin: IO[bytes], venv: Path, suites: dict[str, Path]) -> None:
    with tarfile.open(fileobj=stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        tar.add(venv, arcname=SPACE_VENV.lstrip("/"))
        for suite, folder in suites.items():
            tar.add(folder, arcname=f"{SEED_HOME.lstrip('/')}/tasks/{suite}")
        link = tarfile.TarInfo(f"{SEED_HOME.lstrip('/')}/runtime-venv")
        link.type, link.linkname = tarfile.SYMTYPE, RUNTIME_VENV
        tar.addfile(link)


def build_space_base_image(tag: str, source: Path, host: str | None = None, agent: str | None = None,
                           runtime: Runtime | None = None) -> str:
    """Build the Space's base image as ``tag`` (the agent image ``agent`` first, made if not given);
    returns its id."""
    runtime = runtime if runtime is not None else load_runtime()
    suites = {suite: ensure_suite(suite) for suite in SUITES}  # generated on this host; the image carries them
    if agent is None:
        agent = f"{tag}-agent"
        build_agent_image(agent, host, runtime)
    with tempfile.TemporaryDirectory(prefix="wmrl-space-") as scratch:
        venv = wmrl_venv(source, runtime.base_prefix / "bin" / "python3", Path(scratch) / "venv", extras="openenv")
        return commit_layer(docker_cli(host), agent, tag, lambda stdin: _write_layer(stdin, venv, suites),
                            "WMRL OpenEnv Space base (WMRL[openenv], tasks, runtime)",
                            changes=(f"ENV PATH={SPACE_VENV}/bin:/usr/local/bin:/usr/bin:/bin",
                                     f"ENV WMRL_SEED_HOME={SEED_HOME}"))
