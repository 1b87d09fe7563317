"""The README's integration examples are excerpts of files that tests run: they must not drift.

A README code block after ``<!-- example: PATH -->`` must consist of lines of ``PATH`` (compared
without their leading and trailing whitespace, blank lines and a trailing ``\\`` ignored), so
the README shows nothing that the example file, and the test that runs it, does not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = re.compile(r"<!-- example: (\S+) -->\s*```\w*\n(.*?)```", re.S)


def readme_examples() -> list[tuple[str, str]]:
    return EXAMPLE.findall((REPO / "README.md").read_text())


def normalised(line: str) -> str:
    return line.strip().removesuffix("\\").strip()


def test_the_readme_has_an_example_for_each_integration() -> None:
    paths = {path for path, _ in readme_examples()}
    assert {"docs/examples/trl_example.py", "docs/examples/openenv_example.py", "docs/examples/ray_example.py",
            "docs/examples/verl_example.md"} <= paths


@pytest.mark.parametrize(("path", "block"), readme_examples(), ids=lambda v: v if "/" in str(v) else None)
def test_each_readme_example_is_an_excerpt_of_its_file(path: str, block: str) -> None:
    source = {normalised(line) for line in (REPO / path).read_text().splitlines()}
    missing = [line for line in block.splitlines() if normalised(line) and normalised(line) not in source]
    assert not missing, f"README lines not in {path}: {missing}"


def test_the_excerpt_check_fails_on_a_line_the_file_lacks(tmp_path: Path) -> None:
    example = tmp_path / "example.py"
    example.write_text("a = 1\nb = 2\n")
    source = {normalised(line) for line in example.read_text().splitlines()}
    assert normalised("  a = 1") in source and normalised("c = 3") not in source
