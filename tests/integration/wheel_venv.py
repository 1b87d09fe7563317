"""Helpers for tests that install WMRL into a fresh virtualenv outside the checkout.

``test_wheel_install.py`` installs the built wheel; ``test_verifiers_env.py`` installs the
verifiers environment package with it. Both copy the checkout's build inputs first (so a stale
``build/`` cannot leak in), pin this interpreter's versions (so the generated tasks in the shared
``WMRL_HOME`` are reused), and hide whatever could lead the new venv back to the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import wmrl_envs
from wmrl_envs.paths import wmrl_home

CHECKOUT = Path(wmrl_envs.__file__).resolve().parents[1]
CODE = ("wmrl_envs", "agents", "trainers")
DATA = {"assets": "wmrl_envs/_assets", "leaderboards": "wmrl_envs/_leaderboards"}
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", *CODE, *DATA)
HIDDEN = ("PYTHONPATH", "VIRTUAL_ENV", "WMRL_ASSETS_DIR", "WMRL_LEADERBOARDS_DIR")


def run(cmd: list[str], timeout: float = 300, **kwargs) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{cmd[:4]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def copy_build_inputs(dest: Path) -> Path:
    """The checkout's build inputs copied to ``dest``; returns ``dest``."""
    for name in BUILD_INPUTS:
        copy = shutil.copytree if (CHECKOUT / name).is_dir() else shutil.copy2
        copy(CHECKOUT / name, dest / name)
    return dest


def pins(leave_out: Iterable[str] = ()) -> str:
    """This interpreter's versions as pip constraints, but wmrl's and ``leave_out``'s.

    Generated tasks in the shared ``WMRL_HOME`` are keyed on the data packages' versions; the
    same versions in the new venv reuse them instead of regenerating the suite there.
    """
    skip = {"wmrl", *(name.lower() for name in leave_out)}
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        key = re.sub(r"[-_.]+", "-", name or "").lower()
        if name and key not in skip:
            found.setdefault(key, f"{name}=={dist.version}")
    return "".join(f"{pin}\n" for pin in sorted(found.values()))


def wheel_env() -> dict[str, str]:
    """The session's environment, minus whatever could lead the new venv back to the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in HIDDEN}
    env["WMRL_HOME"] = str(wmrl_home())  # the session's runtime venv and generated tasks
    return env


def make_venv(root: Path, requirements: Iterable[str], leave_out: Iterable[str] = ()) -> Path:
    """A fresh virtualenv at ``root`` with ``requirements`` installed (pinned by :func:`pins`, but
    ``leave_out``) and DSBench's data package; returns ``root``.

    DSBench's data package goes in the way ``scripts/setup.sh`` installs it (its pandas pin is too
    tight): every task lookup digests the DSBench suite too, and that digest names sktime's version.
    """
    run([sys.executable, "-m", "venv", str(root)])
    constraints = root / "constraints.txt"
    constraints.write_text(pins(leave_out))
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input", "--disable-pip-version-check",
           "-c", str(constraints)]
    run([*pip, *requirements], timeout=900, env=wheel_env())
    run([*pip, "--no-deps", "sktime", "scikit-base"], env=wheel_env())
    return root
