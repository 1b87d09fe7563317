"""Benchmark scripts never import one another; what they share lives in helper modules.

A bench *script* is a command (``python -m bench.<name>``: it has an ``if __name__ ==
"__main__"`` block); a *shared module* has none (``bench/common.py``, ``bench/archive.py``, ...).
A script that imports another script runs that script's module-level set-up and couples two
experiments, so any bench module may import shared modules only. grimp reads every import
statement, those inside functions included.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def is_script(path: Path) -> bool:
    """Whether the module at ``path`` is a command (it tests ``__name__ == "__main__"``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__":
            if any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.comparators):
                return True
    return False


def script_imports(package: str, folder: Path) -> list[str]:
    """Every ``importer -> script`` edge between modules of ``package`` (found in ``folder``)."""
    scripts = {f"{package}.{path.stem}" for path in folder.glob("*.py") if is_script(path)}
    graph = grimp.build_graph(package, cache_dir=None)
    return sorted(f"{importer} -> {imported}" for importer in graph.modules if importer.startswith(f"{package}.")
                  for imported in graph.find_modules_directly_imported_by(importer) if imported in scripts)


def test_no_bench_module_imports_a_bench_script():
    assert script_imports("bench", REPO / "bench") == []


def test_the_check_reports_a_script_that_imports_another(tmp_path, monkeypatch):
    package = tmp_path / "planted_bench"
    package.mkdir()
    files = {
        "__init__.py": "",
        "shared.py": "def helper():\n    return 1\n",
        "first.py": "from planted_bench.shared import helper\n\nif __name__ == '__main__':\n    helper()\n",
        # A lazy import inside a function still couples the two scripts.
        "second.py": "def main():\n    from planted_bench import first\n    return first\n\n"
                     "if __name__ == '__main__':\n    main()\n",
    }
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert script_imports("planted_bench", package) == ["planted_bench.second -> planted_bench.first"]
