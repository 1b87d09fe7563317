"""The LLM world model: a prompted causal LM reads the task and a script and predicts its score.

The prompt (``assets/prompts/world_model_score.md``) shows the task's description, metric, type
and data facts plus the script, and asks for a final ``SCORE: <number>`` line. The answer is
parsed by :func:`parse_score`; an answer without a readable score becomes a prediction with
``parsed=False`` and ``score=nan``, never a silent 0.

Uncertainty (a standard deviation in score units) comes from the log-probabilities of the tokens
that spell the score (see :func:`score_std_from_logprobs`), so it costs no extra generation. An
answer that gives a range ("0.6-0.8") has its half-width as uncertainty instead; without either,
the uncertainty is ``nan``.
"""

from __future__ import annotations

import math
import re
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError, WMRLError
from wmrl_envs.grading.metrics import UnknownMetricError, get_metric
from wmrl_envs.llm.backends import (
    ChatBackend,
    ChatOutcome,
    ContextLengthError,
    TokenLogprob,
    make_backend,
)
from wmrl_envs.paths import assets_dir
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.base import Prediction

DEFAULT_TEMPLATE = "world_model_score.md"

# What the score means, by suite; it tells the model the scale it must answer on.
SCORE_MEANINGS: Mapping[str, str] = {
    "mle": (
        "the position score on the competition leaderboard, in [0, 1]: the fraction of leaderboard "
        "entries the submission ties or beats (1 = first place, 0 = last)"
    ),
    "dsbench": (
        "the relative performance gap (RPG), in [0, 1]: how much of the distance from a simple "
        "baseline to the best known solution the submission covers (0 = baseline or worse, 1 = best)"
    ),
}
DEFAULT_SCORE_MEANING = "in [0, 1], higher is better (1 = the best achievable result)"

# Scripts and descriptions are cut to fit the context window. Three characters per token is
# conservative for code and English with the BPE vocabularies of current small LMs.
CHARS_PER_TOKEN = 3.0
# Retries with a halved budget after the model rejects a prompt as too long.
MAX_SHRINKS = 3


class ScoreParseError(WMRLError, ValueError):
    """An LLM answer holds no readable score."""


# --------------------------------------------------------------------------- parsing

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
# What may follow the number: a percent sign, a denominator ("7/10", "7 out of 10") or the end
# of a range ("0.6-0.7", "60 to 70%").
# Only spaces and tabs may separate them: a list item on the next line is not a range.
_SUFFIX = (
    r"(?:[ \t]*(?P<pct>%|percent\b)"
    r"|[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<den>\d+(?:\.\d+)?)"
    r"|[ \t]*(?:-|–|to\b)[ \t]*(?P<hi>\d+(?:\.\d*)?|\.\d+)[ \t]*(?P<hipct>%)?)?"
)
_MARKUP = r"[\s*_`#>]*"
# "SCORE: 0.73" on its own line (markdown emphasis and a missing colon tolerated).
_SCORE_LINE = re.compile(
    rf"^{_MARKUP}(?:predicted\s+|final\s+|estimated\s+)?score{_MARKUP}[:=]?{_MARKUP}(?P<num>{_NUM}){_SUFFIX}",
    re.IGNORECASE | re.MULTILINE,
)
# "... the score is about 0.7" inside prose: a connecting word is required, so an echoed
# instruction such as "score in [0, 1]" does not count.
_SCORE_PROSE = re.compile(
    rf"\bscore\b{_MARKUP}(?:[:=≈~]|\bis\b|\bof\b|\bwould\s+be\b|\bwill\s+be\b)"
    rf"{_MARKUP}(?:about|around|approximately|roughly|~)?\s*(?P<num>{_NUM}){_SUFFIX}",
    re.IGNORECASE,
)
# An answer (or its last line) that is nothing but a number: "0.73", "73%", "**0.7**".
_BARE = re.compile(rf"^{_MARKUP}(?P<num>{_NUM}){_SUFFIX}{_MARKUP}\.?{_MARKUP}$")


@dataclass(frozen=True)
class ParsedScore:
    """A score read from an answer.

    Attributes:
        value: The score, clamped to [0, 1].
        start, end: Character span of the (first) number in the answer.
        scale: Factor that turns that number into the score (1, 0.01 for percentages, 1/den).
        spread: Half-width of the range the answer gave ("0.6-0.8"), else None.
    """

    value: float
    start: int
    end: int
    scale: float
    spread: float | None = None


def _clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


def _interpret(match: re.Match[str], offset: int = 0) -> ParsedScore:
    """Turn a regex match of number plus suffix into a score.

    A number in [0, 1] is a fraction; one in (1, 100] without a unit is read as a percentage
    (models often answer on a 0-100 scale); anything else is clamped into [0, 1].
    """
    num = float(match["num"])
    if match["den"] is not None:
        den = float(match["den"])
        if den <= 0:
            raise ScoreParseError(f"score {match.group(0)!r} divides by {match['den']}")
        scale = 1.0 / den
    elif match["pct"] is not None or match["hipct"] is not None or 1.0 < num <= 100.0:
        scale = 0.01
    else:
        scale = 1.0
    start, end = match.start("num") + offset, match.end("num") + offset
    if match["hi"] is not None:
        lo, hi = _clamp01(num * scale), _clamp01(float(match["hi"]) * scale)
        return ParsedScore((lo + hi) / 2, start, end, scale, spread=abs(hi - lo) / 2)
    return ParsedScore(_clamp01(num * scale), start, end, scale)


def parse_score(text: str) -> ParsedScore:
    """Read the predicted score from an LLM answer.

    Tried in order: the last ``SCORE: x`` line; the last "score is x" phrase; an answer whose
    last non-empty line is a bare number. Raises :class:`ScoreParseError` if none applies.
    """
    for pattern in (_SCORE_LINE, _SCORE_PROSE):
        matches = list(pattern.finditer(text))
        if matches:
            return _interpret(matches[-1])
    lines = text.rstrip().splitlines()
    if lines:
        last = lines[-1]
        match = _BARE.match(last)
        if match:
            return _interpret(match, offset=len(text.rstrip()) - len(last))
    preview = " ".join(text.split())[:120]
    raise ScoreParseError(f"no score in the answer: {preview!r}" if preview else "empty answer")


# --------------------------------------------------------------------------- uncertainty

_DIGITS = re.compile(r"[0-9]+")


def score_std_from_logprobs(text: str, parsed: ParsedScore, tokens: Sequence[TokenLogprob]) -> float | None:
    """Standard deviation of the score implied by the model's own doubt about each digit.

    For every token that spells digits of the score, the top alternatives that are digit
    strings of the same length are the values the model considered there. Swapping the token
    for each of them (and keeping the other digits) gives a distribution over scores; its
    variance is summed over digit positions (treated as independent). The result is capped at
    0.5, the largest standard deviation a score in [0, 1] can have.

    Returns None when the tokens cannot be aligned with the text.
    """
    pieces = [t.raw if t.raw is not None else t.token.encode() for t in tokens]
    if b"".join(pieces) != text.encode():
        return None
    literal = text[parsed.start:parsed.end].lstrip("+-")
    begin = len(text[: parsed.end - len(literal)].encode())  # byte offset of the first digit
    finish = len(text[: parsed.end].encode())
    point = literal.find(".") if "." in literal else len(literal)
    literal_value = float(literal)
    variance = 0.0
    pos = 0
    for token, piece in zip(tokens, pieces, strict=True):
        tok_start, pos = pos, pos + len(piece)
        chosen = piece.decode("ascii", "replace")
        if tok_start < begin or pos > finish or not _DIGITS.fullmatch(chosen):
            continue  # only tokens made of the score's digits carry its value
        last = tok_start - begin + len(chosen) - 1  # index of the token's last digit in the literal
        place = 10.0 ** (point - last - 1 if last < point else point - last)
        options = {alt: lp for alt, lp in token.top if _DIGITS.fullmatch(alt) and len(alt) == len(chosen)}
        options.setdefault(chosen, token.logprob)
        peak = max(options.values())
        weights = {alt: math.exp(lp - peak) for alt, lp in options.items()}
        total = sum(weights.values())
        values = {
            alt: _clamp01((literal_value + (int(alt) - int(chosen)) * place) * parsed.scale) for alt in options
        }
        mean = sum(weights[a] * values[a] for a in options) / total
        variance += sum(weights[a] * (values[a] - mean) ** 2 for a in options) / total
    return min(0.5, math.sqrt(variance))


# --------------------------------------------------------------------------- prompt

_ROLE_MARK = re.compile(r"<!--\s*role:\s*(system|user|assistant)\s*-->")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class PromptTemplate:
    """Chat messages with ``${placeholders}``, read from a markdown file.

    Each ``<!-- role: system|user|assistant -->`` comment starts a message; other HTML
    comments are notes for maintainers and are dropped.
    """

    messages: tuple[tuple[str, string.Template], ...]

    @classmethod
    def load(cls, path: str | Path | None = None) -> PromptTemplate:
        """Load a template (default: ``assets/prompts/world_model_score.md``)."""
        file = Path(path) if path is not None else assets_dir() / "prompts" / DEFAULT_TEMPLATE
        try:
            raw = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read prompt template {file}: {exc}") from exc
        parts = _ROLE_MARK.split(raw)
        # split() yields [preamble, role, text, role, text, ...]
        messages = tuple(
            (role, string.Template(_COMMENT.sub("", body).strip()))
            for role, body in zip(parts[1::2], parts[2::2], strict=True)
        )
        if not messages:
            raise ConfigError(f"prompt template {file} has no '<!-- role: ... -->' sections")
        return cls(messages)

    def render(self, fields: Mapping[str, str]) -> list[dict[str, str]]:
        """Fill the placeholders; a placeholder without a value raises ConfigError."""
        try:
            return [{"role": role, "content": tmpl.substitute(fields)} for role, tmpl in self.messages]
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"prompt template placeholder problem: {exc}") from exc


def truncate_middle(text: str, max_chars: int) -> str:
    """Cut ``text`` to about ``max_chars`` by dropping its middle, where scripts hold least signal.

    The head (imports, data loading) and tail (model fit, submission writing) are kept, and a
    marker says how much was dropped, so the model knows the text is incomplete.
    """
    if len(text) <= max_chars:
        return text
    marker = "\n# ... [{} characters omitted] ...\n"
    keep = max(0, max_chars - len(marker.format(len(text))))
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker.format(len(text) - keep) + text[len(text) - tail:]


def truncate_end(text: str, max_chars: int) -> str:
    """Cut ``text`` to about ``max_chars`` from the end (task descriptions lead with the essentials)."""
    if len(text) <= max_chars:
        return text
    marker = "\n[... {} characters omitted]"
    keep = max(0, max_chars - len(marker.format(len(text))))
    return text[:keep] + marker.format(len(text) - keep)


def _metric_info(name: str) -> str:
    try:
        metric = get_metric(name)
    except UnknownMetricError:
        return "direction unknown"
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    return f"{metric.description}; {direction}" if metric.description else direction


def _format_meta(meta: Mapping[str, Any]) -> str:
    scalars = [f"{k}={v}" for k, v in meta.items() if isinstance(v, (str, int, float, bool))]
    return ", ".join(scalars) if scalars else "not given"


# --------------------------------------------------------------------------- world model


class LLMWorldModel:
    """Predicts a script's score by asking a chat LM (see the module docstring).

    Args:
        backend: The chat model (:mod:`wmrl_envs.llm.backends`).
        template: Prompt template; default ``assets/prompts/world_model_score.md``.
        context_tokens: Context window the prompt must fit, with room for the answer; default
            the backend's, else 4096.
        description_share: Largest fraction of the free prompt budget given to the description
            when both it and the script are too long.
    """

    name = "llm"

    def __init__(
        self,
        backend: ChatBackend,
        template: PromptTemplate | None = None,
        context_tokens: int | None = None,
        description_share: float = 0.3,
    ) -> None:
        self.backend = backend
        self.template = template or PromptTemplate.load()
        self.context_tokens = context_tokens or backend.context_tokens or 4096
        self.description_share = description_share

    @classmethod
    def from_options(
        cls,
        backend: str | ChatBackend = "llamacpp",
        backend_options: Mapping[str, Any] | None = None,
        template_path: str | Path | None = None,
        **kwargs: Any,
    ) -> LLMWorldModel:
        """Build from plain options (as in a config file), e.g.
        ``from_options(backend="openai", backend_options={"base_url": "http://127.0.0.1:8000"})``.
        """
        chat = backend if isinstance(backend, ChatBackend) else make_backend(backend, **(backend_options or {}))
        return cls(chat, template=PromptTemplate.load(template_path), **kwargs)

    def render(self, task: Task, script: str, shrink: float = 1.0, template: PromptTemplate | None = None,
               extra: Mapping[str, str] | None = None) -> list[dict[str, str]]:
        """The chat messages for one ``(task, script)``, truncated to fit the context window.

        ``shrink`` scales the character budget of description and script, for a retry after
        the model rejected a prompt as too long. ``template`` replaces the model's own, with
        ``extra`` placeholders of its own.
        """
        spec = task.spec
        template = template or self.template
        fields = {**(extra or {}),
            "task_name": spec.name,
            "task_type": spec.task_type,
            "metric": spec.metric,
            "metric_info": _metric_info(spec.metric),
            "score_meaning": SCORE_MEANINGS.get(spec.suite, DEFAULT_SCORE_MEANING),
            "meta": _format_meta(spec.meta),
        }
        frame = template.render({**fields, "description": "", "script": ""})
        frame_chars = sum(len(m["content"]) for m in frame)
        budget = int((self.context_tokens - self.backend.max_tokens) * CHARS_PER_TOKEN) - frame_chars
        # Chat templates add a few tokens per message; keep a margin for them.
        budget = max(0, int((budget - 64 * len(frame)) * shrink))
        description = task.description.strip()
        script = script.strip()
        # The script gets what the description leaves, and vice versa, within the budget.
        desc_chars = min(len(description), max(int(budget * self.description_share), budget - len(script)))
        script_chars = budget - desc_chars
        fields["description"] = truncate_end(description, desc_chars)
        fields["script"] = truncate_middle(script, script_chars)
        return template.render(fields)

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        """One prediction per ``(tasks[i], scripts[i])``; failures become ``parsed=False`` predictions.

        A prompt the model rejects as too long (the characters-per-token estimate was off, e.g.
        for digit-heavy code) is re-sent with half the text budget, up to ``MAX_SHRINKS`` times.
        ``cost_s`` is each prediction's share of the wall-clock time of the calls it needed.
        """
        if len(tasks) != len(scripts):
            raise ValueError(f"got {len(tasks)} tasks but {len(scripts)} scripts")
        outcomes, spent = self.complete(tasks, scripts)
        return [self._prediction(outcome, cost) for outcome, cost in zip(outcomes, spent)]

    def complete(self, tasks: Sequence[Task], scripts: Sequence[str], template: PromptTemplate | None = None,
                 extras: Sequence[Mapping[str, str]] | None = None) -> tuple[list[ChatOutcome], list[float]]:
        """The model's answer to each ``(task, script)`` prompt and the seconds it cost (see
        :meth:`predict`); ``template`` and per-item ``extras`` as in :meth:`render`."""
        outcomes: dict[int, ChatOutcome] = {}
        spent = [0.0] * len(tasks)
        pending = list(range(len(tasks)))
        shrink = 1.0
        for _ in range(MAX_SHRINKS + 1):
            start = time.perf_counter()
            batch = self.backend.complete_many([
                self.render(tasks[i], scripts[i], shrink, template, extras[i] if extras else None) for i in pending])
            wall = time.perf_counter() - start
            # Concurrent requests overlap, so their latencies add up to more than the time spent;
            # each item is charged its latency's share of the batch's wall-clock time.
            total_latency = sum(outcome.latency_s for outcome in batch) or 1.0
            for i, outcome in zip(pending, batch, strict=True):
                outcomes[i] = outcome
                spent[i] += wall * outcome.latency_s / total_latency
            pending = [i for i in pending if isinstance(outcomes[i].error, ContextLengthError)]
            if not pending:
                break
            shrink /= 2
        return [outcomes[i] for i in range(len(tasks))], spent

    def _prediction(self, outcome: ChatOutcome, cost_s: float) -> Prediction:
        if outcome.completion is None:
            return Prediction.failed(f"backend error: {outcome.error}", cost_s)
        text = outcome.completion.text
        try:
            parsed = parse_score(text)
        except ScoreParseError as exc:
            return Prediction.failed(str(exc), cost_s)
        return Prediction(parsed.value, self._uncertainty(text, parsed, outcome.completion.logprobs), cost_s=cost_s)

    @staticmethod
    def _uncertainty(text: str, parsed: ParsedScore, logprobs: Sequence[TokenLogprob] | None) -> float:
        if parsed.spread is not None:  # the model answered with a range: its half-width
            return parsed.spread
        std = score_std_from_logprobs(text, parsed, logprobs) if logprobs else None
        return math.nan if std is None else std

    def close(self) -> None:
        """Release the backend's model."""
        self.backend.close()
