"""The two local base images a Harbor export builds on, made offline from this host.

::

    wmrl export harbor-images [--docker-host unix:///.../docker.sock]

A Harbor task's Dockerfile needs a base image that is self-contained: Harbor runs its containers
itself, so nothing of the host can be bind-mounted at run time, as :mod:`~wmrl_envs.sandbox.docker_executor`
does. Without a registry the images come from this host's files through ``docker import``, as the
Docker executor's skeleton does (:func:`~wmrl_envs.sandbox.docker_executor.skeleton_tar` gives the
mount points and the merged-``/usr`` links):

* **agent** (:data:`~wmrl_envs.integrations.harbor.DEFAULT_AGENT_IMAGE`): the host's ``/usr/bin``,
  its multiarch shared libraries and the dynamic loader, the agent runtime's base interpreter
  (without its site-packages and test suite) and the agent runtime venv at ``/opt/wmrl-runtime``,
  with the sandbox's environment variables (:func:`~wmrl_envs.sandbox.launcher.agent_env`). Agent
  code therefore runs the same interpreter and packages as in the sandbox, and no WMRL;
* **grader** (:data:`~wmrl_envs.integrations.harbor.DEFAULT_GRADER_IMAGE`): the agent image plus a
  venv at ``/opt/wmrl-grader`` holding this WMRL checkout and its dependencies (pip, from the
  package index), committed as one more layer.

A user with a registry builds the same two images from ``python:3.11-slim`` instead
(``docs/hubs.md``).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from wmrl_envs.errors import ConfigError, SandboxUnavailableError
from wmrl_envs.integrations.harbor import GRADER_VENV, RUNTIME_VENV, HarborImages
from wmrl_envs.paths import wmrl_home
from wmrl_envs.sandbox.bwrap import ETC_FILES
from wmrl_envs.sandbox.docker_cli import docker_cli, run_docker
from wmrl_envs.sandbox.docker_executor import skeleton_tar
from wmrl_envs.sandbox.launcher import agent_env
from wmrl_envs.sandbox.runtime import Runtime, load_runtime

#: Users the images know: root runs Harbor's commands; nobody is there for tools that look it up.
_PASSWD = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
_GROUP = "root:x:0:\nnogroup:x:65534:\n"


def _multiarch_lib() -> Path:
    """The host's multiarch library folder (``/usr/lib/x86_64-linux-gnu`` on Debian)."""
    arch = sysconfig.get_config_var("MULTIARCH")
    candidates = [Path("/usr/lib") / arch] if arch else []
    candidates += sorted(Path("/usr/lib").glob("*-linux-gnu"))
    for path in candidates:
        if path.is_dir():
            return path
    raise SandboxUnavailableError("no multiarch library folder under /usr/lib; "
                                  "the Harbor images need a Debian-like host")


def agent_image_roots(runtime: Runtime) -> list[tuple[Path, str, tuple[Path, ...]]]:
    """(host path, path in the image, host paths left out) of everything the agent image copies."""
    version = ".".join(runtime.version.split(".")[:2])
    stdlib_tests = runtime.base_prefix / "lib" / f"python{version}" / "test"
    roots = [(Path("/usr/bin"), "usr/bin", ()),
             (_multiarch_lib(), str(_multiarch_lib()).lstrip("/"), ()),
             (runtime.base_prefix, str(runtime.base_prefix).lstrip("/"), (*runtime.base_site_packages, stdlib_tests)),
             (runtime.venv, RUNTIME_VENV.lstrip("/"), ())]
    for optional in (Path("/usr/lib64"), Path("/etc/alternatives")):  # the loader's link; /usr/bin's alternatives
        if optional.exists():
            roots.append((optional, str(optional).lstrip("/"), ()))
    roots += [(Path(p), p.lstrip("/"), ()) for p in ETC_FILES if Path(p).exists()]
    return roots


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def write_agent_tar(fileobj: IO[bytes], runtime: Runtime) -> None:
    """Stream the agent image's root filesystem as a tar to ``fileobj``."""
    with tarfile.open(fileobj=fileobj, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        with tarfile.open(fileobj=io.BytesIO(skeleton_tar())) as skeleton:
            for member in skeleton.getmembers():
                tar.addfile(member)
        for name in ("usr", "usr/lib", "root"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        _add_text(tar, "etc/passwd", _PASSWD)
        _add_text(tar, "etc/group", _GROUP)
        for source, arcname, left_out in agent_image_roots(runtime):
            skipped = {str(p) for p in left_out}
            tar.add(source, arcname=arcname,
                    filter=lambda info, skipped=skipped, source=source, arcname=arcname:
                    None if _host_path(info.name, source, arcname) in skipped else info)


def _host_path(member: str, source: Path, arcname: str) -> str:
    return str(source) + member[len(arcname):]


def _stream_into(argv: list[str], what: str, write: Callable[[IO[bytes]], None]) -> str:
    """Run ``argv`` with ``write(stdin)`` streaming its input; its stdout, or SandboxUnavailableError."""
    with tempfile.TemporaryFile() as err, subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                           stderr=err) as proc:
        assert proc.stdin is not None and proc.stdout is not None  # both PIPEs
        try:
            write(proc.stdin)
        except BrokenPipeError:
            pass  # the command died early; its status and stderr say why
        finally:
            proc.stdin.close()
        out = proc.stdout.read().decode(errors="replace")
        if proc.wait() != 0:
            err.seek(0)
            raise SandboxUnavailableError(f"{what} failed: {err.read().decode(errors='replace').strip()[-2000:]}")
    return out.strip()


def build_agent_image(tag: str, host: str | None = None, runtime: Runtime | None = None) -> str:
    """``docker import`` the agent image as ``tag``; returns the image id."""
    runtime = runtime if runtime is not None else load_runtime()
    env = agent_env(path=f"{RUNTIME_VENV}/bin:/usr/local/bin:/usr/bin:/bin", home="/root", tmpdir="/tmp")
    changes = [arg for key, value in env.items() for arg in ("--change", f"ENV {key}={value}")]
    argv = [*docker_cli(host), "import", "--message", "WMRL Harbor agent base (host userland, agent runtime)",
            *changes, "-", tag]
    return _stream_into(argv, f"docker import of {tag}", lambda stdin: write_agent_tar(stdin, runtime))


def wmrl_venv(source: Path, python: Path, folder: Path, extras: str = "") -> Path:
    """A venv at ``folder`` (made by ``python``) with the WMRL checkout ``source`` installed, with
    its ``extras`` (comma-separated) if any."""
    if not (source / "pyproject.toml").is_file():
        raise ConfigError(f"{source} is not a WMRL checkout (no pyproject.toml); pass the checkout's path")
    subprocess.run([str(python), "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    target = f"{source}[{extras}]" if extras else str(source)
    done = subprocess.run([*pip, target], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SandboxUnavailableError(f"installing {target} into a venv at {folder} failed: {done.stderr[-2000:]}")
    return folder


def build_grader_image(tag: str, agent: str, source: Path, host: str | None = None,
                       runtime: Runtime | None = None) -> str:
    """The agent image ``agent`` plus a grader venv of ``source``, committed as ``tag``; returns its id."""
    runtime = runtime if runtime is not None else load_runtime()
    with tempfile.TemporaryDirectory(prefix="wmrl-grader-") as scratch:
        venv = wmrl_venv(source, runtime.base_prefix / "bin" / "python3", Path(scratch) / "venv")

        def write(stdin: IO[bytes]) -> None:
            with tarfile.open(fileobj=stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                tar.add(venv, arcname=GRADER_VENV.lstrip("/"))

        return commit_layer(docker_cli(host), agent, tag, write, "WMRL Harbor grader (WMRL and its dependencies)")


def commit_layer(cli: list[str], base: str, tag: str, write: Callable[[IO[bytes]], None], message: str,
                 changes: tuple[str, ...] = ()) -> str:
    """Commit ``base`` plus the tar stream ``write`` makes (extracted at ``/``) as ``tag``, with
    ``docker commit``'s ``changes`` (Dockerfile instructions); returns the image id."""
    container = run_docker(cli, "create", "--network", "none", base, "/bin/true", what="docker create").strip()
    try:
        _stream_into([*cli, "cp", "-", f"{container}:/"], f"docker cp of {tag}'s layer", write)
        changed = [arg for change in changes for arg in ("--change", change)]
        return run_docker(cli, "commit", "--message", message, *changed, container, tag,
                          what=f"docker commit of {tag}").strip()
    finally:
        run_docker(cli, "rm", "--force", container, what="docker rm")


def build_images(source: Path, host: str | None = None, images: HarborImages | None = None) -> HarborImages:
    """Build both base images (the agent's, then the grader's on it); returns their tags."""
    images = images if images is not None else HarborImages()
    runtime = load_runtime()
    build_agent_image(images.agent, host, runtime)
    build_grader_image(images.grader, images.agent, source, host, runtime)
    return images


def image_exists(tag: str, host: str | None = None) -> bool:
    done = subprocess.run([*docker_cli(host), "image", "inspect", tag], capture_output=True, check=False)
    return done.returncode == 0


def checkout_root() -> Path:
    """The WMRL checkout this process imports (the grader image installs it)."""
    return Path(sys.modules["wmrl_envs"].__file__).resolve().parents[1]


def harbor_venv() -> Path:
    """Harbor's own venv (``scripts/setup_harbor.sh``): ``$WMRL_HARBOR_VENV``, else ``WMRL_HOME/harbor-venv``."""
    return Path(os.environ.get("WMRL_HARBOR_VENV", wmrl_home() / "harbor-venv"))


def harbor_env(venv: Path, docker_host: str) -> dict[str, str]:
    """This process's environment for ``harbor run`` on the engine ``docker_host``, with the
    compose plugin ``setup_harbor.sh`` placed in ``venv`` where it placed one."""
    # LiteLLM, which Harbor imports, otherwise tries to fetch a model price list at start.
    env = {**os.environ, "DOCKER_HOST": docker_host, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    config = venv / "docker-config"
    if (config / "cli-plugins" / "docker-compose").exists():
        env["DOCKER_CONFIG"] = str(config)
    return env
