"""Static features of a solution script's text and meta-features of its task.

The surrogate world model reads these next to a code embedding. Every script feature comes
from the script's *text*, never from the grammar choices that produced it, so the same
features describe LLM-written code.

Scripts often select code paths with module-level constants (``VALIDATION = "holdout"`` then
``if VALIDATION == "holdout": ...``); keyword matching on the raw text would see every branch.
:func:`analyse_script` therefore folds such constants first: branches whose test is decided by
literals and single-assignment module constants are replaced by the branch taken, and
docstrings are dropped. Features and the text handed to the embedding are read from that
folded program, whose tree comes from :func:`~wmrl_envs.analysis.script.parse_script` (the
prover's parser too). A script that does not parse keeps only text-level features.

A task's columns and public files come from its facts (:func:`~wmrl_envs.analysis.facts.task_facts`,
the one reader of a task's public CSV headers, which the prover reads as well).
"""

from __future__ import annotations

import ast
import builtins
import io
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from wmrl_envs.analysis.facts import TaskFacts, task_facts
from wmrl_envs.analysis.script import call_name, parse_script
from wmrl_envs.grading.metrics import METRICS, PREDICTION_KINDS, get_metric
from wmrl_envs.task_spec import TASK_TYPES, Task, TaskSpec

# Estimator families, matched on the called name (``RandomForestClassifier(...)``), never on
# imports: a script may import far more than it uses.
MODEL_FAMILIES: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern)
    for name, pattern in {
        "constant": r"^Dummy(Classifier|Regressor)$",
        "linear": r"^(LogisticRegression(CV)?|LinearRegression|Ridge(CV|Classifier(CV)?)?|Lasso(CV)?|"
        r"ElasticNet(CV)?|SGD(Classifier|Regressor)|LinearSV[CR]|BayesianRidge|HuberRegressor|"
        r"Perceptron|PassiveAggressive(Classifier|Regressor)|PoissonRegressor|TweedieRegressor)$",
        "knn": r"^(KNeighbors|RadiusNeighbors)(Classifier|Regressor)$",
        "tree": r"^(DecisionTree|ExtraTree)(Classifier|Regressor)$",
        "random_forest": r"^RandomForest(Classifier|Regressor)$",
        "extra_trees": r"^ExtraTrees(Classifier|Regressor)$",
        "boosting": r"^(HistGradientBoosting|GradientBoosting|AdaBoost)(Classifier|Regressor)$|"
        r"^(XGB|LGBM|CatBoost)\w*$",
        "mlp": r"^MLP(Classifier|Regressor)$|^(Sequential|Linear|Conv[12]d)$",
        "svm": r"^(Nu)?SV[CR]$",
        "naive_bayes": r"^(Gaussian|Multinomial|Bernoulli|Complement|Categorical)NB$",
    }.items()
}
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


_ENSEMBLE = re.compile(r"^(Voting|Stacking|Bagging)(Classifier|Regressor)$")
_TEXT_VECTORISER = re.compile(r"^(Tfidf|Count|Hashing)Vectorizer$")
_SCALER = re.compile(r"^(Standard|MinMax|Robust|MaxAbs)Scaler$|^(Normalizer|QuantileTransformer|PowerTransformer)$")
_IMPUTER = re.compile(r"^(Simple|KNN|Iterative)Imputer$|^fillna$")
_ONEHOT = re.compile(r"^(OneHotEncoder|get_dummies)$")
_ORDINAL = re.compile(r"^(OrdinalEncoder|LabelEncoder|TargetEncoder|factorize)$")
_PIPELINE = re.compile(r"^(make_pipeline|Pipeline|ColumnTransformer|make_column_transformer)$")
_HOLDOUT = re.compile(r"^train_test_split$")
_CROSS_VALIDATION = re.compile(r"^((Stratified|Group|Repeated)?KFold|cross_val_(score|predict)|cross_validate|"
                               r"GridSearchCV|RandomizedSearchCV)$")
_NETWORK_MODULES = ("requests", "urllib", "http", "socket", "kaggle", "huggingface_hub")
# A line is "modelling" when it builds an estimator/transformer (a CapWords call) or calls an ML verb.
_SALIENT = re.compile(r"\b[A-Z][A-Za-z0-9]+\(|\.(fit|fit_transform|predict|predict_proba)\(|"
                      r"\b(train_test_split|cross_val_score|cross_validate|log1p|expm1|get_dummies|fillna)\(")
#: Characters of script text the embedding reads: about 128 MiniLM word pieces of code (2.8
#: characters each), which keeps an embedding near 0.05 s on one core. Longer windows cost
#: proportionally more and did not rank better in leave-tasks-out CV.
EMBEDDING_CHARS = 360
_BUILTIN_NAMES = frozenset(dir(builtins)) | {"__file__", "__name__"}

# Keyword hyperparameters read as capacity features (largest value in the script).
_CAPACITY_KEYWORDS: dict[str, tuple[str, ...]] = {
    "hp_n_estimators": ("n_estimators", "max_iter", "num_boost_round", "iterations", "n_iter"),
    "hp_max_depth": ("max_depth",),
    "hp_n_neighbors": ("n_neighbors",),
    "hp_min_samples_leaf": ("min_samples_leaf", "min_child_samples"),
    "hp_max_leaf_nodes": ("max_leaf_nodes", "num_leaves"),
    "hp_max_features_text": ("max_features",),
}

SCRIPT_FEATURES: tuple[str, ...] = (
    "syntax_ok", "log_chars", "log_lines", "n_imports", "n_functions", "n_loops",
    *(f"family_{name}" for name in MODEL_FAMILIES), "n_model_families", "ensemble",
    *_CAPACITY_KEYWORDS, "hp_hidden_units", "hp_learning_rate", "hp_log_c", "hp_log_alpha",
    "early_stopping", "random_state",
    "validation_holdout", "validation_cv", "reads_train", "reads_test",
    "writes_submission", "mentions_submission", "writes_index", "renames_columns",
    "text_vectoriser", "char_ngrams", "scaler", "imputer", "onehot", "ordinal", "pipeline",
    "log_target", "predict_proba",
    "while_true", "n_while", "sleep", "network", "subprocess", "n_raise", "exits", "undefined_names",
)
TASK_FEATURES: tuple[str, ...] = (
    *(f"task_type_{t}" for t in TASK_TYPES), *(f"metric_{m}" for m in METRICS), "higher_is_better",
    *(f"prediction_{p}" for p in PREDICTION_KINDS),
    "log_rows", "log_test_rows", "log_features", "numeric_share", "log_n_classes", "n_text_columns", "n_target_columns",
    "target_skew", "target_negative_share", "majority_share",
)
INTERACTION_FEATURES: tuple[str, ...] = ("unknown_columns", "target_columns_mentioned", "reads_missing_file")
FEATURE_NAMES: tuple[str, ...] = SCRIPT_FEATURES + TASK_FEATURES + INTERACTION_FEATURES
#: What the status head reads beyond :data:`FEATURE_NAMES` (see :func:`outcome_features`).
OUTCOME_FEATURES: tuple[str, ...] = ("string_keys", "unknown_string_keys")


@dataclass
class ScriptAnalysis:
    """What the features are read from: the folded program and a few raw-text facts.

    Attributes:
        source: The script as given.
        tree: The folded program, or None when the script does not parse.
        embedding_text: Text for the embedding: the modelling statements of the folded program
            (see :func:`_salient_text`), or the raw text without comments when it does not parse.
        features: Script features by name (see :data:`SCRIPT_FEATURES`).
        column_refs: Columns the script reads from frames loaded with ``read_csv``.
        string_constants: Every string literal of the folded program.
        read_paths: Literal paths passed to ``read_csv``.
        string_keys: String keys the script reads by subscript (``row["age"]``, ``df[["a", "b"]]``)
            from any object, minus keys it stores itself or writes in a dict literal.
    """

    source: str
    tree: ast.Module | None
    embedding_text: str
    features: dict[str, float]
    column_refs: set[str] = field(default_factory=set)
    string_constants: set[str] = field(default_factory=set)
    read_paths: set[str] = field(default_factory=set)
    string_keys: set[str] = field(default_factory=set)


def solution_family(script: str) -> str | None:
    """The :data:`MODEL_FAMILIES` name of the first estimator ``script`` constructs, or None.

    An estimator is recognised by the class it calls (``KNeighborsRegressor(...)``), never by
    an import: a script may import every family and use one.
    """
    for match in _CALL.finditer(script):
        for family, pattern in MODEL_FAMILIES.items():
            if pattern.search(match.group(1)):
                return family
    return None


def analyse_script(script: str) -> ScriptAnalysis:
    """Parse, fold and measure a script (see the module docstring)."""
    tree = parse_script(script).tree
    if tree is None:
        return _analyse_unparsable(script)
    nodes = list(ast.walk(tree))  # a walk is a sizeable share of the analysis: each tree is walked once
    n_imports = sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in nodes)
    constants = _module_constants(tree, nodes)
    folder = _ConstantFolder(constants, any(isinstance(n, ast.IfExp) for n in nodes))
    folded = folder.visit(tree)  # parsed nodes, rearranged: every one has its location
    folded_nodes = list(ast.walk(folded))
    _fill_empty_bodies(folded_nodes)
    return _Measurer(script, folded, folded_nodes, constants, n_imports).analysis()


def script_features(script: str) -> dict[str, float]:
    """The script features of :data:`SCRIPT_FEATURES`, by name."""
    return analyse_script(script).features


def task_features(task: Task) -> dict[str, float]:
    """Meta-features of a task (:data:`TASK_FEATURES`), from its spec and public files."""
    return dict(_task_summary(task).features)


def interaction_features(task: Task, analysis: ScriptAnalysis) -> dict[str, float]:
    """Features that need both the script and the task (:data:`INTERACTION_FEATURES`).

    * ``unknown_columns``: columns the script reads from a loaded CSV that no task file has
      (a misspelt target, a column of another dataset).
    * ``target_columns_mentioned``: share of the submission's target columns that appear as
      string literals (a script that never names them rarely writes them).
    * ``reads_missing_file``: ``read_csv`` of a literal path that is not among the public files.
    """
    summary = _task_summary(task)
    unknown = {c for c in analysis.column_refs if c not in summary.columns}
    targets = task.spec.target_columns
    mentioned = sum(t in analysis.string_constants for t in targets) / len(targets)
    missing = {p for p in analysis.read_paths if Path(p).name not in summary.public_files}
    return {
        "unknown_columns": float(len(unknown)),
        "target_columns_mentioned": mentioned,
        "reads_missing_file": float(bool(missing)),
    }


def feature_vector(task: Task, analysis: ScriptAnalysis) -> list[float]:
    """All :data:`FEATURE_NAMES` for one (task, script), in order."""
    values = {**analysis.features, **task_features(task), **interaction_features(task, analysis)}
    return [values[name] for name in FEATURE_NAMES]


def outcome_features(task: Task, analysis: ScriptAnalysis) -> list[float]:
    """The status head's extra features (:data:`OUTCOME_FEATURES`), in order.

    ``unknown_columns`` follows frames read with ``read_csv`` only; these count string keys read
    from anything (a ``csv.DictReader`` row, a frame built another way), so that a key no task
    file has reads as a likely KeyError whatever the idiom: ``string_keys`` is how many distinct
    keys the script reads, ``unknown_string_keys`` how many of them no task file has as a column.
    """
    columns = _task_summary(task).columns
    return [float(len(analysis.string_keys)), float(len(analysis.string_keys - columns))]


# ----------------------------------------------------------------------------- task summary


@dataclass(frozen=True)
class _TaskSummary:
    """What the features read of a task: its :data:`TASK_FEATURES`, the columns of train.csv,
    test.csv and the spec, and the names at the top of its public folder."""

    features: dict[str, float]
    columns: frozenset[str]
    public_files: frozenset[str]


_TASK_SUMMARIES: dict[str, _TaskSummary] = {}


def _task_summary(task: Task) -> _TaskSummary:
    # Keyed on the whole spec and folder, so a task rebuilt with another spec never reuses a
    # stale summary; computing one reads the public folder and a sample of train.csv.
    key = f"{task.public_dir}|{task.spec!r}"
    if key not in _TASK_SUMMARIES:
        _TASK_SUMMARIES[key] = _summarise_task(task.spec, task.public_dir)
    return _TASK_SUMMARIES[key]


def _summarise_task(spec: TaskSpec, public_dir: Path) -> _TaskSummary:
    metric = get_metric(spec.metric)
    meta = spec.meta
    try:
        public = task_facts(public_dir)
    except OSError:  # no public folder: no column or file is known
        public = TaskFacts(files=frozenset(), dirs=frozenset(), headers={}, sample_columns=None, sample_rows=None)
    train_header = public.headers.get("train.csv", ())
    columns = set(train_header) | set(public.headers.get("test.csv", ()))
    columns |= {spec.id_column, *spec.target_columns, *spec.answer_columns}
    n_classes = len(spec.classes) if spec.classes else 0
    n_features = meta.get("n_features", max(len(columns) - 1 - len(spec.answer_columns), 0))
    features = {
        **{f"task_type_{t}": float(spec.task_type == t) for t in TASK_TYPES},
        # The metric decides which habits pay: a median fit for MAE, a log target for RMSLE.
        **{f"metric_{m}": float(metric.name == m) for m in METRICS},
        "higher_is_better": float(metric.higher_is_better),
        **{f"prediction_{p}": float(metric.prediction == p) for p in PREDICTION_KINDS},
        "log_rows": math.log1p(float(meta.get("n_train", 0))),
        "log_test_rows": math.log1p(float(meta.get("n_test", 0))),
        "log_features": math.log1p(float(n_features)),
        "numeric_share": float(meta.get("n_numeric", n_features)) / max(float(n_features), 1.0),
        "log_n_classes": math.log1p(n_classes),
        "n_text_columns": float(len(meta.get("text_columns", ()) or ())),
        "n_target_columns": float(len(spec.target_columns)),
        **_target_stats(public_dir / "train.csv", train_header, spec.answer_columns[0], metric.is_classification),
    }
    top_level = frozenset(path for path in public.files | public.dirs if path and "/" not in path)
    return _TaskSummary(features, frozenset(columns), top_level)


#: Most bytes of train.csv the target statistics read: its first records up to this size. Every
#: built-in task's file fits whole (the largest, mnist-digits, is 6.9 MB), so their features are
#: those of the whole file; a larger file's are those of its first 8 MiB of records.
TARGET_SAMPLE_BYTES = 8 << 20


def _target_stats(train_csv: Path, header: tuple[str, ...], label: str, classification: bool) -> dict[str, float]:
    """Shape of the public training target (``header`` is the file's): skew and sign of a value,
    imbalance of a label, from at most :data:`TARGET_SAMPLE_BYTES` of the file (a 2 GB train.csv
    costs no more)."""
    stats = {"target_skew": 0.0, "target_negative_share": 0.0, "majority_share": 0.0}
    if label not in header:
        return stats
    sample = _leading_records(train_csv, TARGET_SAMPLE_BYTES)
    if not sample:  # a header longer than the sample: no record to measure
        return stats
    target = pd.read_csv(io.BytesIO(sample), usecols=[label])[label].dropna()
    if target.empty:
        return stats
    if classification:
        stats["majority_share"] = float(target.value_counts(normalize=True).iloc[0])
    elif pd.api.types.is_numeric_dtype(target):
        skew = float(target.skew()) if len(target) > 2 else 0.0
        stats["target_skew"] = skew if math.isfinite(skew) else 0.0
        stats["target_negative_share"] = float((target < 0).mean())
    return stats


def _leading_records(path: Path, limit: int) -> bytes:
    """The longest start of the CSV file ``path`` of at most ``limit`` bytes that ends at a record's end."""
    with path.open("rb") as fh:
        head = fh.read(limit + 1)
    if len(head) <= limit:
        return head
    # A newline inside a quoted field ends no record: step back until the quotes before it pair up.
    end = head.rfind(b"\n", 0, limit)
    quotes = head.count(b'"', 0, end)
    while end >= 0 and quotes % 2:
        previous = head.rfind(b"\n", 0, end)
        quotes -= head.count(b'"', previous + 1, end)
        end = previous
    return head[: end + 1]


# ----------------------------------------------------------------------------- folding


def _module_constants(tree: ast.Module, nodes: list[ast.AST]) -> dict[str, Any]:
    """Module-level names bound exactly once, to an immutable literal (``SEED = 0``, ``MODE = "cv"``);
    ``nodes`` are the tree's nodes (``ast.walk``)."""
    stores: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores[node.name] = stores.get(node.name, 0) + 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                stores[name] = stores.get(name, 0) + 2  # rebound elsewhere: never constant
    constants: dict[str, Any] = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and stores.get(stmt.targets[0].id) == 1):
            try:
                value = ast.literal_eval(stmt.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue  # not a literal
            # Mutable containers change without being rebound (``parts = []`` then ``append``).
            if not isinstance(value, (list, dict, set)):
                constants[stmt.targets[0].id] = value
    return constants


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_UNKNOWN = object()
_TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _static_value(node: ast.expr, constants: dict[str, Any]) -> Any:
    """The value of an expression built from literals and constants, else ``_UNKNOWN``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id, _UNKNOWN)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _static_value(node.operand, constants)
        return _UNKNOWN if value is _UNKNOWN else not value
    if isinstance(node, ast.BoolOp):
        values = [_static_value(v, constants) for v in node.values]
        if any(v is _UNKNOWN for v in values):
            return _UNKNOWN
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left = _static_value(node.left, constants)
        right = _static_value(node.comparators[0], constants)
        compare = _COMPARE.get(type(node.ops[0]))
        if left is _UNKNOWN or right is _UNKNOWN or compare is None:
            return _UNKNOWN
        try:
            return compare(left, right)
        except TypeError:  # e.g. "a" < 1: leave it to run time
            return _UNKNOWN
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [_static_value(v, constants) for v in node.elts]
        return _UNKNOWN if any(v is _UNKNOWN for v in values) else tuple(values)
    return _UNKNOWN


class _ConstantFolder(ast.NodeTransformer):
    """Replaces statically decided ``if`` statements and expressions by their taken branch,
    and drops docstrings."""

    def __init__(self, constants: dict[str, Any], conditional_expressions: bool) -> None:
        self.constants = constants
        # Without an ``a if c else b`` in the tree no expression has anything to fold, and the
        # walk keeps to statements: most of a tree's nodes are in expressions.
        self.into_expressions = conditional_expressions

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        value = _static_value(node.test, self.constants)
        if value is _UNKNOWN:
            return node
        return node.body if value else node.orelse

    visit_IfExp = visit_If  # same rule: a statement's body is a list, an expression's a node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if not self.into_expressions and isinstance(node, ast.expr):
            return node
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:]
        node = super().generic_visit(node)
        # An inlined branch can end in ``return``; what followed it in the block is dead.
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                end = next((i for i, s in enumerate(block) if isinstance(s, _TERMINAL)), len(block))
                del block[end + 1:]
        return node


def _fill_empty_bodies(nodes: list[ast.AST]) -> None:
    """Folding can empty a block; a ``pass`` keeps the program valid for ``ast.unparse``
    (``nodes``: the folded tree's, walked)."""
    for node in nodes:
        body = getattr(node, "body", None)
        if isinstance(body, list) and not body and not isinstance(node, ast.Module):
            body.append(ast.Pass())


# ----------------------------------------------------------------------------- measuring


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _number(node: ast.expr, constants: dict[str, Any]) -> float | None:
    value = _static_value(node, constants)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int literal past any float: no hyperparameter the features can read
        return None


def _strings(value: Any) -> set[str]:
    """The strings of a static value: itself, or the string items of a tuple."""
    if isinstance(value, str):
        return {value}
    return {v for v in value if isinstance(v, str)} if isinstance(value, tuple) else set()


def _log1p_pos(value: float) -> float:
    return math.log1p(max(value, 0.0))


class _Measurer:
    """Reads every script feature off a folded program in one walk."""

    def __init__(self, source: str, tree: ast.Module, nodes: list[ast.AST], constants: dict[str, Any],
                 n_imports: int) -> None:
        self.source, self.tree, self.constants = source, tree, constants
        self.n_imports = n_imports
        self.nodes = nodes  # the tree walked once: every feature filters this list (a filled ``pass`` is in no feature)

    def analysis(self) -> ScriptAnalysis:
        tree, constants = self.tree, self.constants
        calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        # Every name the program reads, not only direct callees: ``(KFold if a else GroupKFold)(3)``.
        names = {n.id for n in self.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        names |= {n.attr for n in self.nodes if isinstance(n, ast.Attribute)}
        dotted = {_dotted(c.func) for c in calls}
        keywords: dict[str, list[ast.expr]] = {}
        for call in calls:
            for kw in call.keywords:
                if kw.arg:
                    keywords.setdefault(kw.arg, []).append(kw.value)

        def uses(pattern: re.Pattern[str]) -> float:
            return float(any(pattern.search(n) for n in names))

        def largest(*args: str) -> float | None:
            values = [v for a in args for node in keywords.get(a, ()) if (v := _number(node, constants)) is not None]
            return max(values) if values else None

        families = {f: uses(p) for f, p in MODEL_FAMILIES.items()}
        strings = {n.value for n in self.nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        frames, read_paths = self._frames_read(calls)
        to_csv = [c for c in calls if call_name(c) == "to_csv"]
        writes = [c for c in to_csv if self._writes_submission(c)]
        whiles = [n for n in self.nodes if isinstance(n, ast.While)]
        imported = {alias.name.split(".")[0] for n in self.nodes if isinstance(n, (ast.Import, ast.ImportFrom))
                    for alias in (n.names if isinstance(n, ast.Import) else [ast.alias(n.module or "")])}

        features: dict[str, float] = {
            "syntax_ok": 1.0,
            "log_chars": math.log1p(len(self.source)),
            "log_lines": math.log1p(self.source.count("\n") + 1),
            "n_imports": float(self.n_imports),
            "n_functions": float(sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in self.nodes)),
            "n_loops": float(sum(isinstance(n, (ast.For, ast.While, ast.comprehension)) for n in self.nodes)),
            **{f"family_{f}": v for f, v in families.items()},
            "n_model_families": sum(families.values()),
            "ensemble": uses(_ENSEMBLE),
            **{name: _log1p_pos(largest(*args) or 0.0) for name, args in _CAPACITY_KEYWORDS.items()},
            "hp_hidden_units": self._hidden_units(keywords),
            "hp_learning_rate": largest("learning_rate", "eta", "lr") or 0.0,
            "hp_log_c": math.log10(c) if (c := largest("C")) and c > 0 else 0.0,
            "hp_log_alpha": math.log10(a) if (a := largest("alpha")) and a > 0 else 0.0,
            "early_stopping": float(any(_static_value(v, constants) is True for v in keywords.get("early_stopping", ()))),
            "random_state": float("random_state" in keywords or "seed" in keywords),
            "validation_holdout": uses(_HOLDOUT),
            "validation_cv": uses(_CROSS_VALIDATION),
            "reads_train": float(any("train" in Path(p).name for p in read_paths)),
            "reads_test": float(any("test" in Path(p).name for p in read_paths)),
            "writes_submission": float(bool(writes)),
            "mentions_submission": float("submission.csv" in self.source),
            "writes_index": float(any(not self._index_false(c) for c in writes)),
            "renames_columns": float("rename" in names or any(
                isinstance(t, ast.Attribute) and t.attr == "columns"
                for n in self.nodes if isinstance(n, ast.Assign) for t in n.targets)),
            "text_vectoriser": uses(_TEXT_VECTORISER),
            "char_ngrams": float(any(_static_value(v, constants) in ("char", "char_wb")
                                     for v in keywords.get("analyzer", ()))),
            "scaler": uses(_SCALER),
            "imputer": uses(_IMPUTER),
            "onehot": uses(_ONEHOT),
            "ordinal": uses(_ORDINAL),
            "pipeline": uses(_PIPELINE),
            # A log-transformed target is fitted on log(y) and mapped back with exp.
            "log_target": float(bool(names & {"log1p", "log"}) and bool(names & {"expm1", "exp"})),
            "predict_proba": float("predict_proba" in names),
            "while_true": float(any(self._endless(w) for w in whiles)),
            "n_while": float(len(whiles)),
            "sleep": float(any(d.endswith("sleep") for d in dotted)),
            "network": float(bool(imported & set(_NETWORK_MODULES))),
            "subprocess": float("subprocess" in imported or "os.system" in dotted),
            "n_raise": float(sum(isinstance(n, ast.Raise) for n in self.nodes)),
            "exits": float(bool(dotted & {"sys.exit", "exit", "quit", "os._exit"})),
            "undefined_names": float(len(self._undefined_names())),
        }
        return ScriptAnalysis(
            source=self.source,
            tree=tree,
            embedding_text=_salient_text(tree),
            features=features,
            column_refs=self._column_refs(frames),
            string_constants=strings,
            read_paths=read_paths,
            string_keys=self._string_keys(),
        )

    def _frames_read(self, calls: list[ast.Call]) -> tuple[set[str], set[str]]:
        """Names bound to ``read_csv(...)`` results, and the literal paths read."""
        paths = {v for c in calls if call_name(c) == "read_csv" and c.args
                 and isinstance(v := _static_value(c.args[0], self.constants), str)}
        frames = {t.id for n in self.nodes if isinstance(n, ast.Assign)
                  and isinstance(n.value, ast.Call) and call_name(n.value) == "read_csv"
                  for t in n.targets if isinstance(t, ast.Name)}
        return frames, paths

    def _column_refs(self, frames: set[str]) -> set[str]:
        """Columns read (not created) from loaded frames: ``train["col"]``, ``train.drop(columns=[...])``."""
        refs: set[str] = set()
        for node in self.nodes:
            if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                    and isinstance(node.value, ast.Name) and node.value.id in frames):
                refs |= _strings(_static_value(node.slice, self.constants))
            elif (isinstance(node, ast.Call) and call_name(node) == "drop" and isinstance(node.func, ast.Attribute)
                  and isinstance(node.func.value, ast.Name) and node.func.value.id in frames):
                for kw in node.keywords:
                    if kw.arg == "columns":
                        refs |= _strings(_static_value(kw.value, self.constants))
        return refs

    def _string_keys(self) -> set[str]:
        """String keys read by subscript, minus those the script stores or puts in dict literals."""
        read: set[str] = set()
        own: set[str] = set()
        for node in self.nodes:
            if isinstance(node, ast.Subscript):
                keys = _strings(_static_value(node.slice, self.constants))
                (read if isinstance(node.ctx, ast.Load) else own).update(keys)
            elif isinstance(node, ast.Dict):
                own |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        return read - own

    def _writes_submission(self, call: ast.Call) -> bool:
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "path_or_buf"), None)
        path = _static_value(target, self.constants) if target is not None else _UNKNOWN
        return isinstance(path, str) and Path(path).name == "submission.csv"

    def _index_false(self, call: ast.Call) -> bool:
        return any(k.arg == "index" and _static_value(k.value, self.constants) is False for k in call.keywords)

    def _endless(self, loop: ast.While) -> bool:
        """A ``while`` whose test is statically true and whose body has no ``break`` or ``return``."""
        test = _static_value(loop.test, self.constants)
        return test is not _UNKNOWN and bool(test) and not any(
            isinstance(n, (ast.Break, ast.Return)) for n in ast.walk(loop))

    def _hidden_units(self, keywords: dict[str, list[ast.expr]]) -> float:
        sizes = [_static_value(v, self.constants) for v in keywords.get("hidden_layer_sizes", ())]
        units = [sum(s) if isinstance(s, tuple) else s for s in sizes if isinstance(s, (int, tuple))]
        return _log1p_pos(max(units, default=0))

    def _undefined_names(self) -> set[str]:
        """Names read but bound nowhere in the script (scope-blind, so it errs towards none)."""
        bound = set(_BUILTIN_NAMES)
        loaded: set[str] = set()
        for node in self.nodes:
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound.add(node.name)
            elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return set()  # a star import may bind anything
        return loaded - bound


def _salient_text(tree: ast.Module) -> str:
    """The lines of the folded program that model: constructor calls and ML verbs.

    Data plumbing and imports look alike in every script; keeping only modelling lines makes
    the embedding see what differs, in at most :data:`EMBEDDING_CHARS`.
    """
    lines: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        try:
            text = ast.unparse(stmt)
        except (ValueError, RecursionError):  # an int past Python's digit limit; nesting too deep
            continue
        for line in text.splitlines():
            if _SALIENT.search(line) and line.strip() not in lines:
                lines.append(line.strip())
    return "\n".join(lines)[:EMBEDDING_CHARS]


def _analyse_unparsable(script: str) -> ScriptAnalysis:
    """Text-level features of a script that does not parse; everything else is 0."""
    features = dict.fromkeys(SCRIPT_FEATURES, 0.0)
    features.update(
        log_chars=math.log1p(len(script)),
        log_lines=math.log1p(script.count("\n") + 1),
        n_imports=float(len(re.findall(r"^\s*(?:import|from)\s+\w", script, re.MULTILINE))),
        mentions_submission=float("submission.csv" in script),
    )
    text = "\n".join(line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    return ScriptAnalysis(source=script, tree=None, embedding_text=text[:EMBEDDING_CHARS], features=features)
