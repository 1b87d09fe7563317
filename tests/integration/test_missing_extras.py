"""A missing optional extra is one clear line: each entry point runs in an install that lacks it.

Each case runs in a virtualenv holding what ``pip install -e ".[<extras>]"`` installs and nothing
else: the core install of the README (no extra), or the core plus ``torch`` for an entry point
that needs torch before it reaches the extra under test. The venv is made without pip and
without system site-packages, and its site-packages gets one symlink per top-level entry of
every distribution in the closure of wmrl's requirements (read from this interpreter's installed
metadata, markers evaluated), dist-info folders and the editable install's finder included.

Why this way: the extras are really absent, so the import system, ``importlib.metadata`` (the
DSBench suite reads sktime's version) and every lazy import see exactly what a core install
sees, and a venv is built in well under a second, offline. ``pip install`` into a fresh venv
would take minutes and a package index; ``--system-site-packages`` would bring the extras back
(this interpreter has them all); and a ``sys.meta_path`` blocker only simulates an absence that
a real install shows anyway. Interpreters run with ``-I``, so neither ``PYTHONPATH`` nor a user
site-packages can lead them back to the extras.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
import venv
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import wmrl_envs
from wmrl_envs.extras import EXTRA_MODULES

CHECKOUT = Path(wmrl_envs.__file__).resolve().parents[1]
# Where this interpreter's distributions are installed: never a checkout's own wmrl.egg-info,
# which sys.path's working-directory entry would find first.
SITE_PACKAGES = list(dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib")))
# The `wmrl` console script's own code (pyproject.toml: wmrl = "trainers.cli:main").
WMRL = "import sys; from trainers.cli import main; sys.exit(main())"
CODE_STEP = "e.reset(seed=0); e.step('```python\\nimport pandas as pd\\nprint(1)\\n```')"

# (extras installed, `wmrl` arguments, the extra it must name). `lm_checkpoint` is a folder in
# the working directory with the config.json the lm policy checks before it needs transformers.
COMMANDS = [
    ((), ["train", "--steps", "3"], "torch"),
    ((), ["eval", "--policy", "grammar"], "torch"),
    ((), ["serve"], "openenv"),
    (("torch",), ["train", "--policy", "lm", "--policy-path", "lm_checkpoint"], "llm"),
]
# (extras installed, Python code, the extra it must name, the error's class): library entry points.
LIBRARY = [
    ((), "gym.make('wmrl/DSBench-v0')", "dsbench", "MissingExtraError"),
    ((), "gym.make('wmrl/LIBERO-Long-v0').reset()", "libero", "MissingExtraError"),
    ((), "import trainers.integrations.trl", "trl", "MissingExtraError"),
    ((), f"e = gym.make('wmrl/MLEDojo-v0', reward='world_model', world_model='llm'); {CODE_STEP}", "llm",
     "MissingExtraError"),
    ((), f"e = gym.make('wmrl/MLEDojo-v0', reward='world_model', world_model_kwargs={{'embed': True}}); {CODE_STEP}",
     "llm", "MissingExtraError"),
    # The sandbox's own typed error (wmrl_envs/sandbox/ray_executor.py), one line as well.
    ((), f"e = gym.make('wmrl/MLEDojo-v0', executor='ray'); {CODE_STEP}", "ray", "SandboxUnavailableError"),
]


def install_closure(extras: tuple[str, ...]) -> list[metadata.Distribution]:
    """The installed distributions ``pip install -e ".[extras]"`` would hold: wmrl's requirements
    and theirs, transitively, where their markers hold (a requirement not installed here is left out)."""
    found: dict[str, metadata.Distribution] = {}
    todo, seen = [("wmrl", frozenset(extras))], set()
    while todo:
        name, wanted = todo.pop()
        if (canonicalize_name(name), wanted) in seen:
            continue
        seen.add((canonicalize_name(name), wanted))
        dist = next(iter(metadata.distributions(name=name, path=SITE_PACKAGES)), None)
        if dist is None:
            continue
        found[canonicalize_name(dist.metadata["Name"])] = dist
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted or {""}):
                todo.append((req.name, frozenset(req.extras)))
    return list(found.values())


def make_install(root: Path, extras: tuple[str, ...]) -> Path:
    """A venv at ``root`` holding exactly :func:`install_closure`; returns its python."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))
    for dist in install_closure(extras):
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")}:
            link = site / top
            if not link.is_symlink():  # a namespace folder that several distributions share: once
                link.symlink_to(Path(dist.locate_file(top)))
    return root / "bin" / "python"


@pytest.fixture(scope="session")
def install(tmp_path_factory):
    """``install(*extras)``: the python of a venv with the core and ``extras`` only, built once a session."""
    built: dict[tuple[str, ...], Path] = {}

    def python(*extras: str) -> Path:
        if extras not in built:
            built[extras] = make_install(tmp_path_factory.mktemp("install-" + "-".join(("core", *extras))), extras)
        return built[extras]

    return python


def run(python: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_the_extras_are_those_of_pyproject():
    extras = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_MODULES) == set(extras) - {"test"}


@pytest.mark.parametrize("extras, argv, extra", COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_command_names_the_missing_extra_in_one_line(install, tmp_path, extras, argv, extra):
    (tmp_path / "lm_checkpoint").mkdir()
    (tmp_path / "lm_checkpoint" / "config.json").write_text("{}")
    done = run(install(*extras), ["-c", WMRL, *argv], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert [line for line in lines if "wmrl: error:" in line] == lines[-1:], done.stderr[-3000:]
    assert lines[-1].startswith("wmrl: error: ") and f"pip install 'wmrl[{extra}]'" in lines[-1], lines[-1]


@pytest.mark.parametrize("extras, code, extra, error", LIBRARY, ids=[case[1][:60] for case in LIBRARY])
def test_an_env_or_module_raises_a_typed_error_naming_the_extra(install, tmp_path, extras, code, extra, error):
    done = run(install(*extras), ["-c", f"import gymnasium as gym, wmrl_envs\n{code}"], tmp_path)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith(f"wmrl_envs.errors.{error}: "), done.stderr[-3000:]
    assert f"pip install 'wmrl[{extra}]'" in last, last
