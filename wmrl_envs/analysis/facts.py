"""Exact facts a static proof of failure may rest on, known before any script runs.

* :class:`RuntimeFacts`: what the agent runtime venv can import, each module's names, the
  keyword arguments and attributes of its callables and classes, how CPython binds a call to
  them and to DataFrame/Series methods, and what scikit-learn estimators raise unfitted or on
  other column names than they were fitted on (probed on tiny frames). They are read by running the
  runtime's own interpreter once (:data:`_INTROSPECT`) and cached under
  ``WMRL_HOME/facts/`` per runtime digest (the requirements' sha256 and the Python version):
  a changed runtime is introspected again, never guessed.
* :class:`TaskFacts`: a task's public files, every CSV header (read by the same pandas the
  runtime has) and the sample submission's columns and row count. :func:`task_facts` is the one
  reader of a task's public headers: the code features
  (:mod:`~wmrl_envs.analysis.code_features`) take their columns and file names from it too.

A fact is either known or absent. The prover (:mod:`wmrl_envs.analysis.proofs`) only proves
what known facts settle; an absent fact makes it say nothing.
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.paths import wmrl_home
from wmrl_envs.sandbox.runtime import load_runtime

log = logging.getLogger(__name__)

FACTS_FORMAT = 3
#: Where agent code sees the runtime venv (the bubblewrap executor's mount), for messages that
#: quote a module's file as the sandbox's traceback does.
RUNTIME_MOUNT = "/opt/wmrl-runtime"
#: Packages whose modules, names and callables are introspected (with their public submodules).
INTROSPECTED_PACKAGES = ("numpy", "pandas", "scipy", "sklearn")
#: Standard-library modules agents use whose names are recorded too (any stdlib module counts as
#: importable; these also have their names checked).
INTROSPECTED_STDLIB = ("os", "os.path", "sys", "json", "re", "math", "random", "time", "csv", "pickle",
                       "glob", "shutil", "warnings", "collections", "itertools", "functools", "pathlib",
                       "typing", "statistics", "gc")

# Runs in the runtime's interpreter: prints one JSON document of facts. It imports the packages
# (trusted code); signatures come from ``inspect`` and the code objects, and only scikit-learn
# estimators are called, on tiny frames, to probe what they raise.
_INTROSPECT = r'''
import contextlib, importlib, inspect, io, json, os, pkgutil, sys, warnings
warnings.simplefilter("ignore")
packages, stdlib = json.loads(sys.argv[1]), json.loads(sys.argv[2])
venv = os.path.realpath(sys.prefix)

def public_submodules(pkg, depth):
    out = []
    for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        leaf = info.name.rsplit(".", 1)[1]
        if leaf.startswith("_") or leaf in ("tests", "conftest", "setup") or leaf.startswith("test"):
            continue
        out.append(info.name)
        if info.ispkg and depth > 1:
            try:
                out += public_submodules(importlib.import_module(info.name), depth - 1)
            except Exception:
                pass
    return out

names = []
for p in packages:
    names.append(p)
    try:
        names += public_submodules(importlib.import_module(p), 3 if p == "sklearn" else 2)
    except Exception:
        pass
names += stdlib

def where(module):
    path = getattr(module, "__file__", None)
    if not path:
        return None
    real = os.path.realpath(path)
    return {"venv": os.path.relpath(real, venv)} if real.startswith(venv + os.sep) else {"abs": path}

def call_shape(func):
    """What CPython binds a call to this plain function by: its TypeErrors follow from it alone."""
    code = func.__code__
    n = code.co_argcount
    return {"qualname": func.__qualname__, "positional": list(code.co_varnames[:n]),
            "posonly": code.co_posonlyargcount, "defaults": len(func.__defaults__ or ()),
            "kwonly": list(code.co_varnames[n:n + code.co_kwonlyargcount]),
            "kwdefaults": sorted(func.__kwdefaults__ or {}),
            "varargs": bool(code.co_flags & inspect.CO_VARARGS),
            "varkw": bool(code.co_flags & inspect.CO_VARKEYWORDS)}

def plain(func):
    """A Python function called as it is: no decorator wraps it, no ``__signature__`` hides it."""
    return inspect.isfunction(func) and not hasattr(func, "__wrapped__") and not hasattr(func, "__signature__")

def signature_facts(obj):
    """Parameters of a callable, the exact text CPython gives an unknown keyword, and how a call
    binds (``call``, with ``self`` first for a class) where CPython binds it."""
    try:
        if inspect.isclass(obj):
            init = obj.__dict__.get("__init__") or next(
                (k.__dict__["__init__"] for k in obj.__mro__ if "__init__" in k.__dict__), None)
            if not inspect.isfunction(init) or hasattr(init, "__wrapped__"):
                return None
            if type(obj).__call__ is not type.__call__ or obj.__new__ is not object.__new__:
                return None
            sig = inspect.signature(init)
            template = init.__qualname__ + "() got an unexpected keyword argument '{}'"
            # An abstract class refuses any call before its __init__ binds anything.
            call = dict(call_shape(init), bound=True) if plain(init) and not inspect.isabstract(obj) else None
        elif inspect.isfunction(obj):
            sig = inspect.signature(obj)
            wrapped = getattr(obj, "__wrapped__", None)
            call = call_shape(obj) if plain(obj) else None
            if wrapped is None:
                template = obj.__qualname__ + "() got an unexpected keyword argument '{}'"
            elif obj.__code__.co_filename.endswith(os.path.join("sklearn", "utils", "_param_validation.py")):
                # scikit-learn's validate_params binds the arguments first: inspect's message.
                template = "got an unexpected keyword argument '{}'"
            else:
                return None
        else:
            return None
    except (TypeError, ValueError):
        return None
    params = [p.name for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    var_keyword = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    facts = {"params": params, "var_keyword": var_keyword, "template": template}
    if call is not None:
        facts["call"] = call
    return facts

modules, callables, classes = {}, {}, {}
loaded = {}
for name in names:
    try:
        loaded[name] = importlib.import_module(name)
    except Exception:
        continue
public = sorted({n for m in loaded.values() for n in dir(m) if not n.startswith("_")})
for name, module in loaded.items():
    exported = set(dir(module))
    lazy = "__getattr__" in vars(module)
    if lazy:
        # A module-level __getattr__ can answer names dir() omits: probe every candidate.
        exported |= {n for n in public if hasattr(module, n)}
    submodules = []
    if hasattr(module, "__path__"):
        submodules = sorted(i.name for i in pkgutil.iter_modules(module.__path__))
    modules[name] = {"file": where(module), "names": sorted(exported), "complete": not lazy,
                     "submodules": submodules}
    for attr in sorted(exported):
        if attr.startswith("__"):
            continue
        try:
            obj = getattr(module, attr)
        except Exception:
            continue
        facts = signature_facts(obj)
        if facts is not None:
            callables[name + "." + attr] = facts
        if inspect.isclass(obj) and (obj.__module__ or "").split(".")[0] in ("pandas", "numpy", "sklearn"):
            key = obj.__module__ + "." + obj.__qualname__
            if key not in classes:
                dynamic = any("__getattr__" in vars(k) for k in obj.__mro__ if k is not object)
                classes[key] = {"name": obj.__name__, "attrs": sorted(dir(obj)), "dynamic": dynamic}
            callables.setdefault(name + "." + attr, {})["class"] = key

# How a DataFrame's and a Series' public methods bind their arguments (those CPython binds), and
# the attribute names a Series' dir() holds for some dtypes only (accessors, ...): "Did you mean"
# suggestions come from the instance's dir().
import pandas
for cls in (pandas.DataFrame, pandas.Series):
    info = classes[cls.__module__ + "." + cls.__qualname__]
    info["methods"] = {attr: call_shape(inspect.getattr_static(cls, attr)) for attr in dir(cls)
                       if not attr.startswith("_") and plain(inspect.getattr_static(cls, attr))}
samples = [pandas.Series(values, dtype=dtype) for values, dtype in (
    ([1], None), ([1.5], None), ([True], None), (["a"], None), (["a"], object), (["a"], "category"),
    (["2020-01-01"], "datetime64[ns]"), ([1], "timedelta64[ns]"), ([0, 1], "Sparse[int64]"))]
dirs = [set(dir(pandas.Series))] + [set(dir(sample)) for sample in samples]
classes[pandas.Series.__module__ + "." + pandas.Series.__qualname__]["dir_varies"] = sorted(
    (set.union(*dirs) - set.intersection(*dirs)) | set(pandas.Series._accessors))

# What a never-fitted estimator says when asked to transform or predict. Probed with an input no
# method could read: a NotFittedError then proves the fitted check comes before any other.
# And which methods of a default-built instance fitted on a frame refuse a frame whose column
# names differ (only the names: same values, one column renamed), with the line they raise.
import traceback
from sklearn.exceptions import NotFittedError
FIT_FRAME = pandas.DataFrame({"a": [1.0 + i % 7 for i in range(24)], "b": [2.0 + i % 5 for i in range(24)]})
RENAMED = FIT_FRAME.rename(columns={"b": "c"})
FIT_TARGET = [i % 2 for i in range(24)]
METHODS = ("transform", "predict", "predict_proba", "decision_function", "inverse_transform")

def names_checked(cls, fit):
    """{method: exception line} of the methods refusing renamed columns after ``fit``, and whether
    ``fit`` returned the instance."""
    instance = cls()
    with contextlib.redirect_stdout(io.StringIO()):
        returned = getattr(instance, fit)(FIT_FRAME, FIT_TARGET)
        checked = {}
        for method in METHODS[:4]:
            if not inspect.isfunction(inspect.getattr_static(cls, method, None)):
                continue  # absent, or there only for some parameters (available_if)
            try:
                getattr(instance, method)(FIT_FRAME)
            except Exception:
                continue
            try:
                getattr(instance, method)(RENAMED)
            except ValueError as exc:
                checked[method] = traceback.format_exception_only(type(exc), exc)[-1].strip().splitlines()[0]
            except Exception:
                pass
    return checked, returned is instance

for key, info in classes.items():
    module_name, _, qualname = key.rpartition(".")
    if not module_name.startswith("sklearn.") or "." in qualname:
        continue
    try:
        cls = getattr(importlib.import_module(module_name), qualname)
        instance = cls()
    except Exception:
        continue
    unfitted = {}
    for method in METHODS:
        if not callable(getattr(instance, method, None)):
            continue
        try:
            getattr(instance, method)(object())
        except NotFittedError as exc:
            unfitted[method] = traceback.format_exception_only(type(exc), exc)[-1].strip()
        except Exception:
            pass
    if unfitted:
        info["unfitted"] = unfitted
    recorded = {}
    for fit in ("fit", "fit_transform"):
        if not callable(getattr(cls, fit, None)):
            continue
        try:
            checked, returns_self = names_checked(cls, fit)
        except Exception:
            continue
        if checked:
            recorded[fit] = checked
            if fit == "fit":
                info["fit_returns_self"] = returns_self
    if recorded:
        info["names_checked"] = recorded

top = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
top |= {i.name for i in pkgutil.iter_modules([p for p in sys.path if p and os.path.isdir(p)])}
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "top_level": sorted(top),
                  "modules": modules, "callables": callables, "classes": classes}))
'''


@dataclass(frozen=True)
class RuntimeFacts:
    """What the agent runtime has, read from it (see the module docstring).

    Attributes:
        digest: Identifies the runtime the facts describe.
        python: The runtime's Python version.
        top_level: Every top-level module its interpreter can import (the work dir aside).
        modules: Per introspected module: ``file`` (``{"venv": relpath}`` or ``{"abs": path}``),
            ``names``, ``complete`` (False when a module ``__getattr__`` may answer other
            names) and ``submodules``.
        callables: Per ``"module.name"``: ``params``, ``var_keyword``, ``template`` (the
            ``TypeError`` text of an unknown keyword, ``{}`` for its name), ``call`` (how CPython
            binds a call, see below; for a class its ``__init__``'s, with ``bound``: ``self``
            comes first) where CPython binds the arguments itself, and ``class`` (the key of
            :attr:`classes` for a class).
        classes: Per ``"module.qualname"``: ``name``, ``attrs`` (``dir`` of the class),
            ``dynamic`` (a ``__getattr__`` may answer other attributes); for DataFrame and Series,
            ``methods`` (name -> ``call`` of each plain public method) and, for Series,
            ``dir_varies`` (names an instance's ``dir`` holds for some dtypes only); for a
            scikit-learn class, ``unfitted``: the exception line each method of a never-fitted,
            default-built instance raises before reading its input (probed with an input no method
            can read), ``names_checked``: per fitting method (``fit``, ``fit_transform``), the
            methods of a default-built instance fitted on a frame that refuse a frame with other
            column names, with the exception line, and ``fit_returns_self``.

    A ``call`` is ``qualname``, ``positional`` (names), ``posonly`` and ``defaults`` (counts),
    ``kwonly`` and ``kwdefaults`` (names), ``varargs`` and ``varkw``: what the function's code
    object and defaults give CPython to bind arguments with.
    """

    digest: str
    python: str
    top_level: frozenset[str]
    modules: dict[str, dict[str, Any]]
    callables: dict[str, dict[str, Any]]
    classes: dict[str, dict[str, Any]]

    @functools.cached_property
    def public_names(self) -> frozenset[str]:
        """Every public name of any introspected module: the candidates a lazy module was probed for."""
        return frozenset(n for m in self.modules.values() for n in m["names"] if not n.startswith("_"))

    def module_file(self, module: str) -> str | None:
        """The module's file as agent code sees it in the sandbox."""
        where = (self.modules.get(module) or {}).get("file")
        if not where:
            return None
        return f"{RUNTIME_MOUNT}/{where['venv']}" if "venv" in where else where["abs"]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuntimeFacts:
        return cls(digest=data["digest"], python=data["python"], top_level=frozenset(data["top_level"]),
                   modules=data["modules"], callables=data["callables"], classes=data["classes"])


_RUNTIME_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def _runtime_facts_cached(venv: str, digest: str) -> RuntimeFacts:
    path = wmrl_home() / "facts" / f"runtime-{digest}.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be introspecting the same runtime
            if not path.is_file():
                _introspect(Path(venv), digest, path)
    data = json.loads(path.read_text())
    if data.get("format") != FACTS_FORMAT or data.get("digest") != digest:
        path.unlink(missing_ok=True)
        return _runtime_facts_cached(venv, digest)
    return RuntimeFacts.from_dict(data)


def runtime_facts(venv: Path | None = None) -> RuntimeFacts:
    """The facts of the agent runtime venv (default: the sandbox's), introspected once per digest.

    Raises:
        SandboxUnavailableError: The runtime cannot be built or its interpreter fails.
    """
    runtime = load_runtime(venv)
    marker = json.loads((runtime.venv / ".wmrl-runtime.json").read_text())
    digest = f"{marker['requirements_sha256'][:16]}-py{runtime.version}-f{FACTS_FORMAT}"
    with _RUNTIME_LOCK:
        return _runtime_facts_cached(str(runtime.venv), digest)


def _introspect(venv: Path, digest: str, out: Path) -> None:
    log.info("introspecting the agent runtime %s (once per runtime digest)", venv)
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", _INTROSPECT,
                           json.dumps(INTROSPECTED_PACKAGES), json.dumps(INTROSPECTED_STDLIB)],
                          capture_output=True, text=True, env=env, cwd="/", timeout=600, check=False)
    if done.returncode != 0:
        raise SandboxUnavailableError(f"introspecting the agent runtime {venv} failed "
                                      f"(exit {done.returncode}): {done.stderr.strip()[-1000:]}")
    data = json.loads(done.stdout)
    data.update(format=FACTS_FORMAT, digest=digest)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    tmp.replace(out)  # whole or absent: a reader never sees half a file


# ----------------------------------------------------------------------------- task facts


@dataclass(frozen=True)
class TaskFacts:
    """A task's public files as agent code sees them under ``data/``.

    Attributes:
        files: Every public file's path relative to ``data/`` (``"train.csv"``, ``"img/1.png"``).
        dirs: Every public folder's path relative to ``data/`` (``""`` is ``data/`` itself).
        headers: The column names pandas reads from each CSV file (``pd.read_csv(f, nrows=0)``).
        sample_columns: The sample submission's columns.
        sample_rows: The sample submission's row count.
    """

    files: frozenset[str]
    dirs: frozenset[str]
    headers: dict[str, tuple[str, ...]]
    sample_columns: tuple[str, ...] | None
    sample_rows: int | None


@functools.lru_cache(maxsize=256)
def _task_facts_cached(public_dir: str, stamp: float) -> TaskFacts:
    root = Path(public_dir)
    files, dirs, headers = set(), {""}, {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_dir():
            dirs.add(relative)
            continue
        files.add(relative)
        if path.suffix == ".csv":
            try:
                headers[relative] = tuple(str(c) for c in pd.read_csv(path, nrows=0).columns)
            except (ValueError, OSError, UnicodeDecodeError):
                pass  # an unreadable header is no fact
    sample_columns = sample_rows = None
    sample = root / "sample_submission.csv"
    if sample.is_file() and "sample_submission.csv" in headers:
        sample_columns = headers["sample_submission.csv"]
        with sample.open("rb") as fh:
            sample_rows = len(pd.read_csv(fh, usecols=[0]))
    return TaskFacts(frozenset(files), frozenset(dirs), headers, sample_columns, sample_rows)


def task_facts(public_dir: Path) -> TaskFacts:
    """The facts of a task's public folder, read once per folder and modification time."""
    return _task_facts_cached(str(public_dir), public_dir.stat().st_mtime)
