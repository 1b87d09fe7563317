"""Parsing a solution script the way the sandbox reads it: where every static analysis starts.

:func:`parse_script` is the one parser of scripts: the code features
(:mod:`~wmrl_envs.analysis.code_features`) read their program from its tree, and the prover
(:mod:`~wmrl_envs.analysis.proofs`) takes its verdict on syntax from it as well as the tree it walks.
The script is parsed as bytes, as ``python solution.py`` reads the file (a coding cookie is honoured
the same way), and compiled too, since some errors only the code generator raises (``return``
outside a function, ...).
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

#: Where the sandbox runs the script: the file name its SyntaxErrors and tracebacks name.
SANDBOX_PATH = "/workspace/solution.py"


@dataclass(frozen=True)
class ParsedScript:
    """A script and what the compiler made of it.

    Attributes:
        source: The script as given.
        tree: Its syntax tree, or None when it does not parse; a new tree on every call, so
            its reader may change it (the code features fold constants in place).
        syntax_error: The SyntaxError ``python solution.py`` reports for it, or None. A script
            can parse and still have one (an error only the code generator finds).
        compiles: Whether the compiler accepted it. False with no ``syntax_error`` when the
            compiler failed in a way the sandbox might not (null bytes, nesting too deep).
    """

    source: str
    tree: ast.Module | None
    syntax_error: SyntaxError | None
    compiles: bool


#: Scripts whose compiler verdict and keys are remembered: a batch asks about a script several times
#: (proofs, features, reuse, neighbours, then recording its run), and each ask would parse it again.
_KEY_CACHE = 4096


def parse_script(script: str) -> ParsedScript:
    """Parse and compile ``script`` as the sandbox would run it (see the module docstring)."""
    parses, syntax_error, compiles = _compiler_verdict(script)
    return ParsedScript(script, _parse(script) if parses else None, syntax_error, compiles)


def _parse(script: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the run's business, not the parser's
        # Bytes, as the sandbox reads the file: a coding cookie is honoured the same way.
        return ast.parse(script.encode("utf-8", "surrogatepass"), SANDBOX_PATH)


@lru_cache(maxsize=_KEY_CACHE)
def _compiler_verdict(script: str) -> tuple[bool, SyntaxError | None, bool]:
    """Whether ``script`` parses, the SyntaxError it has, and whether it compiles. Remembered:
    the stages of a scorer each want a tree of their own (the features change theirs) but the same
    verdict, and compiling is about 40% of a first parse (6.4 against 3.7 ms on grammar scripts)."""
    parses = False
    try:
        tree = _parse(script)
        parses = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(tree, SANDBOX_PATH, "exec", dont_inherit=True)
    except SyntaxError as exc:
        exc.__traceback__ = None  # kept in the cache: its frames are not
        return parses, exc, False
    except (ValueError, MemoryError, RecursionError, UnicodeError):
        return parses, None, False
    return True, None, True


def call_name(node: ast.Call) -> str | None:
    """The name a call is made by: ``f`` for ``f(...)`` and ``obj.f(...)``, else None."""
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def code_key(script: str) -> str:
    """The script's code up to whitespace and comments (a hash of its syntax tree), which names
    the same program however it is laid out; the text's own hash when it does not parse."""
    return _keys(script)[0]


def shape_key(script: str) -> str | None:
    """The script's code up to its numbers (hyperparameters, seeds, sizes), whitespace and
    comments: scripts with one shape key differ at most in numeric literals. Strings are kept,
    since a file name or an estimator's option changes what a program does. None when the
    script does not parse."""
    return _keys(script)[1]


class _NumbersErased(ast.NodeTransformer):
    """Every int, float or complex literal (not a bool) becomes one placeholder."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        number = isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool)
        return ast.Constant(value="<number>") if number else node


@lru_cache(maxsize=_KEY_CACHE)
def _keys(script: str) -> tuple[str, str | None]:
    """:func:`code_key` and :func:`shape_key` from one parse (the second erases the tree's numbers)."""
    tree = parse_script(script).tree
    if tree is None:
        return hashlib.sha256(script.encode()).hexdigest(), None
    code = hashlib.sha256(ast.dump(tree).encode()).hexdigest()
    return code, hashlib.sha256(ast.dump(_NumbersErased().visit(tree)).encode()).hexdigest()


Value = TypeVar("Value")


class ScriptTable(Generic[Value]):
    """Dataclass values by ``(task id, script key)`` (:func:`code_key`, :func:`shape_key`), what a
    run learns per script and keeps across steps: the most recently stored (or ``touch``-read)
    last, the least recent dropped past ``limit``. Saved as rows ``[task, key, fields]``."""

    def __init__(self, kind: type[Value], limit: int) -> None:
        self.kind, self.limit = kind, limit
        self._items: OrderedDict[tuple[str, str], Value] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def values(self) -> Iterator[Value]:
        return iter(self._items.values())

    def get(self, key: tuple[str, str], touch: bool = False) -> Value | None:
        """The value of ``key`` (None if absent); ``touch`` makes it the most recent."""
        if touch and key in self._items:
            self._items.move_to_end(key)
        return self._items.get(key)

    def put(self, key: tuple[str, str], value: Value) -> None:
        """Store ``value`` as the most recent, dropping the least recent past ``limit``."""
        self._items.pop(key, None)
        self._items[key] = value
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def rows(self) -> list[list[Any]]:
        return [[task, key, asdict(value)] for (task, key), value in self._items.items()]

    def load_rows(self, rows: Iterable[list[Any]]) -> None:
        self._items = OrderedDict(((task, key), self.kind(**fields)) for task, key, fields in rows)

