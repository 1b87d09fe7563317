"""Mutation operators: edits that turn a valid grammar script into a failure real ML agents make.

Each operator names one agent mistake, the outcome status (:mod:`wmrl_envs.outcome`) executing the
mutant ends with and, for errors, the exception class(es) it raises. ``apply(script, spec, rng)``
edits a rendered grammar script (``agents/code/grammar.py``) deterministically, and raises
:class:`MutationNotApplicable` where the mistake has nothing to break or would not fail on the task
(a class-label mistake on a regression task). :func:`mutate` seeds ``rng`` from the operator's name
and a seed, so a mutant is a pure function of ``(script, name, spec, seed)``.

*Provable* says whether the failure follows directly from what the script writes literally (a
module, name, path, keyword, attribute, column or row count) and the task's public facts (installed
modules and signatures, file names and headers, the sample submission), so that a static check can
prove it in principle; the others depend on what only a run sees (dtypes, row counts, ids, the
model's outputs, which branch runs, the columns a merge brings). Where one mistake has both forms,
both are here, so static proofs are evaluated on each. ``bench/mutation_check.py`` executes every
operator on a sample of tasks and compares the observed outcome with the claim.

==========================  =========================================  ==================  ===================  ========
operator                    agent mistake                              status              exception            provable
==========================  =========================================  ==================  ===================  ========
syntax_error                a closing parenthesis goes missing         syntax_error        SyntaxError          yes
wrong_column                the target's name misspelt (case)          runtime_error       KeyError             yes
no_submission               predictions written to predictions.csv     no_submission                            yes
wrong_columns               index written, or target column renamed    invalid_submission                       yes
exception                   an undefined name or a missing column      runtime_error       NameError, KeyError  yes
infinite_loop               a loop whose tolerance never reaches 0     timeout                                  yes
missing_module              model from LightGBM/XGBoost/CatBoost       import_error        ModuleNotFoundError  yes
wrong_import_source         a name from the wrong sklearn module       import_error        ImportError          yes
undefined_name              X_train for X at one top-level use         runtime_error       NameError            yes
use_before_def              a helper defined below its first call      runtime_error       NameError            yes
conditional_name            bound only in a branch never taken         runtime_error       NameError            no
kaggle_column_names         Kaggle's Id / target column names          runtime_error       KeyError             yes
lowercase_headers           train's headers lower-cased, names not     runtime_error       KeyError             no
missing_input_file          /kaggle/input/, ../input/, train_data.csv  runtime_error       FileNotFoundError    yes
kaggle_working_dir          writes to /kaggle/working/ (absent)        runtime_error       OSError              yes
dataframe_append            DataFrame.append (removed in pandas 2)     runtime_error       AttributeError       yes
missing_attribute           as_matrix(), .ix, feature_importance_      runtime_error       AttributeError       yes
misspelled_kwarg            misspelt keyword (sepp=, n_estimator=)     runtime_error       TypeError            yes
proba_matrix_column         predict_proba matrix into one column       runtime_error       ValueError           no
unfitted_transformer        a new scaler/encoder used unfitted         runtime_error       NotFittedError       yes
fit_order                   test transformed before the train fit      runtime_error       NotFittedError       no
test_missing_column         a feature added to train only              runtime_error       ValueError           no
unencoded_strings           bare model on raw string columns           runtime_error       ValueError           no
single_output_multi_target  single-output model, several targets       runtime_error       ValueError           no
endless_data_loop           chunk size rounds to 0: endless loop       timeout                                  no
label_codes                 integer codes instead of class labels      invalid_submission                       no
missing_class_columns       last class-probability column left out     invalid_submission                       yes
nan_predictions             aligned on ids, not rows: NaN              invalid_submission                       no
too_few_rows                a leftover head(100)                       invalid_submission                       yes
extra_columns               test features merged into the submission   invalid_submission                       no
==========================  =========================================  ==================  ===================  ========

The first six (:data:`LEGACY_MUTATIONS`) are the corpus's original mutations; their output is
byte-identical to what the shipped corpus CSVs were built from.

Two rooms use the operators, which is why they live in neither: the corpus builder
(:mod:`wmrl_envs.world_models.build.corpus`, build time) plans broken rows with them, and the
``grammar-buggy`` policy (``agents/code/policy.py``, at run time) breaks its own scripts with them.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wmrl_envs.errors import ConfigError
from wmrl_envs.outcome import IMPORT_ERROR, INVALID_SUBMISSION, NO_SUBMISSION, RUNTIME_ERROR, SYNTAX_ERROR, TIMEOUT
from wmrl_envs.task_spec import TaskSpec


class MutationNotApplicable(ConfigError):
    """The operator finds nothing to break in the script, or its mistake would not fail on the task."""


#: ``apply(script, spec, rng) -> mutated script``.
Apply = Callable[[str, TaskSpec, random.Random], str]


@dataclass(frozen=True)
class Mutation:
    """One agent mistake as an edit of a grammar script.

    Attributes:
        name: The operator's name (the corpus's ``mutation`` column).
        mistake: The agent mistake it imitates, in one line.
        status: The outcome status the mutant's execution ends with.
        exceptions: Short class names of the exception it raises (one of them); empty unless the
            status is an error.
        provable: Whether the failure follows from literals and the task's public facts.
        apply: The edit.
    """

    name: str
    mistake: str
    status: str
    exceptions: tuple[str, ...]
    provable: bool
    apply: Apply


#: Every operator by name, the legacy six first.
OPERATORS: dict[str, Mutation] = {}
#: The corpus's original mutations, in the order ``plan_corpus`` draws them.
LEGACY_MUTATIONS: tuple[str, ...] = (
    "syntax_error", "wrong_column", "no_submission", "wrong_columns", "exception", "infinite_loop",
)


def _operator(name: str, status: str, mistake: str, *exceptions: str, provable: bool) -> Callable[[Apply], Apply]:
    def register(apply: Apply) -> Apply:
        OPERATORS[name] = Mutation(name, mistake, status, exceptions, provable, apply)
        return apply

    return register


def mutate(script: str, name: str, spec: TaskSpec, seed: int) -> str:
    """Break a rendered solution script the way operator ``name`` does (``"none"``: unchanged).

    Raises:
        ConfigError: Unknown operator.
        MutationNotApplicable: The operator does not apply to this script or task.
    """
    if name == "none":
        return script
    if name not in OPERATORS:
        raise ConfigError(f"unknown mutation {name!r}; known: {('none', *OPERATORS)}")
    return OPERATORS[name].apply(script, spec, random.Random(f"{name}:{seed}"))


# ----------------------------------------------------------------------------- script surgery


def _parse(script: str) -> ast.Module:
    try:
        return ast.parse(script)
    except SyntaxError as exc:
        raise MutationNotApplicable(f"the script does not parse: {exc}") from exc


def _find(script: str, pattern: str, expression: bool = False) -> ast.AST:
    """The node of ``script`` that is the code ``pattern`` (compared as syntax: quotes, spacing aside)."""
    wanted = ast.parse(pattern, mode="eval").body if expression else ast.parse(pattern).body[0]
    dump = ast.dump(wanted)
    for node in ast.walk(_parse(script)):
        if type(node) is type(wanted) and ast.dump(node) == dump:
            return node
    raise MutationNotApplicable(f"the script has no `{pattern}`")


def _constant(script: str, name: str) -> object:
    """The literal value of the script's top-level constant ``name = <literal>``."""
    for stmt in _parse(script).body:
        if isinstance(stmt, ast.Assign) and [ast.unparse(t) for t in stmt.targets] == [name]:
            return ast.literal_eval(stmt.value)
    raise MutationNotApplicable(f"the script has no top-level constant {name}")


def _span(script: str, node: ast.AST) -> tuple[int, int]:
    """Character offsets of ``node``'s source (ast columns count UTF-8 bytes)."""
    lines = script.split("\n")

    def offset(lineno: int, col: int) -> int:
        return sum(len(line) + 1 for line in lines[:lineno - 1]) + len(lines[lineno - 1].encode()[:col].decode())

    return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)


def _source(script: str, node: ast.AST) -> str:
    start, end = _span(script, node)
    return script[start:end]


def _replace(script: str, node: ast.AST, text: str) -> str:
    start, end = _span(script, node)
    return script[:start] + text + script[end:]


def _around(script: str, stmt: ast.stmt, before: Sequence[str] = (), after: Sequence[str] = (),
            replace: Sequence[str] | None = None) -> str:
    """Lines put before and after statement ``stmt`` (or in its place), at its indentation."""
    lines = script.split("\n")
    indent = re.match(r"\s*", lines[stmt.lineno - 1]).group()
    own = lines[stmt.lineno - 1:stmt.end_lineno] if replace is None else [indent + line for line in replace]
    lines[stmt.lineno - 1:stmt.end_lineno] = [*(indent + line if line else line for line in before), *own,
                                               *(indent + line if line else line for line in after)]
    return "\n".join(lines)


def _edit(script: str, anchor: str, before: Sequence[str] = (), after: Sequence[str] = (),
          replace: Sequence[str] | None = None) -> str:
    """:func:`_around` the statement that is the code ``anchor``."""
    return _around(script, _find(script, anchor), before, after, replace)


def _final_estimator(script: str) -> tuple[ast.Return, ast.expr]:
    """``make_model``'s ``return make_pipeline(features, <estimator>)`` and its estimator expression."""
    for node in ast.walk(_parse(script)):
        if (isinstance(node, ast.Return) and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func) == "make_pipeline" and len(node.value.args) == 2
                and ast.unparse(node.value.args[0]) == "features"):
            return node, node.value.args[1]
    raise MutationNotApplicable("the script has no `return make_pipeline(features, <estimator>)`")


def _executed_estimator(script: str) -> ast.expr:
    """The branch of the final estimator that runs: ``A if CLASSIFY else B`` is A on classification."""
    estimator = _final_estimator(script)[1]
    if isinstance(estimator, ast.IfExp) and ast.unparse(estimator.test) == "CLASSIFY":
        return estimator.body if _constant(script, "CLASSIFY") else estimator.orelse
    return estimator


# Nodes whose children may not run when the node does: lambdas, comprehensions, short-circuits.
_LAZY = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.IfExp, ast.BoolOp)


def _executed_loads(node: ast.AST) -> list[ast.Name]:
    """The names a simple statement surely reads when it runs (nothing under a lazy node)."""
    if isinstance(node, _LAZY):
        return []
    own = [node] if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else []
    return own + [name for child in ast.iter_child_nodes(node) for name in _executed_loads(child)]


def _unconditional(tree: ast.Module) -> list[ast.stmt]:
    """Top-level simple statements: every run executes them (compound ones may skip their body)."""
    return [s for s in tree.body if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr))]


def _as_label(value: object) -> str:
    """A class label as the grammar's ``as_label`` writes it."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _misspell(name: str) -> str:
    """The kind of typo agents make in column names: the first letter's case flipped."""
    flipped = name[:1].swapcase() + name[1:]
    return flipped if flipped != name else name + "_"


def _submission_write(lines: list[str]) -> tuple[int, str, str]:
    """Index, indentation and frame name of the line that writes ``submission.csv``."""
    pattern = re.compile(r"""^(\s*)(\w+)\.to_csv\(\s*["'][^"']*submission\.csv["']""")
    for i, line in enumerate(lines):
        if match := pattern.match(line):
            return i, match.group(1), match.group(2)
    raise MutationNotApplicable("the script has no <frame>.to_csv('submission.csv', ...) line to mutate")


def _before_write(script: str, *statements: str) -> str:
    """Statements inserted just before the submission is written; ``{frame}`` names its frame."""
    lines = script.splitlines()
    at, indent, frame = _submission_write(lines)
    lines[at:at] = [f"{indent}{s.format(frame=frame)}" for s in statements]
    return "\n".join(lines) + "\n"


def _write_to(script: str, path: str) -> str:
    """The submission written to ``path`` instead of ``submission.csv``."""
    lines = script.splitlines()
    at = _submission_write(lines)[0]
    lines[at] = lines[at].replace("submission.csv", path, 1)
    return "\n".join(lines) + "\n"


def _needs(condition: bool, why: str) -> None:
    if not condition:
        raise MutationNotApplicable(why)


# ----------------------------------------------------------------------------- the legacy six


@_operator("syntax_error", SYNTAX_ERROR, "a closing parenthesis goes missing", "SyntaxError", provable=True)
def _drop_closing_paren(script: str, spec: TaskSpec, rng: random.Random) -> str:
    """Remove the last ``)`` of a one-line statement, trying lines until the result fails to parse."""
    lines = script.splitlines()
    candidates = sorted({node.lineno - 1 for node in ast.walk(_parse(script))
                         if isinstance(node, ast.stmt) and node.lineno == node.end_lineno
                         and lines[node.lineno - 1].rstrip().endswith(")")})
    rng.shuffle(candidates)
    for i in candidates:
        broken = lines.copy()
        broken[i] = broken[i].rstrip()[:-1]
        text = "\n".join(broken) + "\n"
        try:
            ast.parse(text)
        except SyntaxError:
            return text
    raise MutationNotApplicable("mutation syntax_error: no one-line statement ending in ')' to break")


@_operator("wrong_column", RUNTIME_ERROR, "the target column's name is misspelt", "KeyError", provable=True)
def _wrong_column(script: str, spec: TaskSpec, rng: random.Random) -> str:
    label = spec.answer_columns[0]
    for quoted in (repr(label), json.dumps(label)):
        if quoted in script:
            return script.replace(quoted, repr(_misspell(label)), 1)
    raise MutationNotApplicable(f"mutation wrong_column: the script never names target column {label!r}")


@_operator("no_submission", NO_SUBMISSION, "predictions are written to the wrong file", provable=True)
def _no_submission(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _write_to(script, "predictions.csv")


@_operator("wrong_columns", INVALID_SUBMISSION, "the submission has an index column or a renamed target column",
           provable=True)
def _wrong_columns(script: str, spec: TaskSpec, rng: random.Random) -> str:
    lines = script.splitlines()
    at, indent, frame = _submission_write(lines)
    if rng.random() < 0.5 and "index=False" in lines[at]:
        lines[at] = re.sub(r",\s*index=False", "", lines[at])  # pandas then writes the index
    else:
        lines.insert(at, f'{indent}{frame} = {frame}.rename(columns={{{frame}.columns[-1]: "prediction"}})')
    return "\n".join(lines) + "\n"


@_operator("exception", RUNTIME_ERROR, "the script crashes after training, before writing", "NameError", "KeyError",
           provable=True)
def _exception(script: str, spec: TaskSpec, rng: random.Random) -> str:
    lines = script.splitlines()
    at, indent, frame = _submission_write(lines)
    lines.insert(at, rng.choice([
        f"{indent}{frame}[{frame}.columns[-1]] = blend_weights * {frame}[{frame}.columns[-1]]  # blend",
        f'{indent}{frame} = {frame}[[{frame}.columns[0], "prediction"]]',
    ]))
    return "\n".join(lines) + "\n"


@_operator("infinite_loop", TIMEOUT, "a loop that never ends, killed by the wall-clock limit", provable=True)
def _infinite_loop(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _before_write(script, "tolerance = 1.0",
                         "while tolerance > 0:  # refine until the predictions converge",
                         "    tolerance = max(tolerance / 2, 1e-12)")


# ----------------------------------------------------------------------------- imports and names

_ABSENT_LIBRARIES = (("lightgbm", "lgb", "LGBM"), ("xgboost", "xgb", "XGB"), ("catboost", "cb", "CatBoost"))
# (module the script imports the name from, name, where the agent imports it from instead)
_WRONG_SOURCES = (
    ("sklearn.linear_model", "LinearSVC", "sklearn.linear_model"),
    ("sklearn.linear_model", "LogisticRegression", "sklearn.ensemble"),
    ("sklearn.impute", "SimpleImputer", "sklearn.preprocessing"),
)
# Names agents reach for when the script calls the frame something else.
_RENAMES = {"X": "X_train", "y": "y_train", "train": "train_df", "test": "test_df"}


@_operator("missing_module", IMPORT_ERROR, "the model comes from a library the runtime lacks (LightGBM, XGBoost, "
           "CatBoost)", "ModuleNotFoundError", provable=True)
def _missing_module(script: str, spec: TaskSpec, rng: random.Random) -> str:
    module, alias, prefix = rng.choice(_ABSENT_LIBRARIES)
    params = "n_estimators=500, random_state=SEED"
    script = _replace(script, _final_estimator(script)[1],
                      f"{alias}.{prefix}Classifier({params}) if CLASSIFY else {alias}.{prefix}Regressor({params})")
    return _edit(script, "import pandas as pd", after=[f"import {module} as {alias}"])


@_operator("wrong_import_source", IMPORT_ERROR, "a name is imported from the wrong scikit-learn module", "ImportError",
           provable=True)
def _wrong_import_source(script: str, spec: TaskSpec, rng: random.Random) -> str:
    module, name, wrong = rng.choice(_WRONG_SOURCES)
    node = next((s for s in _parse(script).body if isinstance(s, ast.ImportFrom) and s.module == module), None)
    _needs(node is not None, f"the script imports nothing from {module}")
    kept = [ast.unparse(alias) for alias in node.names if alias.name != name]
    lines = [f"from {module} import {', '.join(kept)}"] if kept else []
    return _around(script, node, replace=[*lines, f"from {wrong} import {name}"])


@_operator("undefined_name", RUNTIME_ERROR, "a variable is renamed at one top-level use (X_train for X)", "NameError",
           provable=True)
def _undefined_name(script: str, spec: TaskSpec, rng: random.Random) -> str:
    uses = [name for stmt in _unconditional(_parse(script)) for name in _executed_loads(stmt)
            if name.id in _RENAMES and not re.search(rf"\b{_RENAMES[name.id]}\b", script)]
    _needs(bool(uses), "no top-level statement reads X, y, train or test")
    name = rng.choice(uses)
    return _replace(script, name, _RENAMES[name.id])


@_operator("use_before_def", RUNTIME_ERROR, "a helper is defined below the statement that first calls it",
           "NameError", provable=True)
def _use_before_def(script: str, spec: TaskSpec, rng: random.Random) -> str:
    tree = _parse(script)
    moves = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            caller = next((s for s in _unconditional(tree) if s.lineno > stmt.lineno
                           and stmt.name in {n.id for n in _executed_loads(s)}), None)
            if caller is not None:
                moves.append((stmt, caller))
    _needs(bool(moves), "no top-level function is called at top level")
    definition, caller = rng.choice(moves)
    lines = script.split("\n")
    block = lines[definition.lineno - 1:definition.end_lineno]
    lines[caller.end_lineno:caller.end_lineno] = ["", "", *block, "", ""]  # the caller comes later: insert first
    del lines[definition.lineno - 1:definition.end_lineno]
    return "\n".join(lines)


@_operator("conditional_name", RUNTIME_ERROR, "a name is bound only in a branch that the data never takes",
           "NameError", provable=False)
def _conditional_name(script: str, spec: TaskSpec, rng: random.Random) -> str:
    # Training labels are complete, so the branch never runs; only the data can tell.
    return _edit(script, "pred = fit_predict(X, y, X_test)", replace=[
        "if y.isna().any():  # train only on the rows that have a target",
        "    X_known, y_known = X[y.notna()], y[y.notna()]",
        "pred = fit_predict(X_known, y_known, X_test)",
    ])


# ----------------------------------------------------------------------------- files and columns


@_operator("kaggle_column_names", RUNTIME_ERROR, "Kaggle's column names (Id, target) instead of the task's",
           "KeyError", provable=True)
def _kaggle_column_names(script: str, spec: TaskSpec, rng: random.Random) -> str:
    constant, kaggle = rng.choice((("ID", "Id"), ("LABEL", "target")))
    current = _constant(script, constant)
    node = _find(script, f"{constant} = {current!r}")
    return _replace(script, node.value, repr(_misspell(kaggle) if kaggle == current else kaggle))


@_operator("lowercase_headers", RUNTIME_ERROR, "train's headers are lower-cased, the column constants are not",
           "KeyError", provable=False)
def _lowercase_headers(script: str, spec: TaskSpec, rng: random.Random) -> str:
    _needs(any(c != c.lower() for c in (spec.id_column, spec.answer_columns[0])),
           "the id and target column names are lower case already")
    return _edit(script, 'train = pd.read_csv("data/train.csv")',
                 after=["train.columns = train.columns.str.lower()  # tidy the headers"])


@_operator("missing_input_file", RUNTIME_ERROR, "a data path from a Kaggle notebook, or a guessed file name",
           "FileNotFoundError", provable=True)
def _missing_input_file(script: str, spec: TaskSpec, rng: random.Random) -> str:
    which = rng.choice(("train", "test"))
    path = rng.choice((f"/kaggle/input/{spec.id}/{which}.csv", f"../input/{which}.csv", f"data/{which}_data.csv"))
    call = _find(script, f'pd.read_csv("data/{which}.csv")', expression=True)
    return _replace(script, call.args[0], json.dumps(path))


@_operator("kaggle_working_dir", RUNTIME_ERROR, "the submission is written to /kaggle/working/, absent here",
           "OSError", provable=True)
def _kaggle_working_dir(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _write_to(script, "/kaggle/working/submission.csv")


# ----------------------------------------------------------------------------- APIs


_REMOVED_ATTRIBUTES = (
    ("X = train.drop(columns=[ID, LABEL])", "after", "features = X.as_matrix()  # scikit-learn wants arrays"),
    ("X_test = test[X.columns].copy()", "replace", "X_test = test.ix[:, X.columns].copy()"),
    ("model.fit(X_fit, np.log1p(np.clip(y_fit, 0, None)) if LOG_TARGET else y_fit)", "after",
     'print("top features:", np.argsort(model.feature_importance_)[-5:])'),
)
# Typos agents make in keyword arguments; any other keyword gets a plural ``s`` added or dropped.
_KEYWORD_TYPOS = {"test_size": "test_sise", "n_estimators": "n_estimator", "n_neighbors": "n_neighbours",
                  "shuffle": "shufle", "random_state": "random_seed", "max_iter": "max_iters"}


@_operator("dataframe_append", RUNTIME_ERROR, "DataFrame.append, removed in pandas 2", "AttributeError",
           provable=True)
def _dataframe_append(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _edit(script, 'test = pd.read_csv("data/test.csv")',
                 after=["full = train.append(test, ignore_index=True)  # encode train and test together"])


@_operator("missing_attribute", RUNTIME_ERROR, "an attribute the installed classes lack (as_matrix, .ix, "
           "feature_importance_)", "AttributeError", provable=True)
def _missing_attribute(script: str, spec: TaskSpec, rng: random.Random) -> str:
    anchor, where, text = rng.choice(_REMOVED_ATTRIBUTES)
    return _edit(script, anchor, **{where: text.split("\n")})


@_operator("misspelled_kwarg", RUNTIME_ERROR, "a misspelt keyword argument to an installed callable", "TypeError",
           provable=True)
def _misspelled_kwarg(script: str, spec: TaskSpec, rng: random.Random) -> str:
    read = _find(script, 'pd.read_csv("data/train.csv")', expression=True)
    edits = [(read, f'{_source(script, read)[:-1]}, sepp=",")')]
    calls = [_executed_estimator(script)]
    validation = _constant(script, "VALIDATION")
    if validation == "holdout":
        calls.append(_find(script, "train_test_split(X, y, test_size=0.2, random_state=SEED, stratify=stratify)",
                           expression=True))
    elif validation == "cv3":
        calls.append(_find(script, "(StratifiedKFold if CLASSIFY and y.value_counts().min() >= 3 else KFold)"
                                   "(3, shuffle=True, random_state=SEED)", expression=True))
    for call in calls:
        for keyword in getattr(call, "keywords", ()):
            typo = _KEYWORD_TYPOS.get(keyword.arg) or (keyword.arg[:-1] if keyword.arg.endswith("s")
                                                       else keyword.arg + "s")
            edits.append((keyword, f"{typo}={_source(script, keyword.value)}"))
    node, text = rng.choice(edits)
    return _replace(script, node, text)


# ----------------------------------------------------------------------------- models and shapes

_PROBA_MISUSE = {  # the return of fit_predict that gives the whole matrix instead
    "label": ("return model.predict(X_new)", "return model.predict_proba(X_new)"),
    "probability": ('return full[:, 1] if PREDICTION == "probability" else full', "return full"),
}
# (transformer, the column list it transforms)
_TRANSFORMERS = (("StandardScaler", "numeric_cols"), ("OrdinalEncoder", "categorical_cols"))


@_operator("proba_matrix_column", RUNTIME_ERROR, "the whole predict_proba matrix goes where one column belongs",
           "ValueError", provable=False)
def _proba_matrix_column(script: str, spec: TaskSpec, rng: random.Random) -> str:
    prediction = _constant(script, "PREDICTION")
    _needs(prediction in _PROBA_MISUSE, f"a {prediction} task takes no single column of classes")
    anchor, misuse = _PROBA_MISUSE[prediction]
    return _edit(script, anchor, replace=[misuse])


def _transform_test_first(script: str, rng: random.Random, via_helper: bool) -> str:
    """A new transformer applied to the test frame before anything fits it."""
    transformer, columns = rng.choice(_TRANSFORMERS)
    if not via_helper:
        return _edit(script, "pred = fit_predict(X, y, X_test)", before=[
            f"transformer = {transformer}()",
            f"X_test[{columns}] = transformer.transform(X_test[{columns}])  # preprocess like the training frame",
        ])
    return _edit(script, "pred = fit_predict(X, y, X_test)", before=[
        f"transformer = {transformer}()", "", "",
        "def preprocess(frame, fit=False):",
        '    """Fit the transformer on the training frame, reuse it on the test frame."""',
        "    return transformer.fit_transform(frame) if fit else transformer.transform(frame)", "", "",
        f"X_test[{columns}] = preprocess(X_test[{columns}])",
        f"X[{columns}] = preprocess(X[{columns}], fit=True)",
    ])


@_operator("unfitted_transformer", RUNTIME_ERROR, "a new scaler or encoder transforms the test frame unfitted",
           "NotFittedError", provable=True)
def _unfitted_transformer(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _transform_test_first(script, rng, via_helper=False)


@_operator("fit_order", RUNTIME_ERROR, "a preprocessing helper transforms the test frame before it is fitted on "
           "train", "NotFittedError", provable=False)
def _fit_order(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _transform_test_first(script, rng, via_helper=True)


@_operator("test_missing_column", RUNTIME_ERROR, "a feature is added to the training frame only", "ValueError",
           provable=False)
def _test_missing_column(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _edit(script, "X_test = test[X.columns].copy()",
                 after=['X["n_missing"] = X.isna().sum(axis=1)  # rows with gaps behave differently'])


@_operator("unencoded_strings", RUNTIME_ERROR, "the bare model is fitted on raw string columns", "ValueError",
           provable=False)
def _unencoded_strings(script: str, spec: TaskSpec, rng: random.Random) -> str:
    _needs(spec.meta.get("n_features", 0) > spec.meta.get("n_numeric", float("inf")),
           "the task's features are all numeric (or its meta does not say)")
    statement, estimator = _final_estimator(script)
    text = _source(script, estimator)
    _needs("Dummy" not in text, "a constant model never looks at its features")
    return _around(script, statement, replace=[f"return {text}  # the model takes the columns as they are"])


@_operator("single_output_multi_target", RUNTIME_ERROR, "a single-output regressor is fitted on one column per "
           "target", "ValueError", provable=False)
def _single_output_multi_target(script: str, spec: TaskSpec, rng: random.Random) -> str:
    _needs(len(spec.target_columns) > 1, "the task has one target column")
    return _edit(script, "pred = fit_predict(X, y, X_test)", replace=[
        "targets = pd.get_dummies(y).astype(float)  # one target per submission column",
        "model = make_pipeline(ColumnTransformer(parts, sparse_threshold=0.0), "
        "HistGradientBoostingRegressor(random_state=SEED))",
        "pred = model.fit(X, targets).predict(X_test)",
    ])


# ----------------------------------------------------------------------------- loops

#: ``endless_data_loop``'s chunk size is ``len(X_test) // _CHUNKS``: 0, so endless, on a smaller test set.
_CHUNKS = 10_000


@_operator("endless_data_loop", TIMEOUT, "a chunked loop whose chunk size the data rounds down to 0",
           provable=False)
def _endless_data_loop(script: str, spec: TaskSpec, rng: random.Random) -> str:
    _needs(0 < spec.meta.get("n_test", _CHUNKS) < _CHUNKS, f"the test set is not known to have < {_CHUNKS:,} rows")
    return _before_write(script, f"chunk = len(X_test) // {_CHUNKS:_}  # check the test rows in chunks",
                         "start = 0",
                         "while start < len(X_test):",
                         "    batch = X_test.iloc[start:start + chunk]",
                         "    start += chunk")


# ----------------------------------------------------------------------------- submission contents


@_operator("label_codes", INVALID_SUBMISSION, "integer codes are submitted instead of the class labels",
           provable=False)
def _label_codes(script: str, spec: TaskSpec, rng: random.Random) -> str:
    labels = {_as_label(c) for c in spec.classes or ()}
    _needs(_constant(script, "PREDICTION") == "label", "the task is not scored on class labels")
    _needs(not labels & {str(i) for i in range(len(labels))}, "some class labels are integer codes themselves")
    return _edit(script, "X_test = test[X.columns].copy()",
                 before=["y = y.map({c: i for i, c in enumerate(CLASSES)})  # models want numeric targets"])


@_operator("missing_class_columns", INVALID_SUBMISSION, "the last class-probability column is left out",
           provable=True)
def _missing_class_columns(script: str, spec: TaskSpec, rng: random.Random) -> str:
    _needs(_constant(script, "PREDICTION") == "class_probabilities", "the task has no class-probability columns")
    return _replace(script, _find(script, "enumerate(SUBMISSION_COLUMNS)", expression=True),
                    "enumerate(SUBMISSION_COLUMNS[:-1])")


@_operator("nan_predictions", INVALID_SUBMISSION, "predictions are aligned on the ids instead of the rows: NaN",
           provable=False)
def _nan_predictions(script: str, spec: TaskSpec, rng: random.Random) -> str:
    # Test ids are not the row positions 0..n-1, so pandas' alignment leaves rows without a value.
    anchor = ("submission[col] = pred[:, j]" if _constant(script, "PREDICTION") == "class_probabilities"
              else "submission[SUBMISSION_COLUMNS[0]] = pred")
    value = _find(script, anchor).value
    return _replace(script, value, f"pd.Series({_source(script, value)}, index=test[ID])")


@_operator("too_few_rows", INVALID_SUBMISSION, "a head(100) left over from checking the submission", provable=True)
def _too_few_rows(script: str, spec: TaskSpec, rng: random.Random) -> str:
    _needs(spec.meta.get("n_test", 0) > 100, "the test set is not known to have over 100 rows")
    return _before_write(script, "{frame} = {frame}.head(100)  # a quick look")


@_operator("extra_columns", INVALID_SUBMISSION, "the test features are merged into the submission", provable=False)
def _extra_columns(script: str, spec: TaskSpec, rng: random.Random) -> str:
    return _before_write(script, "{frame} = {frame}.merge(test, on=ID)  # keep the features next to the predictions")


#: Every operator's name: the legacy six first.
MUTATIONS: tuple[str, ...] = tuple(OPERATORS)
