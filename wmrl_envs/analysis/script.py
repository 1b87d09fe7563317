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
import logging
import re
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

#: Where the sandbox runs the script: the file name its SyntaxErrors and tracebacks name.
SANDBOX_PATH = "/workspace/solution.py"
#: The Python whose syntax trees the keys hash. ``ast.dump`` prints a tree otherwise from one minor
#: version to another (3.12 added fields, 3.13 leaves empty ones out), so keys made under one
#: never match keys made under another; saved tables say which they were made under.
KEYS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class ParsedScript:
    """A script and what the compiler made of it.

    Attributes:
        source: The script as given.
        tree: Its syntax tree, or None when it does not parse; the caller's alone (a new parse, or
            one a reader handed back unchanged, :func:`hand_back`), so its reader may change it
            (the code features fold constants in place).
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
    reading, tree = _reading(script)
    if tree is None and reading.shape_key is not None:
        tree = _take_spare(script) or _parse(script)
    return ParsedScript(script, tree, reading.syntax_error, reading.compiles)


def hand_back(parsed: ParsedScript) -> None:
    """Give the tree of ``parsed`` to the next reader of its script, who then need not parse it.

    Only a reader that left the tree as it was parsed may hand it back, and it must not touch
    it afterwards (the next reader may change it). The prover does, and the code features, which
    fold theirs in place, then take it: a scorer parses a new script once instead of twice.
    """
    if parsed.tree is None:
        return
    with _READINGS_LOCK:
        _SPARE_TREES[parsed.source] = parsed.tree
        _SPARE_TREES.move_to_end(parsed.source)
        if len(_SPARE_TREES) > _SPARE_LIMIT:
            _SPARE_TREES.popitem(last=False)


def _take_spare(script: str) -> ast.Module | None:
    """The tree a reader handed back for ``script``, now the caller's alone; None without one."""
    with _READINGS_LOCK:
        return _SPARE_TREES.pop(script, None)


def _parse(script: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the run's business, not the parser's
        # Bytes, as the sandbox reads the file: a coding cookie is honoured the same way.
        return ast.parse(script.encode("utf-8", "surrogatepass"), SANDBOX_PATH)


@dataclass(frozen=True)
class _Reading:
    """What one parse and compile of a script tell (:func:`_reading`)."""

    syntax_error: SyntaxError | None
    compiles: bool
    code_key: str
    shape_key: str | None  # None exactly when the script does not parse


#: Readings by script, the most recent last (see :func:`_reading`).
_READINGS: OrderedDict[str, _Reading] = OrderedDict()
_READINGS_LOCK = threading.Lock()
#: Trees handed back by a reader (:func:`hand_back`), the most recent last. A scorer's batch
#: proves all its scripts before the features read them, so the bound is a batch or two; a tree
#: dropped only costs its next reader a parse.
_SPARE_TREES: OrderedDict[str, ast.Module] = OrderedDict()
_SPARE_LIMIT = 256


def _reading(script: str) -> tuple[_Reading, ast.Module | None]:
    """The reading of ``script``, remembered (the last :data:`_KEY_CACHE` scripts): the stages of
    a scorer each want a tree of their own (the features change theirs) but the same verdict and
    keys, and a first reading costs about three parses (parse, compile, dump). A first reading
    also returns the tree it parsed, unchanged, so that its caller need not parse again."""
    with _READINGS_LOCK:
        reading = _READINGS.get(script)
        if reading is not None:
            _READINGS.move_to_end(script)
            return reading, None
    reading, tree = _first_reading(script)
    with _READINGS_LOCK:
        _READINGS[script] = reading
        if len(_READINGS) > _KEY_CACHE:
            _READINGS.popitem(last=False)
    return reading, tree


def _first_reading(script: str) -> tuple[_Reading, ast.Module | None]:
    """What one parse and compile of ``script`` tell, and the tree (None when it does not parse)."""
    try:
        tree = _parse(script)
    except SyntaxError as exc:
        exc.__traceback__ = None  # kept in the cache: its frames are not
        return _Reading(exc, False, _sha256(script), None), None
    except (ValueError, MemoryError, RecursionError, UnicodeError):
        return _Reading(None, False, _sha256(script), None), None
    try:
        dump = ast.dump(tree)
    except (ValueError, RecursionError):  # a hex int literal past Python's digits limit parses, prints not
        dump = None
    # Without a dump the script is known by its text: the same program laid out otherwise is missed.
    code = _sha256(dump) if dump is not None else _sha256(script)
    shape = _sha256(_erase_numbers(dump)) if dump is not None else code
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(tree, SANDBOX_PATH, "exec", dont_inherit=True)
    except SyntaxError as exc:
        exc.__traceback__ = None
        return _Reading(exc, False, code, shape), tree
    except (ValueError, MemoryError, RecursionError, UnicodeError):
        return _Reading(None, False, code, shape), tree
    return _Reading(None, True, code, shape), tree


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
    return _reading(script)[0].code_key


def shape_key(script: str) -> str | None:
    """The script's code up to its numbers (hyperparameters, seeds, sizes), whitespace and
    comments: scripts with one shape key differ at most in numeric literals. Strings are kept,
    since a file name or an estimator's option changes what a program does. None when the
    script does not parse."""
    return _reading(script)[0].shape_key


#: In a tree's ``ast.dump``: a quoted string or bytes (skipped whole, so that text inside a string
#: is never read as code), or a Constant whose value is a number (an int, float or complex literal;
#: never a bool, None or Ellipsis, whose dumps are names). A number's Constant has no ``kind``.
_DUMP_TOKENS = re.compile(
    r"""(?P<quoted>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    r"|Constant\(value=(?:[0-9][0-9a-zA-Z.+-]*|infj?|nanj?)\)",
    re.DOTALL,
)
_NUMBER_ERASED = "Constant(value='<number>')"


def _erase_numbers(dump: str) -> str:
    """``dump`` with every number literal's Constant replaced by one placeholder: the dump of the
    same tree with each number's value set to the string ``<number>``, without a second walk."""
    return _DUMP_TOKENS.sub(lambda m: m.group(0) if m.group("quoted") else _NUMBER_ERASED, dump)


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

    def load_rows(self, rows: Iterable[list[Any]], keys_python: str | None = None) -> None:
        """Rows saved by :meth:`rows`. Rows keyed under another Python (``keys_python``, which was
        :data:`KEYS_PYTHON` where they were saved; None when the save did not say) could never match
        a key made here: they are dropped, with a warning, and the run learns them again."""
        rows = list(rows)
        if keys_python is not None and keys_python != KEYS_PYTHON and rows:
            log.warning("%d saved %s rows were keyed under Python %s, whose syntax trees print otherwise "
                        "than %s's: dropped, so the code they describe will run again", len(rows),
                        self.kind.__name__, keys_python, KEYS_PYTHON)
            rows = []
        self._items = OrderedDict(((task, key), self.kind(**fields)) for task, key, fields in rows)

