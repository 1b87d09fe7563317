"""Architecture contracts: the dependency direction, the floors inside wmrl_envs, no import cycles.

The direction is ``trainers -> agents -> wmrl_envs``: a higher package may import a lower one,
never the reverse (checked by import-linter's ``layers`` contract). Inside ``wmrl_envs`` the
floors of docs/architecture.md §1 hold (:data:`FLOORS`, ``forbidden`` contracts): the task
records sit below grading, which never imports the task registry; script analysis sits below
the world models; the LLM backends know no task; no runtime module imports build-time code;
nothing below the scoring core reaches up to it; and no package imports the benchmarks. Among
the modules of the three packages there is no import cycle at all, counting imports inside
functions and under ``TYPE_CHECKING`` (a lazy import still ties two modules together). Each
check also runs on a small synthetic package that breaks it, so a check that silently passes
everything fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("trainers", "agents", "wmrl_envs")  # highest first
# Below the scoring core: what it reads (records, the task registry, grading, sandbox, script
# analysis, LLM backends, mutation operators, world models, calibration).
_BELOW_CORE = ("wmrl_envs.task_spec", "wmrl_envs.tasks", "wmrl_envs.grading", "wmrl_envs.sandbox",
               "wmrl_envs.analysis", "wmrl_envs.llm", "wmrl_envs.mutations", "wmrl_envs.world_models",
               "wmrl_envs.calibration")
_CORE_AND_ENVS = ("wmrl_envs.scoring", "wmrl_envs.mle", "wmrl_envs.dsbench", "wmrl_envs.libero",
                  "wmrl_envs.integrations")
# Build-time code: imported by build scripts, bench and tests, never by a runtime module. (The
# suite generator, tasks/build, is not among it: the registry runs it when a built-in suite is
# first used.)
_BUILD = ("wmrl_envs.world_models.build",)


def _modules(*names: str) -> str:
    """An ini list value: one module per indented line."""
    return "".join(f"\n    {name}" for name in names)


def _below_core_except(*names: str) -> tuple[str, ...]:
    return tuple(name for name in _BELOW_CORE if name not in names)


def build_time_contract(runtime: Sequence[str], build: Sequence[str]) -> str:
    """A contract that no ``runtime`` module imports a ``build`` room, directly or through others.

    ``runtime`` may use wildcards that also match the build rooms (``pkg.*``): import-linter skips
    a source that overlaps a forbidden module, so a build room may import itself.
    """
    return (f"[importlinter:contract:build]\nname = no runtime module imports build-time code\n"
            f"type = forbidden\nsource_modules ={_modules(*runtime)}\nforbidden_modules ={_modules(*build)}\n")


#: The floors inside wmrl_envs, and the benchmarks on top of everything (docs/architecture.md §1).
FLOORS = f"""\
[importlinter:contract:records]
name = the task records (task_spec) sit below grading and everything that reads them
type = forbidden
source_modules = wmrl_envs.task_spec
forbidden_modules ={_modules(*_below_core_except("wmrl_envs.task_spec", "wmrl_envs.sandbox"), *_CORE_AND_ENVS)}

[importlinter:contract:grading]
name = grading reads the task records, never the task registry above it
type = forbidden
source_modules = wmrl_envs.grading
forbidden_modules = wmrl_envs.tasks

[importlinter:contract:analysis]
name = script analysis sits below the world models and reads the records, not the task registry
type = forbidden
source_modules = wmrl_envs.analysis
forbidden_modules ={_modules("wmrl_envs.tasks", "wmrl_envs.llm", "wmrl_envs.mutations", "wmrl_envs.world_models",
                             "wmrl_envs.calibration")}

[importlinter:contract:llm]
name = the LLM backends run models and know no task, script or world model
type = forbidden
source_modules = wmrl_envs.llm
forbidden_modules ={_modules(*_below_core_except("wmrl_envs.llm", "wmrl_envs.sandbox"))}

{build_time_contract(("wmrl_envs.*", "wmrl_envs.world_models.*", "agents", "trainers"), _BUILD)}
[importlinter:contract:core]
name = nothing below the scoring core imports it or an env
type = forbidden
source_modules ={_modules(*_BELOW_CORE)}
forbidden_modules ={_modules(*_CORE_AND_ENVS)}

[importlinter:contract:bench]
name = no package imports the benchmarks
type = forbidden
source_modules ={_modules(*LAYERS)}
forbidden_modules = bench
"""


def lint_imports(root: Path, packages: Sequence[str], contracts: str,
                 config_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` on ``contracts`` (ini sections) over ``packages`` found under ``root``."""
    config = config_dir / "importlinter.ini"
    config.write_text("[importlinter]\nroot_packages =\n" + "".join(f"    {p}\n" for p in packages)
                      + "\n" + contracts)
    script = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([str(script), str(config), "--no-cache", "--no-logo"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def check_layers(root: Path, layers: Sequence[str], config_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with a layers contract over ``layers`` (highest first) found under ``root``."""
    contract = textwrap.dedent("""\
        [importlinter:contract:layers]
        name = {name}
        type = layers
        layers =
        {packages}
        """).format(name=" -> ".join(layers), packages="\n".join(f"    {p}" for p in layers))
    return lint_imports(root, layers, contract, config_dir)


def import_cycles(packages: Iterable[str]) -> list[list[str]]:
    """Every import cycle among the packages' modules: the strongly connected components of size > 1.

    grimp records every import statement, including those inside functions and under
    ``TYPE_CHECKING``; Tarjan's algorithm (iterative, so deep graphs need no recursion) finds
    the components.
    """
    graph = grimp.build_graph(*packages, cache_dir=None)
    edges = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, successors = work[-1]
            successor = next(successors, None)
            if successor is not None:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges.get(successor, ()))))
                elif successor in on_stack:
                    low[module] = min(low[module], index[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


# --- the project --------------------------------------------------------------------------------


def test_higher_layers_import_lower_ones_never_the_reverse(tmp_path):
    result = check_layers(REPO, LAYERS, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_runs_back_up_a_floor_of_wmrl_envs_or_into_bench(tmp_path):
    result = lint_imports(REPO, (*LAYERS, "bench"), FLOORS, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_cycles_among_wmrl_envs_agents_and_trainers():
    cycles = import_cycles(LAYERS)
    assert cycles == [], "\n".join(" <-> ".join(cycle) for cycle in cycles)


# --- the checks catch what they must ---------------------------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_checks_report_a_planted_cycle_and_upward_import(tmp_path, monkeypatch):
    packages = tmp_path / "src"
    write_package(packages, {
        "arch_high/__init__.py": "",
        "arch_high/app.py": "import arch_low.core\n",
        "arch_mid/__init__.py": "import arch_low\n",
        "arch_low/__init__.py": "",
        # A cycle closed only by a lazy import inside a function.
        "arch_low/core.py": "from arch_low import util\n",
        "arch_low/util.py": "def helper():\n    from arch_low import core\n    return core\n",
        # An upward import, lazy as well: the low layer reaches into the high one.
        "arch_low/upward.py": "def run():\n    import arch_high.app\n    return arch_high.app\n",
    })
    result = check_layers(packages, ("arch_high", "arch_mid", "arch_low"), tmp_path)
    assert result.returncode != 0
    assert "arch_low is not allowed to import arch_high" in result.stdout, result.stdout + result.stderr

    monkeypatch.syspath_prepend(str(packages))
    cycles = import_cycles(("arch_high", "arch_mid", "arch_low"))
    assert ["arch_low.core", "arch_low.util"] in cycles
    assert ["arch_high.app", "arch_low.upward"] not in cycles  # an upward import alone is no cycle


def test_build_contract_reports_a_runtime_module_that_imports_build_code(tmp_path):
    packages = tmp_path / "src"
    files = {
        "arch_pkg/__init__.py": "",
        "arch_pkg/app.py": "import arch_pkg.models.surrogate\n",
        "arch_pkg/models/__init__.py": "",
        "arch_pkg/models/build/__init__.py": "",
        "arch_pkg/models/build/corpus.py": "from arch_pkg.models import surrogate\n",
        "arch_pkg/models/build/plan.py": "from arch_pkg.models.build import corpus\n",  # build reads build: allowed
        # A runtime module reaching the build room lazily, inside a function.
        "arch_pkg/models/surrogate.py": "def retrain():\n    from arch_pkg.models.build import plan\n    return plan\n",
    }
    contract = build_time_contract(("arch_pkg.*", "arch_pkg.models.*"), ("arch_pkg.models.build",))
    write_package(packages, files)
    result = lint_imports(packages, ("arch_pkg",), contract, tmp_path)
    assert result.returncode != 0
    assert "arch_pkg.models.surrogate -> arch_pkg.models.build.plan" in result.stdout, result.stdout + result.stderr

    write_package(packages, {"arch_pkg/models/surrogate.py": "def retrain():\n    return None\n"})
    result = lint_imports(packages, ("arch_pkg",), contract, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
