"""Every relative link in the README, ``docs/`` and ``bench/README.md`` points at a file that exists.

A link is Markdown's ``[text](target)`` (images included) outside code: fenced blocks and inline
code spans are dropped first, so a path in backticks is not a link. Targets with a scheme
(``http:``, ``https:``, ``mailto:``) and pure ``#anchors`` are skipped; a relative target loses
its ``#anchor`` and resolves against the folder of the file that holds it.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents() -> list[Path]:
    return [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link outside code."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731  (keeps line numbers)
    prose = CODE_SPAN.sub(blank, FENCE.sub(blank, text))
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(prose)]


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """Each relative link of ``path`` whose target does not exist, as ``file:line: target``."""
    broken = []
    for line, target in links(path.read_text()):
        if SCHEME.match(target) or target.startswith("#"):
            continue
        resolved = (path.parent / unquote(target.split("#", 1)[0].split("?", 1)[0])).resolve()
        if resolved.exists():
            continue
        broken.append(f"{path.relative_to(root)}:{line}: {target}")
    return broken


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    broken = broken_links(path)
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


def test_the_check_finds_a_broken_link_and_ignores_code(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#part) [web](https://example.org/x) [top](#top)\n"
                    "`[not a link](gone.md)` and\n```\n[nor this](gone.md)\n```\n"
                    "![img](missing.png) then [bad](nowhere/file.md \"title\")\n")
    targets = [target for _, target in links(page.read_text())]
    assert targets == ["there.md#part", "https://example.org/x", "#top", "missing.png", "nowhere/file.md"]
    assert [b.rsplit(": ", 1)[1] for b in broken_links(page, root=tmp_path)] == ["missing.png", "nowhere/file.md"]
