"""The dedicated Python environment that agent code runs in.

Agent code must never see WMRL's own environment (the project, torch, credentials in
site-packages), so executors run it with a separate venv that holds only the packages in
``assets/runtime-requirements.txt``. :func:`ensure_runtime` builds that venv once, under a
lock so concurrent processes don't race, and records a marker with the requirements hash so
later calls return at once. Run ``python -m wmrl_envs.sandbox.runtime`` to build it ahead of
time (``scripts/setup.sh`` does).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.paths import assets_dir, wmrl_home

log = logging.getLogger(__name__)

MARKER = ".wmrl-runtime.json"
_PROBE = (
    "import json, site, sys, sysconfig\n"
    "base = sys.base_prefix\n"
    "paths = sysconfig.get_paths(vars={'base': base, 'platbase': base})\n"
    "dirs = {paths['purelib'], paths['platlib'], *site.getsitepackages([base])}\n"
    "print(json.dumps({'base_prefix': base, 'base_site_packages': sorted(dirs),\n"
    "                  'version': '%d.%d.%d' % sys.version_info[:3]}))\n"
)


@dataclass(frozen=True)
class Runtime:
    """A built runtime venv and what a sandbox must mount to run its interpreter.

    Attributes:
        venv: Root of the venv.
        base_prefix: Prefix of the base interpreter the venv's ``python`` links into; a
            sandbox must mount it at the same path.
        base_site_packages: The base interpreter's site-packages folders; a sandbox hides
            them so agent code cannot import the host's packages.
        version: Python version of the interpreter.
        requirements_sha256: Digest of the requirements the venv was built from; what is
            measured about a runtime (the warm executor's preload list) is kept under it.
    """

    venv: Path
    base_prefix: Path
    base_site_packages: tuple[Path, ...]
    version: str
    requirements_sha256: str = ""

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def default_requirements() -> Path:
    return assets_dir() / "runtime-requirements.txt"


def default_runtime_path() -> Path:
    return wmrl_home() / "runtime-venv"


def ensure_runtime(path: Path | None = None, requirements: Path | None = None) -> Path:
    """Build the runtime venv at ``path`` (default ``wmrl_home()/"runtime-venv"``) if needed.

    Idempotent: returns immediately when the marker matches the requirements file. Raises
    :class:`SandboxUnavailableError` when the venv cannot be built (e.g. pip has no access
    to the pinned wheels).
    """
    path = Path(path) if path is not None else default_runtime_path()
    requirements = Path(requirements) if requirements is not None else default_requirements()
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if _marker_digest(path) == digest:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same venv
        if _marker_digest(path) != digest:
            _build(path, requirements, digest)
    return path


def load_runtime(path: Path | None = None) -> Runtime:
    """Ensure the runtime venv exists and describe it."""
    path = ensure_runtime(path)
    data = json.loads((path / MARKER).read_text())
    return Runtime(
        venv=path,
        base_prefix=Path(data["base_prefix"]),
        base_site_packages=tuple(Path(p) for p in data["base_site_packages"]),
        version=data["version"],
        requirements_sha256=data.get("requirements_sha256", ""),
    )


def _marker_digest(path: Path) -> str | None:
    marker = path / MARKER
    # A venv whose base interpreter was removed or upgraded away is stale too.
    if not marker.is_file() or not (path / "bin" / "python").exists():
        return None
    return json.loads(marker.read_text()).get("requirements_sha256")


def _build(path: Path, requirements: Path, digest: str) -> None:
    log.warning("building the agent runtime venv at %s (one time, a minute or two)", path)
    if path.exists():
        shutil.rmtree(path)
    # No system site-packages: agent code sees only what the requirements list.
    venv.EnvBuilder(with_pip=True, symlinks=True, clear=True).create(path)
    python = path / "bin" / "python"
    log_path = path / "pip-install.log"
    with open(log_path, "wb") as out:
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "--no-input", "-r", str(requirements)],
            check=False,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if pip.returncode != 0:
        tail = log_path.read_text(errors="replace")[-2000:]
        raise SandboxUnavailableError(
            f"could not install {requirements} into the agent runtime venv {path} "
            f"(pip exit {pip.returncode}); last output:\n{tail}"
        )
    started = subprocess.run([str(python), "-c", _PROBE], check=False, capture_output=True, text=True)
    if started.returncode != 0:
        raise SandboxUnavailableError(f"the runtime venv {path} does not start: {started.stderr.strip()}")
    probe = json.loads(started.stdout)
    real = Path(os.path.realpath(python))
    if not real.is_relative_to(probe["base_prefix"]):
        raise SandboxUnavailableError(
            f"the runtime interpreter {real} lives outside its prefix {probe['base_prefix']}; "
            "build the runtime with a regular CPython install"
        )
    probe["requirements_sha256"] = digest
    (path / MARKER).write_text(json.dumps(probe, indent=1))  # written last: marks success


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", type=Path, default=None, help="where to build the venv")
    parser.add_argument("--requirements", type=Path, default=None, help="requirements file to install")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(ensure_runtime(args.path, args.requirements))
    return 0


if __name__ == "__main__":
    sys.exit(main())
