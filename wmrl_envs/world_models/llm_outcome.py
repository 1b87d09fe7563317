"""The LLM world model, asked how a script ends: the paper's outcome prompts, as a baseline.

Two styles, both on any chat backend of :mod:`wmrl_envs.llm.backends`:

* ``holistic`` (``assets/prompts/world_model_outcome.md``): one answer gives the status, the
  exception class and the score;
* ``decomposed`` (``assets/prompts/world_model_aspect.md``): the deterministic gate first
  (``compile()``), then one question per aspect in the order a run meets them (imports, data
  files and columns, the rest of the run, the submission's format); the first aspect judged to
  fail decides the status, and only a script judged sound is asked for a score
  (``world_model_score.md``).

The answers are verdicts, not probabilities: P(valid) is 1 or 0. A failure's score is 0. An
answer without a readable status is not an outcome: the prediction has ``parsed=False``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from wmrl_envs import outcome
from wmrl_envs.errors import ConfigError
from wmrl_envs.llm.backends import ChatOutcome
from wmrl_envs.paths import assets_dir
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.base import Prediction
from wmrl_envs.world_models.llm import LLMWorldModel, PromptTemplate, ScoreParseError, parse_score

STYLES = ("holistic", "decomposed")
HOLISTIC_TEMPLATE = "world_model_outcome.md"
ASPECT_TEMPLATE = "world_model_aspect.md"

#: (answer label, question, status when it fails, exception when the answer names none).
ASPECTS: tuple[tuple[str, str, str, str | None], ...] = (
    ("IMPORTS", "Does every import exist in that environment?", outcome.IMPORT_ERROR, "ModuleNotFoundError"),
    ("DATA", "Does the script read only files that exist under data/, and only columns those files have?",
     outcome.RUNTIME_ERROR, "KeyError"),
    ("RUN", "Will the rest of the script run to its end without raising an exception?", outcome.RUNTIME_ERROR, None),
    ("SUBMISSION", "Does it write submission.csv with exactly the sample submission's columns and rows?",
     outcome.INVALID_SUBMISSION, None),
)
_SYNONYMS = {"ok": outcome.VALID, "success": outcome.VALID, "valid": outcome.VALID, "error": outcome.RUNTIME_ERROR,
             "crash": outcome.RUNTIME_ERROR, "exception": outcome.RUNTIME_ERROR}
_STATUS_LINE = re.compile(r"^[\s*_`#>]*status[\s*_`]*[:=]\s*[`*]*(?P<status>[A-Za-z_ ]+)", re.I | re.M)
_EXCEPTION_LINE = re.compile(r"^[\s*_`#>]*exception[\s*_`]*[:=]\s*[`*]*(?P<cls>[A-Za-z_][\w.]*)", re.I | re.M)


def parse_status(text: str) -> str | None:
    """The status an answer names (``STATUS: runtime_error``), or None."""
    match = _STATUS_LINE.search(text)
    if match is None:
        return None
    word = match.group("status").strip().lower().replace(" ", "_")
    return word if word in outcome.STATUSES else _SYNONYMS.get(word)


def parse_exception(text: str) -> str | None:
    """The exception class an answer names (``EXCEPTION: KeyError``); None for ``none``."""
    match = _EXCEPTION_LINE.search(text)
    name = match.group("cls").rsplit(".", 1)[-1] if match else None
    return None if name is None or name.lower() in ("none", "null", "no", "n") else name


def parse_verdict(text: str, label: str) -> tuple[bool, str | None] | None:
    """``(fails, exception)`` from ``<LABEL>: ok`` / ``fail`` / ``<ExceptionClass>``; None when unreadable."""
    match = re.search(rf"{label}\s*[:=]\s*[`*]*(?P<word>[A-Za-z_][\w.]*)", text, re.I)
    if match is None:
        return None
    word = match.group("word")
    if word.lower() in ("ok", "yes", "pass", "fine", "valid"):
        return False, None
    if word.lower() in ("fail", "fails", "no", "error"):
        return True, None
    return True, word.rsplit(".", 1)[-1]


class LLMOutcomeWorldModel:
    """An LLM world model that predicts the outcome (see the module docstring).

    Args:
        model: The score world model whose backend and prompt machinery it uses.
        style: ``"holistic"`` or ``"decomposed"``.
    """

    name = "llm_outcome"

    def __init__(self, model: LLMWorldModel, style: str = "holistic") -> None:
        if style not in STYLES:
            raise ConfigError(f"style must be one of {STYLES}, got {style!r}")
        self.model = model
        self.style = style
        self.holistic = PromptTemplate.load(assets_dir() / "prompts" / HOLISTIC_TEMPLATE)
        self.aspect = PromptTemplate.load(assets_dir() / "prompts" / ASPECT_TEMPLATE)

    @classmethod
    def from_options(cls, style: str = "holistic", backend: str = "llamacpp",
                     backend_options: Mapping[str, Any] | None = None, **kwargs: Any) -> LLMOutcomeWorldModel:
        """Build from plain options, e.g. ``from_options("decomposed", "llamacpp", {"n_threads": 2})``."""
        return cls(LLMWorldModel.from_options(backend, backend_options, **kwargs), style)

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        """One outcome per ``(tasks[i], scripts[i])``."""
        if len(tasks) != len(scripts):
            raise ConfigError(f"predict got {len(tasks)} tasks for {len(scripts)} scripts")
        if self.style == "holistic":
            answers, spent = self.model.complete(tasks, scripts, self.holistic)
            return [self._holistic(a, c) for a, c in zip(answers, spent)]
        return self._decomposed(tasks, scripts)

    def close(self) -> None:
        self.model.close()

    # ------------------------------------------------------------------ styles
    @staticmethod
    def _holistic(answer: ChatOutcome, cost_s: float) -> Prediction:
        if answer.completion is None:
            return Prediction.failed(f"backend error: {answer.error}", cost_s)
        text = answer.completion.text
        status = parse_status(text)
        if status is None:
            return Prediction.failed(f"no STATUS line in the answer: {text[:200]!r}", cost_s)
        if status != outcome.VALID:
            exception = parse_exception(text)
            return Prediction(0.0, float("nan"), cost_s=cost_s, status=status, exception=exception,
                              message=f"{exception or status} (predicted)", p_valid=0.0)
        try:
            score = parse_score(text).value
        except ScoreParseError as exc:
            return Prediction.failed(str(exc), cost_s)
        return Prediction(score, float("nan"), cost_s=cost_s, status=status, p_valid=1.0)

    def _decomposed(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        out: list[Prediction | None] = [None] * len(scripts)
        cost = [0.0] * len(scripts)
        open_items = []
        for i, script in enumerate(scripts):
            gate = _compile_gate(script)
            if gate is None:
                open_items.append(i)
            else:
                out[i] = Prediction(0.0, 0.0, status=outcome.SYNTAX_ERROR, exception=gate, p_valid=0.0,
                                    message=f"{gate} (compile)")
        for label, question, status, default_exception in ASPECTS:
            if not open_items:
                break
            extras = [{"question": question, "answer": label}] * len(open_items)
            answers, spent = self.model.complete([tasks[i] for i in open_items], [scripts[i] for i in open_items],
                                                 self.aspect, extras)
            still_open = []
            for i, answer, seconds in zip(open_items, answers, spent):
                cost[i] += seconds
                verdict = parse_verdict(answer.completion.text, label) if answer.completion else None
                if verdict is None:
                    out[i] = Prediction.failed(f"no {label} verdict in the answer", cost[i])
                elif verdict[0]:
                    exception = verdict[1] or default_exception
                    out[i] = Prediction(0.0, float("nan"), cost_s=cost[i], status=status, exception=exception,
                                        message=f"{exception or status} (predicted: {label.lower()})", p_valid=0.0)
                else:
                    still_open.append(i)
            open_items = still_open
        if open_items:
            scored = self.model.predict([tasks[i] for i in open_items], [scripts[i] for i in open_items])
            for i, prediction in zip(open_items, scored):
                cost[i] += prediction.cost_s
                out[i] = prediction if not prediction.parsed else Prediction(
                    prediction.score, prediction.uncertainty, cost_s=cost[i], p_valid=1.0)
        return [replace(p, cost_s=max(p.cost_s, cost[i])) for i, p in enumerate(out)]  # type: ignore[arg-type]


def _compile_gate(script: str) -> str | None:
    """The paper's deterministic gate: the class of the error ``compile()`` raises, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(script, "solution.py", "exec")
    except SyntaxError as exc:
        return type(exc).__name__
    except ValueError:
        return "SyntaxError"
    return None
