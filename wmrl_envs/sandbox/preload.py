"""What the warm executor's zygotes import before forking: measured, and kept per runtime digest.

``python -X importtime`` over representative scripts (the corpus's, rendered by the grammar; run
in the sandbox like any script) tells which modules the runs import and what each costs. The
modules that at least ``min_share`` of the scripts import, at a median cost of at least
``min_ms``, are preloaded, in the order the scripts first import them::

    profile = measure(make_executor("bwrap"), [(script, task) for script in scripts])
    save_profile(runtime.requirements_sha256, profile)

Profiles live in ``assets/runtime-preload.json``, one per digest of the runtime's requirements
(the digest the runtime venv's marker records). A runtime without one preloads nothing (its
runs are then about as slow as cold ones) until it is measured:
``python -m bench.warm_sandbox preload``.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError
from wmrl_envs.paths import assets_dir
from wmrl_envs.sandbox.base import Executor
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.sandbox.runtime import Runtime

log = logging.getLogger(__name__)

PROFILES = "runtime-preload.json"
# Runs the script under -X importtime in the sandbox; the timings come back on stderr.
_PROBE = """import subprocess, sys
with open("measured.py", "w") as f:
    f.write({script!r})
sys.exit(subprocess.run([sys.executable, "-X", "importtime", "measured.py"]).returncode)
"""
# Whether the chosen modules leave the interpreter single-threaded (a zygote must be, to fork).
_THREAD_CHECK = """import importlib, os
for name in {modules!r}:
    importlib.import_module(name)
print("THREADS", len(os.listdir("/proc/self/task")))
"""


def profiles_path() -> Path:
    return assets_dir() / PROFILES


def preload_modules(runtime: Runtime) -> tuple[str, ...]:
    """The modules to preload for ``runtime``: its measured profile's, or none (with a warning)."""
    path = profiles_path()
    profiles = json.loads(path.read_text()) if path.is_file() else {}
    profile = profiles.get(runtime.requirements_sha256)
    if profile is None:
        log.warning("no preload profile for the runtime %s (requirements %s): its warm runs import everything "
                    "themselves; measure one with `python -m bench.warm_sandbox preload`",
                    runtime.venv, runtime.requirements_sha256[:12] or "unknown")
        return ()
    return tuple(profile["modules"])


def parse_importtime(stderr: str) -> list[tuple[str, int]]:
    """The top-level imports of one ``-X importtime`` log: (module, cumulative microseconds), in order.

    Top-level means imported by the script itself or lazily at run time, not by another module
    (a nested import is indented by two more spaces per level).
    """
    out = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or line.endswith("imported package"):
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if len(name) - len(name.lstrip(" ")) == 1:
            out.append((name.strip(), int(cumulative)))
    return out


def measure(executor: Executor, items: Sequence[tuple[str, Any]], min_share: float = 0.5, min_ms: float = 1.0,
            limits: Limits | None = None) -> dict[str, Any]:
    """Import timings of every ``(script, task)`` run through ``executor``, and the modules to preload.

    Raises :class:`ConfigError` if no script ran, or if the chosen modules start a thread at import.
    """
    limits = limits or Limits(wall_s=600, cpu_s=600, output_bytes=4 << 20)
    order: dict[str, int] = {}
    costs: dict[str, list[float]] = {}
    runs = 0
    for script, task in items:
        result = executor.run(_PROBE.format(script=script), task, limits)
        imports = parse_importtime(result.stderr)
        if not imports:
            log.warning("no import timings from a probe run (%s): %s", result.status.value, result.error)
            continue
        runs += 1
        for name, cumulative in dict(imports).items():
            order.setdefault(name, len(order))
            costs.setdefault(name, []).append(cumulative / 1000)
    if not runs:
        raise ConfigError("no probe run reported import timings")
    measured = {name: {"share": len(costs[name]) / runs, "median_ms": statistics.median(costs[name])}
                for name in sorted(order, key=order.__getitem__)}
    modules = [name for name, m in measured.items() if m["share"] >= min_share and m["median_ms"] >= min_ms]
    check = executor.run(_THREAD_CHECK.format(modules=modules), items[0][1], limits)
    if "THREADS 1\n" not in check.stdout:
        raise ConfigError(f"importing {modules} does not leave one thread: {check.stdout.strip()} "
                          f"{check.stderr[-500:]}")
    return {"modules": modules, "scripts": runs, "min_share": min_share, "min_ms": min_ms, "measured": measured}


def save_profile(requirements_sha256: str, profile: dict[str, Any], path: Path | None = None) -> Path:
    """Keep ``profile`` under its runtime digest in the profiles file (other digests' stay)."""
    path = path or profiles_path()
    profiles = json.loads(path.read_text()) if path.is_file() else {}
    profiles[requirements_sha256] = profile
    path.write_text(json.dumps(profiles, indent=1) + "\n")
    return path
