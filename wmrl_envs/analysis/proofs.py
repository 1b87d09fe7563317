"""Exact static proofs that a solution script fails, found before any world model or execution.

A :class:`Prover` reads a script, as :func:`~wmrl_envs.analysis.script.parse_script` parses it,
with the exact facts of :mod:`wmrl_envs.analysis.facts` (the runtime's modules and signatures,
the task's public files and headers) and returns a :class:`Proof` when a statement that
certainly runs certainly raises:

==========================  ===============================================  ====================
check                       what is proved                                   status (exception)
==========================  ===============================================  ====================
``no_code``                 the response has no fenced Python block          ``no_code``
``syntax``                  ``compile()`` refuses the script                 ``syntax_error``
``missing_module``          an imported module is not in the runtime         ``import_error``
                                                                             (ModuleNotFoundError)
``missing_name``            ``from m import n``: m has no ``n``              ``import_error``
                                                                             (ImportError)
``undefined_name``          a name never bound (pyflakes) is evaluated       ``runtime_error``
                                                                             (NameError)
``module_attribute``        ``np.foo``: the installed module has no ``foo``  ``runtime_error``
                                                                             (AttributeError)
``frame_attribute``         ``df.append``, ``s.iteritems``: DataFrame/Series ``runtime_error``
                            have no such attribute (and no such column, no   (AttributeError)
                            such label in a Series' index)
``keyword``                 a keyword (or a number of positional arguments)  ``runtime_error``
                            the installed callable does not take             (TypeError)
``method_arguments``        ``df.drop("c", 1)``, ``s.fillna(method=...)``:   ``runtime_error``
                            arguments the installed DataFrame/Series method  (TypeError)
                            does not bind
``missing_file``            a literal path read that is not a file           ``runtime_error``
                                                                             (FileNotFoundError)
``missing_column``          a literal column absent from a frame whose       ``runtime_error``
                            columns are known (read, drop, rename followed)  (KeyError)
``missing_directory``       a write into a directory that cannot exist       ``runtime_error``
                                                                             (OSError)
``unfitted_estimator``      ``transform``/``predict`` of a scikit-learn      ``runtime_error``
                            estimator built with no arguments and never      (NotFittedError)
                            handed to anything since (probed in the runtime)
``feature_names``           ``predict``/``transform``... of an estimator, or ``runtime_error``
                            a pipeline of them, fitted on a frame, given a   (ValueError)
                            frame with other column names (the estimator's
                            check probed in the runtime)
==========================  ===============================================  ====================

**A proof is never wrong about failure.** The prover follows execution order through
straight-line code only: the module's top level, the chosen branch of an ``if`` whose test is a
known constant, loops without ``break``/``continue`` over what it knows is iterated (a literal
sequence or dict, a name bound to one, its ``keys()``/``values()``/``items()``, ``range`` of
constants, ``enumerate``/``zip`` of those, a frame's known columns: every iteration, or only
the first of more than :data:`MAX_UNROLL`), and the bodies of functions called from there. It
says nothing about code inside ``try``, ``with``, other loops and branches (an exception there
may be caught, or the code may not run), and nothing at all about a script that can leave early
or run code it cannot see (``exit``, ``os._exit``, ``exec``, ``getattr``, ``importlib``,
``subprocess``, ``sys.modules``, ... :data:`OPAQUE_NAMES`). A reached statement that raises
makes the run fail whatever it wrote before, so the reward (0) and the calibrator's pair are
exact. The proved status is the first certain failure in execution order; a statement before
it that fails for another reason (a model that does not converge in time, say) would end the
run first with another status and the same reward.

Messages read like the sandbox's last traceback line: the same exception class and, where the
runtime's own text is reproducible (module files, pandas' KeyError texts, CPython's "Did you
mean" suggestions), the same text.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import io
import logging
import posixpath
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyflakes import checker, messages

from wmrl_envs import outcome
from wmrl_envs.analysis.facts import RuntimeFacts, TaskFacts, runtime_facts, task_facts
from wmrl_envs.analysis.script import SANDBOX_PATH, ParsedScript, call_name, hand_back, parse_script
from wmrl_envs.errors import SandboxUnavailableError

log = logging.getLogger(__name__)

#: Calls or names after which the prover cannot see what runs, or which can end the run early
#: with exit status 0: a script that uses any of them is never proved to fail (syntax aside).
OPAQUE_NAMES = frozenset({
    "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "__builtins__", "breakpoint", "exit", "quit", "SystemExit", "BaseException", "input",
})
#: Modules whose use makes a script opaque (dynamic imports, other processes, signals, exit hooks).
OPAQUE_MODULES = frozenset({"importlib", "ctypes", "subprocess", "signal", "atexit", "builtins", "code", "codeop",
                            "runpy", "pty", "_thread", "multiprocessing", "threading", "concurrent", "asyncio",
                            "faulthandler", "gc", "inspect", "types", "sysconfig", "site", "pkgutil"})
#: ``os`` functions that end, replace or fork the process, or move the working directory.
OPAQUE_OS = frozenset({"_exit", "kill", "killpg", "abort", "fork", "forkpty", "system", "popen", "chdir", "fchdir",
                       "chroot", "execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe",
                       "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
                       "posix_spawn", "posix_spawnp", "register_at_fork", "putenv", "environ"})
#: ``sys`` attributes a script may read without becoming opaque.
PLAIN_SYS = frozenset({"argv", "version", "version_info", "platform", "maxsize", "float_info", "stdout", "stderr",
                       "getsizeof", "setrecursionlimit"})
#: Names agent code can import from its working directory (the script itself, the data folder).
WORK_DIR_MODULES = frozenset({"solution", "data"})
#: Method or function names that may create or change a file (reads after one are not proved
#: missing, except under ``data/``, which is read-only).
WRITE_NAMES = frozenset({
    "to_csv", "to_parquet", "to_json", "to_pickle", "to_feather", "to_excel", "to_hdf", "to_stata", "to_html",
    "to_latex", "to_markdown", "to_xml", "to_string", "to_sql", "save", "savez", "savez_compressed", "savetxt",
    "tofile", "dump", "write", "write_text", "write_bytes", "writelines", "touch", "mkdir", "makedirs", "copy",
    "copy2", "copyfile", "copytree", "move", "rename", "replace", "symlink", "symlink_to", "link", "hardlink_to",
    "open", "savefig", "memmap", "extractall", "connect", "mkstemp", "mkdtemp", "NamedTemporaryFile",
})
#: Readers whose first argument (or ``path_kw``) is a file that must exist.
READERS = {
    "pandas.read_csv": "filepath_or_buffer", "pandas.read_table": "filepath_or_buffer",
    "pandas.read_parquet": "path", "pandas.read_json": "path_or_buf", "pandas.read_pickle": "filepath_or_buffer",
    "pandas.read_feather": "path", "numpy.load": "file", "numpy.loadtxt": "fname", "numpy.genfromtxt": "fname",
}
#: pandas readers that keep a CSV's header as the frame's columns unless these options change it.
COLUMN_KEEPING_READ_OPTIONS = frozenset({"low_memory", "dtype", "nrows", "na_values", "keep_default_na",
                                         "encoding", "skipinitialspace", "na_filter", "engine"})
#: DataFrame methods that return a frame with the same columns (when not ``inplace``).
SAME_COLUMNS = frozenset({"copy", "fillna", "astype", "head", "tail", "sample", "sort_values", "sort_index",
                          "dropna", "ffill", "bfill", "abs", "round", "clip", "replace", "infer_objects",
                          "convert_dtypes", "drop_duplicates"})
#: DataFrame methods that never change the frame they are called on (without ``inplace``).
READ_ONLY_METHODS = SAME_COLUMNS | frozenset({
    "describe", "info", "isnull", "isna", "notnull", "notna", "sum", "mean", "std", "var", "min", "max", "count",
    "nunique", "value_counts", "corr", "cov", "to_numpy", "select_dtypes", "memory_usage", "duplicated", "any",
    "all", "median", "quantile", "to_dict", "equals", "get", "filter", "merge", "join", "idxmax", "idxmin",
    "skew", "kurt", "nlargest", "nsmallest", "reset_index", "set_index", "rename", "drop", "assign", "melt",
    "pivot", "pivot_table", "groupby", "rolling", "shift", "diff", "rank", "cumsum", "prod", "mode"})
#: Builtins that neither write files nor run agent code.
PURE_BUILTINS = frozenset({"print", "len", "str", "int", "float", "bool", "round", "format", "repr", "sorted",
                           "list", "tuple", "dict", "set", "min", "max", "sum", "abs", "isinstance", "type",
                           "range", "enumerate", "zip", "any", "all", "map", "filter", "reversed", "hash", "id"})
#: dict methods that change nothing.
DICT_READERS = frozenset({"get", "keys", "values", "items", "copy"})
#: Estimator parameters that no method of a scikit-learn estimator reads before it checks its input's
#: column names (capacity, regularisation, seeds, threads): an estimator built with only these, as
#: constants, refuses other column names as the default-built one the facts probed does.
NAME_NEUTRAL_PARAMS = frozenset({
    "random_state", "n_jobs", "verbose", "n_estimators", "max_depth", "max_iter", "max_leaf_nodes",
    "min_samples_leaf", "min_samples_split", "max_features", "learning_rate", "subsample", "C", "alpha",
    "l1_ratio", "tol", "class_weight", "fit_intercept", "n_neighbors", "hidden_layer_sizes", "early_stopping",
    "l2_regularization", "criterion", "bootstrap", "with_mean", "with_std", "strategy", "fill_value"})
#: Libraries whose functions write files only through the names in :data:`WRITE_NAMES`.
_LIBRARIES = ("numpy.", "pandas.", "sklearn.", "scipy.")
_BUILTINS = frozenset(dir(builtins))
# A word any opaque construct needs (a superset: the tree walk decides).
_OPAQUE_WORDS = "|".join(sorted(OPAQUE_NAMES | OPAQUE_MODULES))
_OPAQUE_HINT = re.compile(rf"\b(?:{_OPAQUE_WORDS}|os|sys|from\s+\.|import\s+\*|async|await|yield|global|nonlocal)\b")
MAX_UNROLL = 64
MAX_CALL_DEPTH = 4
#: Statements walked per script (nested loops multiply) before the prover gives up on it.
MAX_STATEMENTS = 20_000
_WORKSPACE = posixpath.dirname(SANDBOX_PATH)  # the run's working directory


@dataclass(frozen=True)
class Proof:
    """A proved failure.

    Attributes:
        status: The outcome (:mod:`wmrl_envs.outcome`), never ``valid``.
        exception: The exception's short class name (None for ``no_code``).
        message: The sandbox-style last line (``KeyError: 'Survived'``) or the reason.
        line: The script line that fails (1-based), when there is one.
        check: Which check proved it (the table in the module docstring).
    """

    status: str
    exception: str | None
    message: str
    line: int | None
    check: str


class _Proved(Exception):
    def __init__(self, proof: Proof) -> None:
        super().__init__(proof.message)
        self.proof = proof


class _Opaque(Exception):
    """The walk met something it cannot follow: say nothing from here on."""


# ----------------------------------------------------------------------------- abstract values


class _Unknown:
    def __repr__(self) -> str:
        return "?"


UNKNOWN = _Unknown()


@dataclass
class _Const:
    value: Any


@dataclass
class _Module:
    name: str


@dataclass
class _Callable:
    path: str  # "module.name" as imported


@dataclass
class _Frame:
    """A pandas DataFrame; ``columns`` None when not known exactly. ``plain_index``: while the
    columns are known, its index certainly holds no string label (a CSV's rows, or some of them)."""

    columns: list[str] | None
    plain_index: bool = False


@dataclass
class _Keys:
    """A dict literal whose keys are constant strings, with the abstract value of each."""

    keys: tuple[str, ...]
    values: tuple[Any, ...]


@dataclass
class _Series:
    """A pandas Series: one column of a frame whose columns were known. ``plain_index``: its index
    holds no string label, so no attribute name is answered by a label (``NDFrame.__getattr__``)."""

    plain_index: bool


@dataclass
class _Columns:
    frame: _Frame


@dataclass
class _Estimator:
    """A scikit-learn estimator, or a pipeline of them, that the walk built (facts probed, :mod:`.facts`).

    Attributes:
        unfitted: What each method raises before any fit, for one built with its defaults ({} else).
        names_checked: Per fitting method (``fit``, ``fit_transform``): the methods that then refuse
            a frame whose column names are not those it was fitted on, with the line they raise.
        returns_self: ``fit`` returns the estimator itself.
        pipeline: A pipeline, whose steps (reached through it) may be fitted apart.
        fresh: Never fitted nor handed to anything since it was built.
        fitted_on: The fitting method and the column names of the frame it was last fitted on,
            while nothing else can have fitted it since.
    """

    unfitted: dict[str, str]
    names_checked: dict[str, dict[str, str]]
    returns_self: bool = False
    pipeline: bool = False
    fresh: bool = True
    fitted_on: tuple[str, tuple[str, ...]] | None = None

    def forget(self) -> None:
        """Anything may have fitted it since."""
        self.fresh, self.fitted_on = False, None


@dataclass
class _UserFunction:
    node: ast.FunctionDef


# ----------------------------------------------------------------------------- the prover


class Prover:
    """Proves failures of scripts for tasks (see the module docstring); thread-safe, cached.

    Args:
        facts: The runtime facts (default: the sandbox runtime's, introspected once).
        cache_size: Scripts whose verdict is remembered (:func:`shared_prover` is the one a scorer
            and its world model share, so a script asked about by both is proved once).
    """

    def __init__(self, facts: RuntimeFacts | None = None, cache_size: int = 4096) -> None:
        self._facts = facts
        self._unavailable = False
        self._cache: OrderedDict[tuple[str, str], Proof | None] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def facts(self) -> RuntimeFacts | None:
        """The runtime facts; None (and no proofs) when the runtime cannot be introspected."""
        if self._facts is None and not self._unavailable:
            try:
                self._facts = runtime_facts()
            except SandboxUnavailableError as exc:
                self._unavailable = True
                log.warning("no static proofs: the agent runtime cannot be introspected (%s)", exc)
        return self._facts

    def __getstate__(self) -> dict[str, Any]:
        return {"_facts": None, "_cache_size": self._cache_size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(None, state["_cache_size"])

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self is _SHARED.get("prover"):
            return shared_prover, ()  # unpickled, it is the receiving process's shared prover
        return super().__reduce_ex__(protocol)

    def prove(self, task: Any, script: str | None) -> Proof | None:
        """The proved failure of ``script`` on ``task``, or None when nothing is proved."""
        if script is None:
            return Proof(outcome.NO_CODE, None, "no fenced ```python block found in the response", None, "no_code")
        key = (str(task.public_dir), hashlib.sha256(script.encode("utf-8", "surrogatepass")).hexdigest())
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        proof = self._prove(task, script)
        with self._lock:
            self._cache[key] = proof
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return proof

    def _prove(self, task: Any, script: str) -> Proof | None:
        parsed = parse_script(script)
        try:
            return self._prove_parsed(task, script, parsed)
        finally:
            hand_back(parsed)  # the walk only reads the tree: the features need not parse it again

    def _prove_parsed(self, task: Any, script: str, parsed: ParsedScript) -> Proof | None:
        if parsed.syntax_error is not None:
            error = parsed.syntax_error
            return Proof(outcome.SYNTAX_ERROR, type(error).__name__, _exception_line(error), error.lineno, "syntax")
        if not parsed.compiles:
            return None  # the compiler failed in a way the sandbox might not
        tree = parsed.tree
        if _opaque(tree, script) or self.facts is None:
            return None
        try:
            public = task_facts(Path(task.public_dir))
        except OSError:
            return None  # no public folder to read: the run will say what is wrong
        walker = _Walker(self.facts, public, tree)
        try:
            walker.run()
        except _Proved as proved:
            return proved.proof
        except (_Opaque, RecursionError):
            return None
        return None


_SHARED: dict[str, Prover] = {}
_SHARED_LOCK = threading.Lock()


def shared_prover() -> Prover:
    """The process's prover, with the sandbox runtime's facts: a scorer settles proofs before its
    world model predicts, and both ask, so sharing one cache finds each script's proof once."""
    with _SHARED_LOCK:
        if "prover" not in _SHARED:
            _SHARED["prover"] = Prover()
        return _SHARED["prover"]


def _exception_line(exc: BaseException, tb: Any = None) -> str:
    """The last line CPython's own excepthook prints for ``exc`` (suggestions included)."""
    buffer, saved = io.StringIO(), sys.stderr
    try:
        sys.stderr = buffer
        sys.__excepthook__(type(exc), exc, tb)
    finally:
        sys.stderr = saved
    lines = [line for line in buffer.getvalue().splitlines() if line and not line.startswith(" ")]
    return lines[-1] if lines else f"{type(exc).__name__}: {exc}"


class _Dir:
    """An object whose ``dir()`` is the given names: CPython computes "Did you mean" from it."""

    def __init__(self, names: list[str]) -> None:
        self._names = names

    def __dir__(self) -> list[str]:
        return self._names


def _attribute_message(text: str, name: str, candidates: list[str]) -> str:
    return _exception_line(AttributeError(text, name=name, obj=_Dir(candidates)))


def _name_message(name: str, bound: list[str]) -> str:
    namespace = {n: None for n in bound}
    namespace["__builtins__"] = builtins
    try:
        exec(compile(name, "<proof>", "eval"), namespace)
    except NameError as exc:
        return _exception_line(exc, exc.__traceback__)
    return f"NameError: name '{name}' is not defined"


def _opaque(tree: ast.Module, script: str) -> bool:
    """Whether the script uses anything after which the prover cannot see what runs."""
    if not _OPAQUE_HINT.search(script):
        return False  # none of the words below appears: no need to walk the tree
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in OPAQUE_NAMES:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if getattr(node, "level", 0) or any(m.split(".")[0] in OPAQUE_MODULES for m in modules):
                return True
            if isinstance(node, ast.ImportFrom) and node.module in ("os", "sys") and any(
                    a.name == "*" or a.name in OPAQUE_OS or (node.module == "sys" and a.name not in PLAIN_SYS)
                    for a in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in OPAQUE_OS:
                return True
            if node.value.id == "sys" and node.attr not in PLAIN_SYS:
                return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and any(n in ("os", "sys") for n in node.names):
            return True
        if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.Yield, ast.YieldFrom)):
            return True
    return False


def _undefined_names(tree: ast.Module) -> set[tuple[int, int, str]]:
    """(line, column, name) of every name pyflakes reports as never bound."""
    report = checker.Checker(tree, filename=SANDBOX_PATH)
    return {(m.lineno, m.col, m.message_args[0]) for m in report.messages if isinstance(m, messages.UndefinedName)}


@dataclass
class _Scope:
    """Names visible while walking: a function's locals over the module's globals."""

    names: dict[str, Any]
    parent: _Scope | None = None
    local_names: frozenset[str] = frozenset()
    global_names: frozenset[str] = frozenset()

    def lookup(self, name: str) -> Any:
        if name in self.names:
            return self.names[name]
        if self.parent is not None and name not in self.local_names:
            return self.parent.lookup(name)
        return UNKNOWN

    def is_bound(self, name: str) -> bool:
        """Whether the script may have bound ``name`` (else it is a builtin or undefined)."""
        if name in self.names or name in self.local_names:
            return True
        return self.parent is not None and self.parent.is_bound(name)

    def bind(self, name: str, value: Any) -> None:
        if self.parent is not None and name in self.global_names:
            self.parent.bind(name, value)
        else:
            self.names[name] = value

    def bound(self) -> list[str]:
        return sorted(set(self.names) | (set(self.parent.bound()) if self.parent else set()))

    def chain(self) -> Iterator[_Scope]:
        scope: _Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent


@dataclass
class _Walker:
    """Follows a script's straight-line code in execution order (see the module docstring).

    What it knows of values is kept only while nothing it cannot follow may have changed them:
    code that may or may not run, and any call into the script's own functions, make it forget
    every frame's columns, every mutable constant and what fitted each estimator; a value that
    goes where it does not look (a list of values it does not follow, an attribute, a call) is
    forgotten, and a loop whose body may change what it iterates is not walked further.
    """

    facts: RuntimeFacts
    task: TaskFacts
    tree: ast.Module
    undefined: set[tuple[int, int, str]] | None = None  # pyflakes' report, read on first need
    wrote: bool = False  # a call that may have created a file has run
    escaped: bool = False  # the script's own code was handed out: any call may run it
    built: dict[ast.Call, _Estimator] = field(default_factory=dict)  # the estimator each call last built
    statements: int = 0  # walked so far (see MAX_STATEMENTS)
    calls: list[str] = field(default_factory=list)  # user functions being walked

    def run(self) -> None:
        scope = _Scope({"__name__": _Const("__main__"), "__file__": _Const(SANDBOX_PATH)})
        self._block(self.tree.body, scope)

    # ------------------------------------------------------------------ statements
    def _block(self, body: list[ast.stmt], scope: _Scope) -> bool:
        """Walk statements in order; False once the rest of the block may not run (a return)."""
        for stmt in body:
            if not self._statement(stmt, scope):
                return False
        return True

    def _statement(self, stmt: ast.stmt, scope: _Scope) -> bool:
        self.statements += 1
        if self.statements > MAX_STATEMENTS:
            raise _Opaque("too many statements to walk")
        if isinstance(stmt, ast.Expr):
            self._eval(stmt.value, scope)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is None:
                return True
            if _unpacks(stmt):  # ``a, b = x, y``: each name takes its value, as if assigned alone
                values = [self._eval(e, scope) for e in stmt.value.elts]  # type: ignore[union-attr]
                for target in stmt.targets:  # type: ignore[union-attr]
                    for element, value in zip(target.elts, values):  # type: ignore[attr-defined]
                        self._assign(element, value, scope)
                return True
            value = self._eval(stmt.value, scope)
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                self._assign(target, value, scope)
        elif isinstance(stmt, ast.AugAssign):
            self._eval(stmt.value, scope)
            self._assign(stmt.target, UNKNOWN, scope, augmented=True)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self._import(alias.name, stmt)
                top = alias.name.split(".")[0]
                scope.bind(alias.asname or top, _Module(alias.name if alias.asname else top))
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                scope.bind(alias.asname or alias.name, self._import_from(stmt.module or "", alias.name, stmt))
        elif isinstance(stmt, ast.FunctionDef):
            for default in [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]:
                self._eval(default, scope)
            for decorator in stmt.decorator_list:
                self._eval(decorator, scope)
            scope.bind(stmt.name, UNKNOWN if stmt.decorator_list else _UserFunction(stmt))
        elif isinstance(stmt, ast.If):
            test = self._eval(stmt.test, scope)
            if isinstance(test, _Const):
                return self._block(stmt.body if test.value else stmt.orelse, scope)
            return self._unseen(stmt.body + stmt.orelse, scope)
        elif isinstance(stmt, ast.For):
            return self._for(stmt, scope)
        elif isinstance(stmt, ast.While):
            self._eval(stmt.test, scope)
            return self._unseen(stmt.body + stmt.orelse, scope)
        elif isinstance(stmt, ast.With):
            for item in stmt.items:
                self._eval(item.context_expr, scope)
            return self._unseen([stmt], scope)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self._eval(stmt.value, scope)
            return False
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                self._delete(target, scope)
        elif isinstance(stmt, (ast.Pass, ast.Global, ast.Nonlocal)):
            pass
        elif isinstance(stmt, (ast.Break, ast.Continue, ast.Raise)):
            raise _Opaque(type(stmt).__name__)
        else:
            # try, match, class bodies, assert: not followed. A class body or a try may raise,
            # which is still a failure; what they bind or change is unknown from here on.
            return self._unseen([stmt], scope)
        return True

    def _for(self, stmt: ast.For, scope: _Scope) -> bool:
        """A loop over items it knows runs its body for each, in order; of a loop over more than
        :data:`MAX_UNROLL` items, only the first iteration is walked (the rest is unseen)."""
        items, sources = self._iteration(stmt.iter, scope)
        jumps = any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(stmt))
        if items is None or jumps or stmt.orelse:
            return self._unseen([stmt], scope)
        watched = [source for source in sources if self._held(source, scope)]
        for index, item in enumerate(items):
            if index == 1 and len(items) > MAX_UNROLL:
                return self._unseen([stmt], scope)  # too long to unroll: its first iteration is certain
            self._bind_item(stmt.target, item, scope)
            if not self._block(stmt.body, scope):
                return False
            if not all(self._held(source, scope) for source in watched):
                # The body may have changed what the loop reads next: the rest is not known.
                return self._unseen([stmt], scope)
        return True

    def _iteration(self, node: ast.expr, scope: _Scope) -> tuple[list[Any] | None, list[Any]]:
        """What a ``for`` over ``node`` binds, in order (None when not known; at most
        :data:`MAX_UNROLL` + 1 items), and the mutable values it reads as it goes. Evaluates
        ``node`` once, as Python does; a tuple item is one per ``enumerate``/``zip``/``items()``."""
        if isinstance(node, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return [self._eval(e, scope) for e in node.elts], []  # a new sequence: nothing else can change it
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not scope.is_bound(node.func.id) \
                and node.func.id in ("range", "enumerate", "zip") and node.args and not node.keywords \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            if node.func.id == "range":
                bounds = [self._eval(a, scope) for a in node.args]
                if len(bounds) > 3 or not all(isinstance(b, _Const) and type(b.value) is int for b in bounds) \
                        or (len(bounds) == 3 and bounds[2].value == 0):
                    return None, []
                return [_Const(i) for i in range(*(b.value for b in bounds))[:MAX_UNROLL + 1]], []
            if node.func.id == "enumerate" and len(node.args) > 1:
                for argument in node.args:
                    self._eval(argument, scope)
                return None, []
            parts = [self._iteration(a, scope) for a in node.args]
            if any(items is None for items, _ in parts):
                return None, []
            sources = [source for _, part in parts for source in part]
            if node.func.id == "enumerate":
                return [(_Const(i), item) for i, item in enumerate(parts[0][0])], sources
            return [tuple(group) for group in zip(*(items for items, _ in parts))], sources
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.attr in ("keys", "values", "items") and not node.args and not node.keywords \
                and isinstance(scope.lookup(node.func.value.id), _Keys):
            mapping = self._eval(node.func.value, scope)
            pairs = list(zip(mapping.keys, mapping.values))
            views = {"keys": [_Const(k) for k, _ in pairs], "values": [v for _, v in pairs],
                     "items": [(_Const(k), v) for k, v in pairs]}
            return views[node.func.attr], [mapping]
        value = self._eval(node, scope)
        if isinstance(value, _Const) and isinstance(value.value, (list, tuple)):
            return [_Const(v) for v in value.value[:MAX_UNROLL + 1]], [value] if isinstance(value.value, list) else []
        if isinstance(value, _Keys):
            return [_Const(k) for k in value.keys], [value]
        if isinstance(value, _Columns) and value.frame.columns is not None:
            return [_Const(c) for c in value.frame.columns], []  # the Index it iterates cannot change
        return None, []

    def _bind_item(self, target: ast.expr, item: Any, scope: _Scope) -> None:
        """Bind one iteration's item; a tuple item unpacks into a target of its length."""
        if isinstance(item, tuple):
            if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(item) \
                    and not any(isinstance(e, ast.Starred) for e in target.elts):
                for element, part in zip(target.elts, item):
                    self._bind_item(element, part, scope)
                return
            item = _Const(tuple(p.value for p in item)) if all(isinstance(p, _Const) for p in item) else UNKNOWN
        self._assign(target, item, scope)

    @staticmethod
    def _held(value: Any, scope: _Scope) -> bool:
        """Whether a name in scope still holds ``value`` (a changed mutable value is unbound)."""
        return any(held is value for s in scope.chain() for held in s.names.values())

    def _unseen(self, body: list[ast.stmt], scope: _Scope) -> bool:
        """Code that may or may not run: forget whatever it could change. False when it may
        return from the function being walked (then nothing after it is certain to run)."""
        region = ast.Module(body=body, type_ignores=[])
        for node in ast.walk(region):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                self.escaped = True  # e.g. a transformer class's methods, called by a pipeline later
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                scope.bind(node.id, UNKNOWN)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                scope.bind(node.name, UNKNOWN)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    scope.bind(alias.asname or alias.name.split(".")[0], UNKNOWN)
            elif isinstance(node, ast.Call):
                self.wrote = True  # any call in there may write a file
        self._forget_all(scope)
        return not _may_return(body)

    def _forget_all(self, scope: _Scope) -> None:
        """Every frame loses its known columns, every estimator what fitted it, and every
        mutable value (and Series, which a name may now hold no more) its value."""
        for s in scope.chain():
            for name, value in list(s.names.items()):
                if isinstance(value, _Frame):
                    value.columns = None
                elif isinstance(value, _Estimator):
                    value.forget()
                elif _mutable(value):
                    s.names[name] = UNKNOWN

    def _forget(self, value: Any, scope: _Scope) -> None:
        """One value may have changed in place: forget it under every name that holds it, or a
        constant that shares a list with it, and what a dict of it holds."""
        if isinstance(value, _Frame):
            value.columns = None
        elif isinstance(value, _Estimator):
            value.forget()  # whatever it was handed to may fit it
        elif _mutable(value):
            shared = _containers(value)
            for s in scope.chain():
                for name, held in list(s.names.items()):
                    if _reaches(held, value, shared):
                        s.names[name] = UNKNOWN
            if isinstance(value, _Keys):
                for held in value.values:
                    self._forget(held, scope)

    # ------------------------------------------------------------------ imports
    def _module_known_absent(self, module: str) -> bool:
        top = module.split(".")[0]
        if top in WORK_DIR_MODULES:
            return False
        if top not in self.facts.top_level:
            return True
        parent, _, leaf = module.rpartition(".")
        info = self.facts.modules.get(parent)
        return bool(parent and info is not None and info["submodules"] and module not in self.facts.modules
                    and leaf not in info["submodules"])

    def _import(self, module: str, stmt: ast.stmt) -> None:
        # A script that may have written files could have put a module of that name in its
        # work dir, which comes first on sys.path: only imports before any write are proved.
        if self.wrote or not self._module_known_absent(module):
            return
        parts = module.split(".")
        absent = next(".".join(parts[:i]) for i in range(1, len(parts) + 1)
                      if self._module_known_absent(".".join(parts[:i])))
        raise _Proved(Proof(outcome.IMPORT_ERROR, "ModuleNotFoundError",
                            f"ModuleNotFoundError: No module named '{absent}'", stmt.lineno, "missing_module"))

    def _import_from(self, module: str, name: str, stmt: ast.stmt) -> Any:
        self._import(module, stmt)
        info = self.facts.modules.get(module)
        if info is None:
            return UNKNOWN
        if name in info["submodules"] or f"{module}.{name}" in self.facts.modules:
            return _Module(f"{module}.{name}")
        if name in info["names"]:
            return _Callable(f"{module}.{name}")
        if self.wrote or not (info["complete"] or name in self.facts.public_names):
            return UNKNOWN
        where = self.facts.module_file(module)
        text = f"ImportError: cannot import name '{name}' from '{module}'" + (f" ({where})" if where else "")
        raise _Proved(Proof(outcome.IMPORT_ERROR, "ImportError", text, stmt.lineno, "missing_name"))

    # ------------------------------------------------------------------ assignment
    def _assign(self, target: ast.expr, value: Any, scope: _Scope, augmented: bool = False) -> None:
        if isinstance(target, ast.Name):
            scope.bind(target.id, UNKNOWN if augmented else value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value.value if isinstance(value, _Const) and isinstance(value.value, (list, tuple)) else None
            if items is not None and len(items) == len(target.elts) and not augmented:
                for element, item in zip(target.elts, items):
                    self._assign(element, _Const(item), scope)
            else:
                for element in target.elts:
                    self._assign(element, UNKNOWN, scope)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, UNKNOWN, scope)
        elif isinstance(target, ast.Subscript):
            container = self._eval(target.value, scope)
            key = self._eval(target.slice, scope)
            if isinstance(target.value, ast.Name) and isinstance(container, _Frame) and container.columns is not None:
                if augmented:
                    self._check_columns(container, key, target)
                elif isinstance(key, _Const) and isinstance(key.value, str):
                    if key.value not in container.columns:
                        container.columns.append(key.value)
                    return
            self._forget_root(target, scope)
            self._forget(value, scope)  # now also held where the walk does not look
        elif isinstance(target, ast.Attribute):
            self._eval(target.value, scope)
            self._forget_root(target, scope)
            self._forget(value, scope)

    def _forget_root(self, node: ast.expr, scope: _Scope) -> None:
        """A store or an in-place call through ``x[...]``, ``x.a``, ``x.loc[...]``: x may have changed."""
        root = _root_name(node)
        if root is not None:
            self._forget(scope.lookup(root), scope)

    def _delete(self, target: ast.expr, scope: _Scope) -> None:
        if isinstance(target, ast.Name):
            self._eval(target, scope)
            scope.bind(target.id, UNKNOWN)
            return
        if isinstance(target, ast.Subscript):
            container = self._eval(target.value, scope)
            key = self._eval(target.slice, scope)
            if isinstance(target.value, ast.Name) and isinstance(container, _Frame) \
                    and container.columns is not None and isinstance(key, _Const) and isinstance(key.value, str):
                self._check_columns(container, key, target, drop=True)
                container.columns.remove(key.value)
                return
        else:
            self._eval(target, scope)
        self._forget_root(target, scope)

    # ------------------------------------------------------------------ expressions
    def _eval(self, node: ast.expr, scope: _Scope) -> Any:
        """The abstract value of ``node``, evaluating eagerly what Python always evaluates."""
        if isinstance(node, ast.Constant):
            return _Const(node.value)
        if isinstance(node, ast.Name):
            return self._name(node, scope)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            values = [self._eval(e, scope) for e in node.elts]
            if isinstance(node, ast.Set) or not all(isinstance(v, _Const) for v in values):
                for value in values:
                    self._forget(value, scope)  # held by a container the walk does not follow now
                return UNKNOWN
            items = [v.value for v in values]
            return _Const(items if isinstance(node, ast.List) else tuple(items))
        if isinstance(node, ast.Dict):
            pairs = [(None if k is None else self._eval(k, scope), self._eval(v, scope))
                     for k, v in zip(node.keys, node.values)]  # key, value, key, ... as Python does
            if all(isinstance(k, _Const) and isinstance(k.value, str) for k, _ in pairs):
                mapping = {}
                for key, value in pairs:
                    mapping[key.value] = value  # a repeated key keeps its place and takes the last value
                return _Keys(tuple(mapping), tuple(mapping.values()))
            return UNKNOWN
        if isinstance(node, ast.Attribute):
            owner = self._eval(node.value, scope)
            if isinstance(owner, _Estimator) and owner.pipeline:
                owner.forget()  # a step reached through it may be fitted apart
            return self._attribute(node, owner)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, self._eval(node.value, scope), self._eval(node.slice, scope), scope)
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, scope)
            right = self._eval(node.comparators[0], scope)  # later comparators short-circuit
            if len(node.ops) == 1 and isinstance(left, _Const) and isinstance(right, _Const):
                return _fold_compare(node.ops[0], left.value, right.value)
            return UNKNOWN
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, scope), self._eval(node.right, scope)
            if isinstance(node.op, ast.Add) and isinstance(left, _Const) and isinstance(right, _Const) \
                    and type(left.value) is type(right.value) and isinstance(left.value, (str, tuple)):
                return _Const(left.value + right.value)
            return UNKNOWN
        if isinstance(node, ast.UnaryOp):
            operand = self._eval(node.operand, scope)
            if isinstance(node.op, ast.Not) and isinstance(operand, _Const):
                return _Const(not operand.value)
            return UNKNOWN
        if isinstance(node, ast.BoolOp):
            self._eval(node.values[0], scope)  # the others may short-circuit
            return UNKNOWN
        if isinstance(node, ast.IfExp):
            test = self._eval(node.test, scope)
            if isinstance(test, _Const):
                return self._eval(node.body if test.value else node.orelse, scope)
            return UNKNOWN
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self._eval(part.value, scope)
            return UNKNOWN
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            self._eval(node.generators[0].iter, scope)  # the rest runs per element, maybe never
            self.wrote = True  # and may call anything
            self._forget_all(scope)
            return UNKNOWN
        if isinstance(node, ast.Starred):
            self._eval(node.value, scope)
            return UNKNOWN
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self._eval(part, scope)
            return UNKNOWN
        if isinstance(node, ast.Lambda):
            self.escaped = True
            return UNKNOWN
        raise _Opaque(type(node).__name__)  # walrus and the like: not followed

    def _name(self, node: ast.Name, scope: _Scope, called: bool = False) -> Any:
        if not scope.is_bound(node.id) and node.id not in _BUILTINS and self._undefined(node):
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "NameError", _name_message(node.id, scope.bound()),
                                node.lineno, "undefined_name"))
        value = scope.lookup(node.id)
        if isinstance(value, _UserFunction) and not called:
            self.escaped = True  # a function passed around may be called by anything, later
        return value

    def _undefined(self, node: ast.Name) -> bool:
        """Whether pyflakes reports this name as bound nowhere (it runs only for such candidates)."""
        if self.undefined is None:
            self.undefined = _undefined_names(self.tree)
        return (node.lineno, node.col_offset, node.id) in self.undefined

    def _attribute(self, node: ast.Attribute, value: Any) -> Any:
        if isinstance(value, _Module):
            return self._module_attribute(node, value.name)
        if isinstance(value, _Frame):
            if node.attr == "columns":
                return _Columns(value)
            self._frame_attribute(node, value)
        elif isinstance(value, _Series) and value.plain_index:
            self._series_attribute(node)
        return UNKNOWN

    def _module_attribute(self, node: ast.Attribute, module: str) -> Any:
        info = self.facts.modules.get(module)
        full = f"{module}.{node.attr}"
        if info is None:
            return UNKNOWN
        if full in self.facts.modules:
            return _Module(full)
        if node.attr in info["names"]:
            return _Callable(full)
        # A submodule becomes an attribute once anything imports it: not provably absent.
        if node.attr in info["submodules"] or not (info["complete"] or node.attr in self.facts.public_names):
            return UNKNOWN
        text = _attribute_message(f"module '{module}' has no attribute '{node.attr}'", node.attr, info["names"])
        raise _Proved(Proof(outcome.RUNTIME_ERROR, "AttributeError", text, node.lineno, "module_attribute"))

    def _frame_attribute(self, node: ast.Attribute, frame: _Frame) -> None:
        info = self._pandas_class("DataFrame")
        if info is None or frame.columns is None:
            return
        if node.attr in info["attrs"] or node.attr.startswith("_") or node.attr in frame.columns:
            return  # a column of that name answers it (DataFrame.__getattr__)
        candidates = sorted(set(info["attrs"]) | {c for c in frame.columns if c.isidentifier()})
        text = _attribute_message(f"'DataFrame' object has no attribute '{node.attr}'", node.attr, candidates)
        raise _Proved(Proof(outcome.RUNTIME_ERROR, "AttributeError", text, node.lineno, "frame_attribute"))

    def _series_attribute(self, node: ast.Attribute) -> None:
        """AttributeError for a name a Series class lacks (its plain index answers none)."""
        info = self._pandas_class("Series")
        if info is None or node.attr in info["attrs"] or node.attr.startswith("_"):
            return
        # "Did you mean" comes from the instance's dir(), which some names join for some dtypes
        # only: the message is certain when they do not change the suggestion.
        varies = set(info.get("dir_varies", ()))
        text = f"'Series' object has no attribute '{node.attr}'"
        message = _attribute_message(text, node.attr, sorted(set(info["attrs"]) - varies))
        if message == _attribute_message(text, node.attr, sorted(set(info["attrs"]) | varies)):
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "AttributeError", message, node.lineno, "frame_attribute"))

    def _pandas_class(self, name: str) -> dict[str, Any] | None:
        """The facts of ``pandas.DataFrame`` or ``pandas.Series``."""
        return self.facts.classes.get(self.facts.callables.get(f"pandas.{name}", {}).get("class", ""))

    def _subscript(self, node: ast.Subscript, value: Any, key: Any, scope: _Scope) -> Any:
        if isinstance(value, _Estimator) and value.pipeline:
            value.forget()  # ``pipe[0]``: a step that may be fitted apart
        if isinstance(value, _Keys):
            if isinstance(key, _Const) and key.value in value.keys:
                return value.values[value.keys.index(key.value)]  # the very value, changed where it is
            for held in value.values:
                self._forget(held, scope)  # one of them, unknown which, is now held elsewhere
            return UNKNOWN
        if isinstance(value, _Frame):
            if value.columns is None:
                return UNKNOWN
            self._check_columns(value, key, node)
            if isinstance(key, _Const) and isinstance(key.value, list):
                return _Frame(list(key.value), value.plain_index)
            if isinstance(key, _Columns) and key.frame.columns is not None:
                return _Frame(list(key.frame.columns), value.plain_index)
            if isinstance(key, _Const) and isinstance(key.value, str) and value.columns.count(key.value) == 1:
                return _Series(value.plain_index)
            return UNKNOWN
        if isinstance(value, _Const) and isinstance(key, _Const) and isinstance(value.value, (list, tuple, str)) \
                and isinstance(key.value, int) and not isinstance(key.value, bool):
            try:
                return _Const(value.value[key.value])
            except IndexError:
                return UNKNOWN
        return UNKNOWN

    def _check_columns(self, frame: _Frame, key: Any, node: ast.AST, drop: bool = False) -> None:
        """KeyError when ``frame[key]`` (or ``frame.drop(columns=key)``) names an absent column."""
        if frame.columns is None:
            return
        if isinstance(key, _Columns):
            if key.frame.columns is None:
                return
            wanted: Any = tuple(key.frame.columns)
        elif isinstance(key, _Const) and isinstance(key.value, str):
            wanted = key.value
        elif isinstance(key, _Const) and isinstance(key.value, list) and all(isinstance(v, str) for v in key.value):
            wanted = tuple(key.value)
        else:
            return
        names = [wanted] if isinstance(wanted, str) else wanted
        if all(n in frame.columns for n in names):
            return
        text = _pandas_key_error(tuple(frame.columns), wanted, drop)
        if text is not None:
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "KeyError", text, getattr(node, "lineno", None),
                                "missing_column"))

    # ------------------------------------------------------------------ calls
    def _call(self, node: ast.Call, scope: _Scope) -> Any:
        owner = None
        if isinstance(node.func, ast.Attribute):
            owner = self._eval(node.func.value, scope)
            func = self._attribute(node.func, owner)
        elif isinstance(node.func, ast.Name):
            func = self._name(node.func, scope, called=True)
        else:
            func = self._eval(node.func, scope)
        args = [self._eval(a, scope) for a in node.args]
        keywords = {k.arg: self._eval(k.value, scope) for k in node.keywords}
        name = call_name(node)
        pure = isinstance(node.func, ast.Name) and not scope.is_bound(node.func.id) and node.func.id in PURE_BUILTINS
        if self.escaped and not pure and not isinstance(func, _UserFunction):
            self.wrote = True
            self._forget_all(scope)  # it may run the script's own code, which may change anything
        if isinstance(owner, _Estimator):
            return self._estimator_call(node, owner, args)
        if isinstance(owner, (_Frame, _Series)):
            self._check_method_arguments(node, owner)
        if isinstance(func, _Callable):
            for arg in [*args, *keywords.values()]:
                self._forget(arg, scope)  # e.g. random.shuffle(columns), make_pipeline(scaler, ...)
            return self._library_call(node, func.path, args, keywords)
        if isinstance(func, _UserFunction):
            return self._user_call(node, func.node, args, scope)
        if isinstance(node.func, ast.Name) and not scope.is_bound(node.func.id):
            if node.func.id == "open":
                return self._open(node, args, keywords)
            if node.func.id in PURE_BUILTINS:
                if node.func.id in ("min", "max", "dict"):  # may return an argument, or hold what one holds
                    for arg in [*args, *keywords.values()]:
                        self._forget(arg, scope)
                return _builtin_result(node.func.id, args)
        # Anything else may write files and change what it is given or called on.
        if name in WRITE_NAMES or not isinstance(owner, _Frame):
            self.wrote = True
        if isinstance(owner, _Frame):
            return self._frame_method(node, owner, node.func.attr, args, keywords)
        inplace = any(k.arg == "inplace" for k in node.keywords)
        read_only = isinstance(owner, (_Module, _Columns)) or (isinstance(owner, _Keys) and name in DICT_READERS) \
            or (isinstance(owner, _Series) and name in READ_ONLY_METHODS)
        if owner is not None and (inplace or not read_only):
            if not (isinstance(owner, _Const) and _immutable(owner.value)):
                self._forget_root(node.func, scope)
        if isinstance(owner, _Keys) and name != "keys":
            for held in owner.values:
                self._forget(held, scope)  # what it returns holds them
        for arg in [*args, *keywords.values()]:
            self._forget(arg, scope)
        return UNKNOWN

    def _estimator_call(self, node: ast.Call, estimator: _Estimator, args: list[Any]) -> Any:
        """A method of an estimator the walk built. ``transform``/``predict``... of a never-fitted
        one raise NotFittedError, and of one fitted on a frame, given a frame with other column
        names, ValueError; ``fit`` on a frame records its names. Anything else may refit it."""
        method = node.func.attr  # type: ignore[attr-defined]
        plain = len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred)
        if estimator.fresh and plain and method in estimator.unfitted:
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "NotFittedError", estimator.unfitted[method], node.lineno,
                                "unfitted_estimator"))
        frame = args[0] if node.args and not isinstance(node.args[0], ast.Starred) else None
        columns = tuple(frame.columns) if isinstance(frame, _Frame) and frame.columns is not None else None
        if plain and columns is not None and estimator.fitted_on is not None:
            fit, fitted = estimator.fitted_on
            line = estimator.names_checked.get(fit, {}).get(method)
            if line is not None and columns != fitted:
                raise _Proved(Proof(outcome.RUNTIME_ERROR, "ValueError", line, node.lineno, "feature_names"))
            if line is not None:
                return UNKNOWN  # the same names: predicting changes nothing
        if method in ("fit", "fit_transform") and columns is not None and len(set(columns)) == len(columns) \
                and all(isinstance(c, str) for c in columns) and all(k.arg is not None for k in node.keywords) \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            # String column names, all different: scikit-learn records them as the feature names.
            estimator.fresh = False
            estimator.fitted_on = (method, columns) if method in estimator.names_checked else None
            return estimator if method == "fit" and estimator.returns_self else UNKNOWN
        estimator.forget()
        return UNKNOWN

    def _check_method_arguments(self, node: ast.Call, owner: _Frame | _Series) -> None:
        """TypeError for arguments a DataFrame's or Series' installed method does not bind."""
        if isinstance(owner, _Frame) and owner.columns is None:
            return  # only a frame whose columns are known is surely still a DataFrame
        info = self._pandas_class("DataFrame" if isinstance(owner, _Frame) else "Series") or {}
        shape = info.get("methods", {}).get(node.func.attr)  # type: ignore[attr-defined]
        text = self._call_error(shape, node, bound=True) if shape else None
        if text is not None:
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "TypeError", text, node.lineno, "method_arguments"))

    def _call_error(self, shape: dict[str, Any], node: ast.Call, bound: bool) -> str | None:
        """The TypeError line CPython gives ``node``, a call of a function of ``shape`` (a ``call``
        of :mod:`.facts`; ``bound``: an instance comes first), or None when it binds or the host's
        CPython words it otherwise than the runtime's may."""
        if not _python_matches(self.facts.python) or any(isinstance(a, ast.Starred) for a in node.args) \
                or any(k.arg is None for k in node.keywords):
            return None
        key = (shape["qualname"], tuple(shape["positional"]), shape["posonly"], shape["defaults"],
               tuple(shape["kwonly"]), tuple(shape["kwdefaults"]), shape["varargs"], shape["varkw"])
        return _binding_error(key, len(node.args) + bound, tuple(k.arg for k in node.keywords))

    def _pipeline(self, node: ast.Call, path: str, args: list[Any]) -> Any:
        """A pipeline of estimators built in the call itself (``make_pipeline(A(), B())``,
        ``Pipeline([("a", A()), ...])``): it refuses other column names as its first step's
        ``transform`` does, through the methods its last step always has."""
        if path.endswith("make_pipeline"):
            steps = args if node.args and not node.keywords and all(isinstance(a, ast.Call) for a in node.args) else []
        else:
            spec = node.args[0] if len(node.args) == 1 and not node.keywords else None
            ok = isinstance(spec, ast.List) and all(isinstance(e, ast.Tuple) and len(e.elts) == 2
                                                    and isinstance(e.elts[1], ast.Call) for e in spec.elts)
            steps = [self.built.get(e.elts[1]) for e in spec.elts] if ok else []
        if not steps or not all(isinstance(step, _Estimator) and not step.pipeline for step in steps):
            return UNKNOWN
        first, last = steps[0], steps[-1]
        if len(steps) == 1:
            checked = dict(first.names_checked.get("fit", {}))
        else:
            line = first.names_checked.get("fit_transform", {}).get("transform")
            # A method probed on the last step's class is a plain function there: always present.
            methods = {method for probed in last.names_checked.values() for method in probed}
            checked = dict.fromkeys(methods, line) if line else {}
        return _Estimator({}, {"fit": checked} if checked else {}, returns_self=True, pipeline=True)

    def _library_call(self, node: ast.Call, path: str, args: list[Any], keywords: dict[str | None, Any]) -> Any:
        facts = self.facts.callables.get(path, {})
        if "call" in facts:
            text = self._call_error(facts["call"], node, bound=facts["call"].get("bound", False))
            if text is not None:
                raise _Proved(Proof(outcome.RUNTIME_ERROR, "TypeError", text, node.lineno, "keyword"))
        elif "params" in facts and not facts["var_keyword"]:
            for keyword in node.keywords:
                if keyword.arg is not None and keyword.arg not in facts["params"]:
                    text = "TypeError: " + facts["template"].format(keyword.arg)
                    raise _Proved(Proof(outcome.RUNTIME_ERROR, "TypeError", text, node.lineno, "keyword"))
        canonical = _canonical(path)
        if canonical.rsplit(".", 1)[-1] in WRITE_NAMES or not canonical.startswith(_LIBRARIES):
            self.wrote = True
        if canonical in READERS:
            target = args[0] if args else keywords.get(READERS[canonical])
            self._check_read(node, target)
            if canonical == "pandas.read_csv" and isinstance(target, _Const) and isinstance(target.value, str) \
                    and set(keywords) <= COLUMN_KEEPING_READ_OPTIONS and len(args) == 1:
                header = self.task.headers.get(_data_relative(target.value) or "")
                return _Frame(list(header), plain_index=True) if header is not None else _Frame(None)
            return _Frame(None) if canonical.startswith("pandas.") else UNKNOWN
        if canonical in ("sklearn.pipeline.make_pipeline", "sklearn.pipeline.Pipeline"):
            return self._pipeline(node, canonical, args)
        info = self.facts.classes.get(facts.get("class", ""), {})
        if info.get("unfitted") or info.get("names_checked"):
            # What the facts probed holds for one built with its defaults, and what it checks of
            # column names for one built with neutral constants too.
            default = not node.args and not node.keywords
            neutral = not node.args and all(k.arg in NAME_NEUTRAL_PARAMS and isinstance(keywords[k.arg], _Const)
                                            for k in node.keywords)
            estimator = _Estimator(dict(info.get("unfitted", {})) if default else {},
                                   info.get("names_checked", {}) if neutral else {}, info.get("fit_returns_self", False))
            self.built[node] = estimator
            return estimator
        if canonical == "pandas.DataFrame":
            data = args[0] if args else keywords.get("data")
            if isinstance(data, _Keys) and set(keywords) <= {"data"} and len(args) <= 1:
                return _Frame(list(data.keys))
            return _Frame(None)
        return UNKNOWN

    def _frame_method(self, node: ast.Call, frame: _Frame, method: str, args: list[Any],
                      keywords: dict[str | None, Any]) -> Any:
        inplace = isinstance(keywords.get("inplace"), _Const) and keywords["inplace"].value is True
        if method == "to_csv":
            self._check_write(node, args[0] if args else keywords.get("path_or_buf"))
            return UNKNOWN
        if method == "drop" and frame.columns is not None:
            dropped = keywords.get("columns")
            if dropped is None and len(args) == 1 and isinstance(keywords.get("axis"), _Const) \
                    and keywords["axis"].value in (1, "columns"):
                dropped = args[0]
            errors = keywords.get("errors")
            if dropped is not None and not (isinstance(errors, _Const) and errors.value == "ignore"):
                self._check_columns(frame, dropped, node, drop=True)
                if isinstance(dropped, _Const) and isinstance(dropped.value, (str, list)):
                    names = [dropped.value] if isinstance(dropped.value, str) else list(dropped.value)
                    return self._result(frame, [c for c in frame.columns if c not in names], inplace)
            return self._result(frame, None, inplace)
        if method in SAME_COLUMNS and not inplace and not args and set(keywords) <= {"deep"} | (
                {"n"} if method in ("head", "tail") else set()):
            return _Frame(None if frame.columns is None else list(frame.columns), frame.plain_index)
        if inplace or method not in READ_ONLY_METHODS:
            frame.columns = None
        return UNKNOWN

    @staticmethod
    def _result(frame: _Frame, columns: list[str] | None, inplace: bool) -> Any:
        if inplace:
            frame.columns = columns
            return _Const(None)
        return _Frame(columns, frame.plain_index)

    def _user_call(self, node: ast.Call, function: ast.FunctionDef, args: list[Any], scope: _Scope) -> Any:
        self.wrote = True  # what it does is only followed where it is straight-line
        arguments = function.args
        if function.name in self.calls or len(self.calls) >= MAX_CALL_DEPTH or arguments.vararg \
                or arguments.kwarg or arguments.posonlyargs or arguments.kwonlyargs or node.keywords \
                or any(isinstance(a, ast.Starred) for a in node.args) or len(args) > len(arguments.args):
            self._forget_all(scope)
            return UNKNOWN
        params = [a.arg for a in arguments.args]
        module = next(s for s in scope.chain() if s.parent is None)
        local = {p: (args[i] if i < len(args) else UNKNOWN) for i, p in enumerate(params)}
        local_names, declared = _function_names(function)
        inner = _Scope(local, module, local_names | frozenset(params), declared)
        self.calls.append(function.name)
        try:
            self._block(function.body, inner)
        finally:
            self.calls.pop()
        self._forget_all(scope)
        return UNKNOWN

    def _open(self, node: ast.Call, args: list[Any], keywords: dict[str | None, Any]) -> Any:
        mode = args[1] if len(args) > 1 else keywords.get("mode", _Const("r"))
        target = args[0] if args else keywords.get("file")
        if isinstance(mode, _Const) and isinstance(mode.value, str) and set(mode.value) <= set("rbt"):
            self._check_read(node, target)
        else:
            self.wrote = True
        return UNKNOWN

    def _check_read(self, node: ast.Call, target: Any) -> None:
        """FileNotFoundError for a literal path that cannot exist in the sandbox."""
        if not (isinstance(target, _Const) and isinstance(target.value, str)) or not target.value:
            return
        path = target.value
        if _file_absent(path, self.task, self.wrote):
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "FileNotFoundError",
                                f"FileNotFoundError: [Errno 2] No such file or directory: {path!r}",
                                node.lineno, "missing_file"))

    def _check_write(self, node: ast.Call, target: Any) -> None:
        """OSError for a literal path in a directory that cannot exist and cannot be made."""
        self.wrote = True
        if not (isinstance(target, _Const) and isinstance(target.value, str)):
            return
        folder = posixpath.dirname(posixpath.normpath(target.value))
        if folder.startswith("/") and _absolute_absent(folder):
            raise _Proved(Proof(outcome.RUNTIME_ERROR, "OSError",
                                f"OSError: Cannot save file into a non-existent directory: {folder!r}",
                                node.lineno, "missing_directory"))


# ----------------------------------------------------------------------------- helpers

#: Top-level folders of the sandbox that are not the host's (see ``sandbox/bwrap.py``).
_SANDBOX_ROOTS = ("workspace", "opt", "tmp", "dev", "proc", "etc", "usr", "bin", "sbin", "lib", "lib32", "lib64",
                  "run", "sys", "home", "root", "var")


def _absolute_absent(path: str) -> bool:
    """Whether an absolute path certainly does not exist in the sandbox: its first component is
    none of the sandbox's own folders (the root is read-only, so nothing can create it)."""
    parts = [p for p in path.split("/") if p]
    return bool(parts) and parts[0] not in _SANDBOX_ROOTS and not Path("/", parts[0]).exists()


def _sandbox_path(path: str) -> str:
    """The absolute path a literal names in the sandbox, whose working directory is /workspace."""
    return posixpath.normpath(posixpath.join(_WORKSPACE, path))


def _data_relative(path: str) -> str | None:
    """The path under ``data/`` a literal names, or None when it points elsewhere."""
    absolute = _sandbox_path(path)
    prefix = f"{_WORKSPACE}/data/"
    return absolute[len(prefix):] if absolute.startswith(prefix) else None


def _file_absent(path: str, task: TaskFacts, wrote: bool) -> bool:
    relative = _data_relative(path)
    if relative is not None:
        return relative not in task.files  # data/ is a read-only mount of exactly these files
    absolute = _sandbox_path(path)
    if not absolute.startswith(f"{_WORKSPACE}/"):
        return absolute != _WORKSPACE and _absolute_absent(absolute)
    # The work dir holds data/ and solution.py until the script writes something.
    return not wrote and absolute not in (f"{_WORKSPACE}/solution.py", f"{_WORKSPACE}/data")


@functools.lru_cache(maxsize=256)
def _function_names(function: ast.FunctionDef) -> tuple[frozenset[str], frozenset[str]]:
    """A function's local names (what it binds, less its ``global`` names) and its ``global`` names."""
    stores, declared = set(), set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not function:
            stores.add(node.name)
        elif isinstance(node, ast.Global):
            declared.update(node.names)
    return frozenset(stores - declared), frozenset(declared)


def _immutable(value: Any) -> bool:
    return value is None or isinstance(value, (str, bytes, int, float, complex, bool)) or (
        isinstance(value, tuple) and all(_immutable(v) for v in value))


def _mutable(value: Any) -> bool:
    """Whether an abstract value may change in place, so that a name holding it must let it go
    when it may have (a Series too: its index may have)."""
    return isinstance(value, (_Keys, _Series)) or (isinstance(value, _Const) and not _immutable(value.value))


def _reaches(held: Any, value: Any, shared: set[int]) -> bool:
    """Whether a change to ``value`` (holding the containers ``shared``) may change ``held``."""
    if held is value:
        return True
    if isinstance(held, _Keys):
        return any(_reaches(v, value, shared) for v in held.values)
    return bool(shared) and not shared.isdisjoint(_containers(held))


def _containers(value: Any) -> set[int]:
    """The ids of the mutable containers a constant holds, itself included: constants built from
    one another share them (``both = [cols]``), and a change through one changes the other."""
    found: set[int] = set()
    stack = [value.value] if isinstance(value, _Const) else []
    while stack:
        item = stack.pop()
        if isinstance(item, (list, dict, set)):
            if id(item) in found:
                continue
            found.add(id(item))
        if isinstance(item, (list, tuple, set)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def _root_name(node: ast.expr) -> str | None:
    """``x`` for ``x``, ``x.a``, ``x[k]``, ``x.loc[k].b`` and ``x.f(...).g``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _unpacks(stmt: ast.Assign | ast.AnnAssign) -> bool:
    """Whether ``stmt`` is ``a, b = x, y`` (targets as long as the display, nothing starred)."""
    value = stmt.value
    return isinstance(stmt, ast.Assign) and isinstance(value, (ast.Tuple, ast.List)) \
        and not any(isinstance(e, ast.Starred) for e in value.elts) \
        and all(isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) == len(value.elts)
                and not any(isinstance(e, ast.Starred) for e in t.elts) for t in stmt.targets)


def _may_return(body: list[ast.stmt]) -> bool:
    """Whether a ``return`` of the enclosing function hides in ``body`` (nested defs aside)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _builtin_result(name: str, args: list[Any]) -> Any:
    """What a pure builtin returns, where the walk needs it (literal sequences)."""
    sequence = args[0].value if len(args) == 1 and isinstance(args[0], _Const) else None
    if not isinstance(sequence, (list, tuple)):
        return UNKNOWN
    if name == "list":
        return _Const(list(sequence))
    if name == "tuple":
        return _Const(tuple(sequence))
    if name == "enumerate":
        return _Const([(i, v) for i, v in enumerate(sequence)])
    return UNKNOWN


def _canonical(path: str) -> str:
    """``pandas.io.parsers.readers.read_csv`` style paths as the public name agents import."""
    top, _, leaf = path.rpartition(".")
    root = top.split(".")[0]
    return f"{root}.{leaf}" if root in ("pandas", "numpy") else path


def _fold_compare(op: ast.cmpop, left: Any, right: Any) -> Any:
    try:
        if isinstance(op, ast.Eq):
            return _Const(left == right)
        if isinstance(op, ast.NotEq):
            return _Const(left != right)
        if isinstance(op, ast.In):
            return _Const(left in right)
        if isinstance(op, ast.NotIn):
            return _Const(left not in right)
        if isinstance(op, ast.Is):
            return _Const(left is right) if left is None or right is None else UNKNOWN
    except TypeError:
        return UNKNOWN
    return UNKNOWN


def _python_matches(version: str) -> bool:
    """Whether the host's CPython is the runtime's minor version (which words its TypeErrors)."""
    return version.split(".")[:2] == [str(n) for n in sys.version_info[:2]]


@functools.lru_cache(maxsize=1024)
def _binding_error(shape: tuple[Any, ...], positional: int, keywords: tuple[str, ...]) -> str | None:
    """The TypeError line CPython gives ``positional`` arguments and these keywords passed to a
    function of this shape (facts' ``call``), or None when they bind: CPython itself binds them to
    a stand-in with the same parameters and qualified name."""
    qualname, names, posonly, defaults, kwonly, kwdefaults, varargs, varkw = shape
    params = [f"{n}=None" if i >= len(names) - defaults else n for i, n in enumerate(names)]
    if posonly:
        params.insert(posonly, "/")
    if varargs or kwonly:
        params.append("*_wmrl_args" if varargs else "*")
    params += [f"{n}=None" if n in kwdefaults else n for n in kwonly]
    if varkw:
        params.append("**_wmrl_kwargs")
    namespace: dict[str, Any] = {}
    exec(compile(f"def stand_in({', '.join(params)}):\n    pass\n", "<proof>", "exec"), namespace)
    stand_in = namespace["stand_in"]
    stand_in.__qualname__ = qualname
    try:
        stand_in(*[None] * positional, **dict.fromkeys(keywords))
    except TypeError as exc:
        return _exception_line(exc)
    return None


@functools.lru_cache(maxsize=1024)
def _pandas_key_error(columns: tuple[str, ...], wanted: Any, drop: bool) -> str | None:
    """pandas' own KeyError line for selecting (or dropping) ``wanted`` from these columns."""
    frame = pd.DataFrame(columns=list(columns))
    key = list(wanted) if isinstance(wanted, tuple) else wanted
    try:
        frame.drop(columns=key) if drop else frame[key]
    except KeyError as exc:
        return _exception_line(exc)
    return None
