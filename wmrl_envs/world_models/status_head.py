"""The surrogate's status head: P(outcome) of a script that no proof settles.

Beside the score head, the surrogate learns how a script ends: ``valid`` or one of the failure
statuses of :mod:`wmrl_envs.outcome`, with the exception class for runtime errors. Its input is
the score head's own features (script, task and interaction features), the outcome features
of :func:`~wmrl_envs.analysis.code_features.outcome_features` (string keys the script reads
that no task file has, in any idiom) and which of the most
frequent token 1- and 2-grams the script holds, which carry what the features summarise away
(a ``predict_proba`` result put in one column, a ``transform`` before any ``fit``, a loop whose
condition never changes). Gradient-boosted trees map them to one label per (status, exception
class) seen often enough in training; the rest pool into ``<status>:other``. The training
scripts come in several idioms (the grammar's and the hand-written styles of
``agents/code/handwritten.py``), so that the head learns outcomes, not one way of writing.

Its probabilities are calibrated by temperature scaling on out-of-fold predictions (grouped by
task), so that P(valid) is a probability one can multiply a score by: the surrogate's reward
estimate is ``P(valid) x`` the predicted valid score.
"""

from __future__ import annotations

import io
import re
import sys
import token
import tokenize
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.feature_extraction.text import CountVectorizer

from wmrl_envs import outcome
from wmrl_envs.errors import ConfigError

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class StatusHeadConfig:
    """How :func:`fit_status_head` builds the head.

    Attributes:
        min_label_rows: A (status, exception) label needs this many training rows; rarer
            exceptions pool into ``<status>:other``.
        max_tokens: Token n-grams kept, the most frequent in training.
        min_token_rows: Training scripts an n-gram must appear in to be kept.
        max_iter: Boosting rounds.
        learning_rate: Boosting step size.
        max_leaf_nodes: Leaves per tree.
        folds: Task-grouped folds of the out-of-fold predictions that fit the temperature.
        seed: Seeds the folds and the trees.
    """

    min_label_rows: int = 5
    max_tokens: int = 2000
    min_token_rows: int = 3
    max_iter: int = 200
    learning_rate: float = 0.1
    max_leaf_nodes: int = 15
    folds: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.min_label_rows < 1 or self.max_tokens < 1 or self.min_token_rows < 1 or self.folds < 2:
            raise ConfigError(f"StatusHeadConfig needs min_label_rows, max_tokens, min_token_rows >= 1 and "
                              f"folds >= 2, got {self}")
        if self.max_iter < 1 or not 0 < self.learning_rate <= 1 or self.max_leaf_nodes < 2:
            raise ConfigError(f"StatusHeadConfig needs max_iter >= 1, learning_rate in (0, 1] and "
                              f"max_leaf_nodes >= 2, got {self}")


def label_of(status: str, exception: str | None) -> str:
    """The training label of an outcome: ``valid``, ``timeout``, ``runtime_error:KeyError``, ..."""
    if status in (outcome.RUNTIME_ERROR, outcome.IMPORT_ERROR, outcome.SYNTAX_ERROR) and exception:
        return f"{status}:{exception}"
    return status


def split_label(label: str) -> tuple[str, str | None]:
    """``(status, exception)`` of a label (exception None for ``...:other`` and plain statuses)."""
    status, _, exception = label.partition(":")
    return status, (exception if exception and exception != "other" else None)


def code_tokens(script: str) -> str:
    """The script as a space-separated stream of its tokens: names, operators and literals.

    Comments and layout are dropped; a string literal keeps its text (paths, column names and
    file names are what many failures are about), cut to 40 characters and without spaces.
    """
    out: list[str] = []
    try:
        for kind, text in _tokens(script):
            if kind in (tokenize.NAME, tokenize.OP, tokenize.NUMBER):
                out.append(text)
            elif kind == tokenize.STRING:
                out.append("S:" + _SPACE.sub("_", text.strip("\"'rbfRBF"))[:40])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the tokens read so far still describe the script
    return " ".join(out)


#: Operator token types as the interpreter's tokenizer reports them (each its exact type).
_EXACT_OPERATORS = frozenset(token.EXACT_TOKEN_TYPES.values())
#: Token types on which the interpreter's tokenizer and ``tokenize`` agree. Not among them: a
#: character no token starts with (generic ``OP`` there, ``ERRORTOKEN`` in ``tokenize``) and
#: ``async``/``await`` (``ASYNC``/``AWAIT`` there, ``NAME`` in ``tokenize``).
_AGREED_TYPES = _EXACT_OPERATORS | {token.NAME, token.NUMBER, token.STRING, token.NEWLINE, token.NL, token.INDENT,
                                    token.DEDENT, token.COMMENT, token.ENDMARKER}
#: Python 3.10-3.11: ``tokenize`` is pure Python, about five times slower than the interpreter's own
#: tokenizer, whose iterator ``tokenize`` itself wraps (privately; 3.12 made it ``tokenize``'s engine).
_C_TOKENS = None
if sys.version_info < (3, 12):
    try:
        from _tokenize import TokenizerIter as _C_TOKENS  # yields (text, type, positions..., line)
    except ImportError:
        pass


def _tokens(script: str) -> Iterable[tuple[int, str]]:
    """``(type, text)`` of each token, as Python 3.10-3.11's ``tokenize.generate_tokens`` reads them
    (an f-string is one ``STRING`` token on every Python: :func:`_python_tokens`).

    The interpreter's tokenizer gives the same tokens faster where it reads the whole script
    and every token is of a type the two agree on (a test compares them on grammar scripts,
    mutants, hand-written scripts and odd ones); otherwise ``tokenize``, which goes on past
    errors, reads it.
    """
    if _C_TOKENS is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "invalid decimal literal" and the like: not ours to say
                tokens = [(kind, text) for text, kind, *_ in _C_TOKENS(script)]
        except Exception:  # any refusal at all: tokenize reads the script instead, errors and all
            tokens = None
        # "<>" is one token there (NOTEQUAL) and two in tokenize.
        if tokens is not None and all(kind in _AGREED_TYPES and text != "<>" for kind, text in tokens):
            return [(tokenize.OP if kind in _EXACT_OPERATORS else kind, text) for kind, text in tokens]
    return _python_tokens(script)


#: Python 3.12 and later tokenize an f-string (3.14 a t-string too) as its parts: a start, the
#: text between replacement fields, each field's own tokens, an end. The head was fitted on the one
#: ``STRING`` token that 3.10-3.11 give an f-string, whose text is the literal's source.
_STRING_STARTS = frozenset(getattr(token, name) for name in ("FSTRING_START", "TSTRING_START") if hasattr(token, name))
_STRING_ENDS = frozenset(getattr(token, name) for name in ("FSTRING_END", "TSTRING_END") if hasattr(token, name))


def _python_tokens(script: str) -> Iterator[tuple[int, str]]:
    """``(type, text)`` of each token by ``tokenize``, lazily: its tokens up to an error count.
    An f-string in parts is one ``STRING`` token of its source text, on every Python."""
    lines = io.StringIO(script).readlines()  # the lines tokenize reads, so its positions index them
    depth, start = 0, (0, 0)
    for t in tokenize.generate_tokens(io.StringIO(script).readline):
        if t.type in _STRING_STARTS:
            depth += 1
            if depth == 1:
                start = t.start
        elif not depth:
            yield t.type, t.string
        elif t.type in _STRING_ENDS:
            depth -= 1
            if not depth:  # an f-string inside a replacement field is part of the outer one's text
                yield tokenize.STRING, _source(lines, start, t.end)


def _source(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The text between two tokenize positions (1-based rows, 0-based columns)."""
    (first, begin), (last, stop) = start, end
    if first == last:
        return lines[first - 1][begin:stop]
    return lines[first - 1][begin:] + "".join(lines[first:last - 1]) + lines[last - 1][:stop]


def _vocabulary(tokens: Sequence[str], config: StatusHeadConfig):
    """The token 1- and 2-grams the head reads, fitted on training scripts."""
    return CountVectorizer(tokenizer=str.split, token_pattern=None, lowercase=False, ngram_range=(1, 2), binary=True,
                           max_features=config.max_tokens, min_df=config.min_token_rows).fit(tokens)


def _design(vocabulary, tokens: Sequence[str], features: np.ndarray) -> np.ndarray:
    """The head's input: which kept n-grams the script has, beside the dense features."""
    return np.hstack([vocabulary.transform(tokens).toarray(), features])


@dataclass
class StatusHead:
    """A fitted status head (see the module docstring)."""

    labels: list[str]
    model: object
    vocabulary: object
    temperature: float
    #: Out-of-fold log loss (temperature applied) on the training rows: held-out tasks never enter it.
    cv_log_loss: float = float("nan")

    def probabilities(self, scripts: Sequence[str], features: np.ndarray) -> np.ndarray:
        """Calibrated P(label) per script, columns in :attr:`labels` order."""
        x = _design(self.vocabulary, [code_tokens(s) for s in scripts], features)
        log_p = np.log(np.clip(self.model.predict_proba(x), 1e-12, 1.0))  # type: ignore[attr-defined]
        return _softmax(log_p / self.temperature)

    def status_probabilities(self, probabilities: np.ndarray) -> dict[str, np.ndarray]:
        """P(status) per script, summed over the labels of each status."""
        out: dict[str, np.ndarray] = {}
        for j, label in enumerate(self.labels):
            status = split_label(label)[0]
            out[status] = out.get(status, 0.0) + probabilities[:, j]
        return out

    def predict(self, scripts: Sequence[str], features: np.ndarray) -> list[tuple[str, str | None, float]]:
        """``(status, exception, P(valid))`` per script: the likeliest status and, within it,
        the likeliest exception class."""
        probabilities = self.probabilities(scripts, features)
        statuses = self.status_probabilities(probabilities)
        names = list(statuses)
        stacked = np.stack([statuses[n] for n in names], axis=1)
        p_valid = statuses.get(outcome.VALID, np.zeros(len(scripts)))
        out = []
        for i in range(len(scripts)):
            status = names[int(np.argmax(stacked[i]))]
            within = [(probabilities[i, j], label) for j, label in enumerate(self.labels)
                      if split_label(label)[0] == status]
            out.append((status, split_label(max(within)[1])[1], float(p_valid[i])))
        return out


def fit_status_head(scripts: Sequence[str], features: np.ndarray, statuses: Sequence[str],
                    exceptions: Sequence[str | None], groups: Sequence[str],
                    config: StatusHeadConfig | None = None) -> StatusHead:
    """Fit the head on executed outcomes of train-split scripts (see the module docstring).

    Args:
        scripts: The scripts.
        features: Their dense feature rows (the score head's features).
        statuses, exceptions: Their executed outcomes.
        groups: Their task ids: the temperature's folds never split a task.
        config: Settings.
    """
    config = config or StatusHeadConfig()
    if not len(scripts) == len(features) == len(statuses) == len(exceptions) == len(groups):
        raise ConfigError("fit_status_head needs one features row, status, exception and group per script")
    raw = [label_of(s, e) for s, e in zip(statuses, exceptions)]
    counts = Counter(raw)
    labels = [r if counts[r] >= config.min_label_rows or ":" not in r else f"{r.split(':')[0]}:other" for r in raw]
    if len(set(labels)) < 2:
        raise ConfigError("the status head needs at least two distinct outcomes to learn from")
    tokens = [code_tokens(s) for s in scripts]
    y = np.array(labels)
    features = np.asarray(features, dtype=float)
    out_of_fold = _out_of_fold_log_p(tokens, features, y, np.asarray(groups), config)
    vocabulary, fitted = _fit(tokens, features, y, config)
    temperature, loss = _fit_temperature(out_of_fold, y, list(fitted.classes_))
    return StatusHead(labels=list(fitted.classes_), model=fitted, vocabulary=vocabulary, temperature=temperature,
                      cv_log_loss=loss)


def _fit(tokens: Sequence[str], features: np.ndarray, y: np.ndarray, config: StatusHeadConfig):
    vocabulary = _vocabulary(tokens, config)
    model = HistGradientBoostingClassifier(max_iter=config.max_iter, learning_rate=config.learning_rate,
                                           max_leaf_nodes=config.max_leaf_nodes, early_stopping=False,
                                           random_state=config.seed)
    return vocabulary, model.fit(_design(vocabulary, tokens, features), y)


def _out_of_fold_log_p(tokens: Sequence[str], features: np.ndarray, y: np.ndarray, groups: np.ndarray,
                       config: StatusHeadConfig) -> np.ndarray:
    """Log-probabilities of every row from a head fitted without its task (columns: labels, sorted)."""
    classes = sorted(set(y))
    names = np.unique(groups)
    fold_of = {n: i % config.folds for i, n in enumerate(np.random.default_rng(config.seed).permutation(names))}
    folds = np.array([fold_of[g] for g in groups])
    log_p = np.full((len(y), len(classes)), np.log(1e-12))
    for k in range(config.folds):
        fit, held = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        if not held.size or len(set(y[fit])) < 2:
            continue
        vocabulary, model = _fit([tokens[i] for i in fit], features[fit], y[fit], config)
        p = model.predict_proba(_design(vocabulary, [tokens[i] for i in held], features[held]))
        for j, c in enumerate(model.classes_):
            log_p[held, classes.index(c)] = np.log(np.clip(p[:, j], 1e-12, 1.0))
    return log_p


def _fit_temperature(log_p: np.ndarray, y: np.ndarray, classes: list[str]) -> tuple[float, float]:
    """The temperature that minimises the out-of-fold log loss (a one-parameter grid search),
    and that loss."""
    index = np.array([classes.index(v) for v in y])
    best, best_loss = 1.0, np.inf
    for t in np.exp(np.linspace(np.log(0.25), np.log(8.0), 61)):
        p = _softmax(log_p / t)
        loss = -np.mean(np.log(np.clip(p[np.arange(len(y)), index], 1e-12, 1.0)))
        if loss < best_loss:
            best, best_loss = float(t), float(loss)
    return best, best_loss


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
