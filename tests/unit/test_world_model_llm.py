"""Unit tests of the LLM world model: score parsing, uncertainty, prompts, the OpenAI backend.

The OpenAI backend is exercised against a real HTTP server on 127.0.0.1 (stdlib ``http.server``)
that returns canned OpenAI-format replies, HTTP errors and slow answers.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from wmrl_envs.errors import ConfigError
from wmrl_envs.llm.backends import (
    ContextLengthError,
    LLMBackendError,
    OpenAIChatBackend,
    TokenLogprob,
    TransformersBackend,
    parse_chat_response,
)
from wmrl_envs.task_spec import Task, TaskSpec
from wmrl_envs.world_models import Prediction, WorldModel, make_world_model
from wmrl_envs.world_models import base as wm_base
from wmrl_envs.world_models.llm import (
    LLMWorldModel,
    PromptTemplate,
    ScoreParseError,
    parse_score,
    score_std_from_logprobs,
    truncate_end,
    truncate_middle,
)

# --------------------------------------------------------------------------- fixtures


@pytest.fixture()
def task(tmp_path: Path) -> Task:
    description = tmp_path / "description.txt"
    description.write_text("Predict customer churn from tabular features. Scored by ROC AUC.", encoding="utf-8")
    spec = TaskSpec(
        id="churn", name="Bank churn", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
        metric="roc_auc", task_type="binary", meta={"n_train_rows": 8000, "n_features": 10},
    )
    return Task(spec=spec, root=tmp_path, description_path=description, public_dir=tmp_path,
                answers_path=tmp_path / "answers.csv")


SCRIPT = (
    "import pandas as pd\n"
    'pd.read_csv("test.csv")[["id"]].assign(target=0.5).to_csv("submission.csv", index=False)\n'
)


def _chat_payload(text: str, logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"object": "chat.completion", "choices": [choice]}


class _CannedHandler(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions; the request's ``model`` field picks the behaviour."""

    server: _CannedServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (the timeout test)

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = request["messages"][-1]["content"]
        with self.server.lock:
            self.server.requests.append({"body": request, "headers": dict(self.headers)})
        behaviour = request["model"]
        if behaviour == "score":
            self._send(200, json.dumps(_chat_payload("Looks solid.\nSCORE: 0.8")).encode())
        elif behaviour == "echo":
            # The score is written in the script as "# expect 0.xx": lets batch order be checked.
            expected = prompt.split("# expect ")[1].split()[0]
            self._send(200, json.dumps(_chat_payload(f"SCORE: {expected}")).encode())
        elif behaviour == "logprobs":
            tokens = [("SCORE", []), (":", []), (" ", []), ("0", []), (".", []),
                      ("8", [("8", math.log(0.5)), ("7", math.log(0.25)), ("9", math.log(0.25))])]
            logprobs = [
                {"token": tok, "logprob": top[0][1] if top else 0.0, "bytes": list(tok.encode()),
                 "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top] or [{"token": tok, "logprob": 0.0}]}
                for tok, top in tokens
            ]
            self._send(200, json.dumps(_chat_payload("SCORE: 0.8", logprobs)).encode())
        elif behaviour == "outcome":
            # A reviewer that knows one thing: lightgbm is not installed.
            broken = "lightgbm" in prompt
            if "Answer with " in prompt:
                label = prompt.rsplit("Answer with ", 1)[1].split(".")[0]
                text = f"{label}: ModuleNotFoundError" if broken and label == "IMPORTS" else f"{label}: ok"
            elif "STATUS:" in request["messages"][0]["content"]:
                text = ("STATUS: import_error\nEXCEPTION: ModuleNotFoundError\nSCORE: 0" if broken
                        else "STATUS: valid\nEXCEPTION: none\nSCORE: 0.6")
            else:
                text = "SCORE: 0.6"
            self._send(200, json.dumps(_chat_payload(text)).encode())
        elif behaviour == "garbage":
            self._send(200, json.dumps(_chat_payload("I am not sure what this script does.")).encode())
        elif behaviour == "http500":
            self._send(500, b'{"error": {"message": "internal failure"}}')
        elif behaviour == "notjson":
            self._send(200, b"<html>proxy error</html>", "text/html")
        elif behaviour == "nochoices":
            self._send(200, b'{"object": "chat.completion", "choices": []}')
        elif behaviour == "slow":
            time.sleep(2.0)
            self._send(200, json.dumps(_chat_payload("SCORE: 0.5")).encode())
        elif behaviour.startswith("context"):
            # llama.cpp's reply to a prompt longer than the model's context (here: N characters).
            limit = int(behaviour.split(":")[1])
            if len(prompt) > limit:
                message = f"request ({len(prompt)} tokens) exceeds the available context size ({limit} tokens)"
                error = {"code": 400, "type": "exceed_context_size_error", "message": message}
                self._send(400, json.dumps({"error": error}).encode())
            else:
                self._send(200, json.dumps(_chat_payload("SCORE: 0.3")).encode())
        else:
            self._send(400, b'{"error": {"message": "unknown model"}}')


class _CannedServer(ThreadingHTTPServer):
    daemon_threads = True  # a slow handler must not block shutdown

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CannedHandler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()


@pytest.fixture()
def canned() -> Iterator[_CannedServer]:
    server = _CannedServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _url(server: _CannedServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _world_model(server: _CannedServer, behaviour: str, **options: Any) -> LLMWorldModel:
    return LLMWorldModel(OpenAIChatBackend(_url(server), model=behaviour, **options))


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("SCORE: 0.73", 0.73),
        ("score:0.5", 0.5),
        ("The script trains a forest.\nSCORE: 0.61\n", 0.61),
        ("SCORE: 0.2\nOn reflection the CV is solid.\nSCORE: 0.6", 0.6),  # the last SCORE line wins
        ("**SCORE:** 0.8", 0.8),
        ("## Score\n0.45", 0.45),
        ("Final score = 0.9", 0.9),
        ("SCORE: .35", 0.35),
        ("SCORE: 1", 1.0),
        ("SCORE: 0", 0.0),
        ("SCORE: 73%", 0.73),
        ("SCORE: 73 percent", 0.73),
        ("SCORE: 85", 0.85),  # a number in (1, 100] without a unit is a percentage
        ("SCORE: 7/10", 0.7),
        ("SCORE: 3 out of 4", 0.75),
        ("SCORE: 150", 1.0),  # clamped
        ("SCORE: -0.2", 0.0),  # clamped
        ("SCORE: 0.6-0.8", 0.7),  # a range gives its midpoint
        ("SCORE: 60 to 80%", 0.7),
        ("SCORE: 0.7\n- uses 5-fold CV", 0.7),  # a list item on the next line is not a range
        ("I think the predicted score is about 0.66.", 0.66),
        ("This is a good script. The score is 100%!", 1.0),
        ("0.42", 0.42),
        ("  **0.9**  ", 0.9),
        ("Hard to say.\n65%", 0.65),
    ],
)
def test_parse_score_reads_many_answer_shapes(answer: str, expected: float) -> None:
    assert parse_score(answer).value == pytest.approx(expected)


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   \n ",
        "I cannot judge this script.",
        "SCORE: high",
        "SCORE: <number between 0 and 1>",
        "The score in [0, 1] depends on the leaderboard.",  # an echoed instruction is no answer
        "It trains with 5 folds and 300 trees.",  # numbers in prose are not scores
        "SCORE: 3/0",
    ],
)
def test_parse_score_rejects_answers_without_a_score(answer: str) -> None:
    with pytest.raises(ScoreParseError):
        parse_score(answer)


def test_parse_score_reports_the_number_span_and_scale() -> None:
    text = "Reasoning.\nSCORE: 45%"
    parsed = parse_score(text)
    assert text[parsed.start:parsed.end] == "45"
    assert parsed.scale == pytest.approx(0.01)
    assert parse_score("SCORE: 0.6-0.8").spread == pytest.approx(0.1)


# --------------------------------------------------------------------------- uncertainty


def _tokens(*pieces: tuple[str, list[tuple[str, float]]]) -> list[TokenLogprob]:
    return [TokenLogprob(tok, top[0][1] if top else 0.0, tuple(top) or ((tok, 0.0),)) for tok, top in pieces]


def test_uncertainty_is_zero_when_every_digit_is_certain() -> None:
    text = "SCORE: 0.8"
    tokens = _tokens(("SCORE", []), (":", []), (" ", []), ("0", []), (".", []), ("8", []))
    assert score_std_from_logprobs(text, parse_score(text), tokens) == pytest.approx(0.0)


def test_uncertainty_is_the_std_over_digit_alternatives() -> None:
    text = "SCORE: 0.8"
    tenths = [("8", math.log(0.5)), ("7", math.log(0.25)), ("9", math.log(0.25)), ("\n", math.log(0.1))]
    tokens = _tokens(("SCORE: ", []), ("0", []), (".", []), ("8", tenths))
    # Scores 0.8, 0.7, 0.9 with weights 0.5, 0.25, 0.25 (the newline is no digit): std sqrt(0.005).
    assert score_std_from_logprobs(text, parse_score(text), tokens) == pytest.approx(math.sqrt(0.005))


def test_uncertainty_of_a_percentage_uses_its_scale() -> None:
    text = "SCORE: 80%"
    tokens = _tokens(("SCORE: ", []), ("8", [("8", math.log(0.5)), ("7", math.log(0.5))]), ("0", []), ("%", []))
    assert score_std_from_logprobs(text, parse_score(text), tokens) == pytest.approx(0.05)


def test_uncertainty_is_none_when_tokens_do_not_spell_the_text() -> None:
    text = "SCORE: 0.8"
    tokens = _tokens(("SCORE:", []), ("0.9", []))
    assert score_std_from_logprobs(text, parse_score(text), tokens) is None


def test_uncertainty_is_capped_at_half() -> None:
    text = "SCORE: 0.0"
    ones = [("0", math.log(0.5)), ("1", math.log(0.5))]  # 0.0 or 1.0: variance 0.25
    tenths = [("0", math.log(0.5)), ("9", math.log(0.5))]  # 0.0 or 0.9: variance 0.2025
    tokens = _tokens(("SCORE: ", []), ("0", ones), (".", []), ("0", tenths))
    assert score_std_from_logprobs(text, parse_score(text), tokens) == 0.5


# --------------------------------------------------------------------------- prompt


def test_prompt_holds_task_metric_and_script(task: Task) -> None:
    wm = LLMWorldModel(OpenAIChatBackend("http://127.0.0.1:9"))
    messages = wm.render(task, SCRIPT)
    assert messages[0]["role"] == "system"
    assert messages[-1]["role"] == "user"
    prompt = messages[-1]["content"]
    assert "roc_auc" in prompt and "higher is better" in prompt
    assert "binary" in prompt and "Bank churn" in prompt and "n_train_rows=8000" in prompt
    assert "leaderboard" in prompt  # what an MLE score means
    assert task.description.strip() in prompt
    assert SCRIPT.strip() in prompt
    assert "${" not in prompt


def test_prompt_truncates_long_scripts_to_the_context(task: Task) -> None:
    head, tail = "import numpy as np  # HEAD\n", "df.to_csv('submission.csv')  # TAIL\n"
    script = head + "x = 1\n" * 5000 + tail
    backend = OpenAIChatBackend("http://127.0.0.1:9", max_tokens=32)
    messages = LLMWorldModel(backend, context_tokens=1024).render(task, script)
    total = sum(len(m["content"]) for m in messages)
    assert total <= (1024 - 32) * 3
    prompt = messages[-1]["content"]
    assert "HEAD" in prompt and "TAIL" in prompt and "characters omitted" in prompt


def test_prompt_keeps_dollar_signs_and_braces_in_scripts(task: Task) -> None:
    script = 'price = "$100"\nprint(f"{price} ${x}")\n'
    prompt = LLMWorldModel(OpenAIChatBackend("http://127.0.0.1:9")).render(task, script)[-1]["content"]
    assert script.strip() in prompt


def test_truncation_helpers_keep_short_texts_and_bound_long_ones() -> None:
    assert truncate_middle("short", 100) == "short"
    assert truncate_end("short", 100) == "short"
    long_text = "a" * 500 + "b" * 500
    cut = truncate_middle(long_text, 200)
    assert len(cut) <= 200 and cut.startswith("a") and cut.endswith("b")
    assert len(truncate_end(long_text, 200)) <= 200


def test_template_errors_are_config_errors(tmp_path: Path, task: Task) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        PromptTemplate.load(tmp_path / "missing.md")
    no_roles = tmp_path / "no_roles.md"
    no_roles.write_text("just text ${script}", encoding="utf-8")
    with pytest.raises(ConfigError, match="role"):
        PromptTemplate.load(no_roles)
    unknown = tmp_path / "unknown.md"
    unknown.write_text("<!-- role: user -->\n${script} ${no_such_field}", encoding="utf-8")
    wm = LLMWorldModel(OpenAIChatBackend("http://127.0.0.1:9"), template=PromptTemplate.load(unknown))
    with pytest.raises(ConfigError, match="no_such_field"):
        wm.render(task, SCRIPT)


# --------------------------------------------------------------------------- OpenAI backend


def test_openai_backend_predicts_a_parsed_score(canned: _CannedServer, task: Task) -> None:
    wm = _world_model(canned, "score", api_key="secret-token", max_tokens=17)
    (prediction,) = wm.predict([task], [SCRIPT])
    assert prediction.parsed and prediction.error is None
    assert prediction.score == pytest.approx(0.8)
    assert prediction.cost_s > 0
    request = canned.requests[0]
    assert request["headers"]["Authorization"] == "Bearer secret-token"
    body = request["body"]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 17 and body["logprobs"] is True
    assert SCRIPT.strip() in body["messages"][-1]["content"]


def test_openai_backend_uncertainty_comes_from_logprobs(canned: _CannedServer, task: Task) -> None:
    (prediction,) = _world_model(canned, "logprobs").predict([task], [SCRIPT])
    assert prediction.score == pytest.approx(0.8)
    assert prediction.uncertainty == pytest.approx(math.sqrt(0.005))


def test_openai_backend_without_logprobs_has_unknown_uncertainty(canned: _CannedServer, task: Task) -> None:
    (prediction,) = _world_model(canned, "score", top_logprobs=0).predict([task], [SCRIPT])
    assert "logprobs" not in canned.requests[0]["body"]
    assert prediction.parsed and math.isnan(prediction.uncertainty)


def test_openai_backend_batches_concurrently_and_keeps_order(canned: _CannedServer, task: Task) -> None:
    expected = [0.1, 0.9, 0.35, 0.5, 0.77, 0.2]
    scripts = [f"# expect {value}\nprint('hi')\n" for value in expected]
    predictions = _world_model(canned, "echo", max_workers=3).predict([task] * len(scripts), scripts)
    assert [p.score for p in predictions] == pytest.approx(expected)
    assert len(canned.requests) == len(expected)


def test_openai_backend_accepts_a_v1_base_url(canned: _CannedServer, task: Task) -> None:
    backend = OpenAIChatBackend(_url(canned) + "/v1/", model="score")
    assert LLMWorldModel(backend).predict([task], [SCRIPT])[0].score == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        ("garbage", "no score in the answer"),
        ("http500", "HTTP 500"),
        ("notjson", "did not return JSON"),
        ("nochoices", "no choices"),
    ],
)
def test_openai_backend_failures_become_unparsed_predictions(
    canned: _CannedServer, task: Task, behaviour: str, error: str
) -> None:
    (prediction,) = _world_model(canned, behaviour).predict([task], [SCRIPT])
    assert isinstance(prediction, Prediction)
    assert not prediction.parsed
    assert math.isnan(prediction.score) and math.isnan(prediction.uncertainty)
    assert error in (prediction.error or "")


def test_openai_backend_timeout_is_an_unparsed_prediction(canned: _CannedServer, task: Task) -> None:
    start = time.perf_counter()
    (prediction,) = _world_model(canned, "slow", timeout=0.3).predict([task], [SCRIPT])
    assert time.perf_counter() - start < 1.9
    assert not prediction.parsed and "within 0.3 s" in (prediction.error or "")


def test_openai_backend_unreachable_server_is_an_unparsed_prediction(task: Task) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (prediction,) = LLMWorldModel(OpenAIChatBackend(f"http://127.0.0.1:{port}", timeout=2)).predict([task], [SCRIPT])
    assert not prediction.parsed and "cannot reach" in (prediction.error or "")


def test_prompt_too_long_is_retried_shorter(canned: _CannedServer, task: Task) -> None:
    script = "import numpy as np\n" + "".join(f"w{i} = np.float64({i}.5)\n" for i in range(3000))
    (prediction,) = _world_model(canned, "context:3000").predict([task], [script])
    assert prediction.parsed and prediction.score == pytest.approx(0.3)
    lengths = [len(r["body"]["messages"][-1]["content"]) for r in canned.requests]
    assert len(lengths) > 1 and lengths == sorted(lengths, reverse=True) and lengths[-1] <= 3000


def test_prompt_that_never_fits_is_an_unparsed_prediction(canned: _CannedServer, task: Task) -> None:
    (prediction,) = _world_model(canned, "context:10").predict([task], [SCRIPT * 100])
    assert not prediction.parsed and "prompt too long" in (prediction.error or "")
    assert len(canned.requests) == 4  # the first try and three shorter ones


def test_parse_chat_response_types_server_errors() -> None:
    with pytest.raises(ContextLengthError):
        parse_chat_response({"error": {"type": "exceed_context_size_error", "message": "too long"}})
    with pytest.raises(ContextLengthError):
        parse_chat_response({"error": {"message": "This model's maximum context length is 4096 tokens."}})
    with pytest.raises(LLMBackendError, match="overloaded"):
        parse_chat_response({"error": "overloaded"})
    with pytest.raises(LLMBackendError, match="not a JSON object"):
        parse_chat_response([1, 2])
    completion = parse_chat_response(_chat_payload("SCORE: 0.5", [{"token": "bad"}]))
    assert completion.text == "SCORE: 0.5" and completion.logprobs is None  # malformed logprobs are dropped


def test_openai_backend_rejects_a_url_without_scheme() -> None:
    with pytest.raises(ConfigError):
        OpenAIChatBackend("127.0.0.1:8000")


def test_predict_needs_one_script_per_task(task: Task) -> None:
    with pytest.raises(ValueError, match="2 tasks but 1 scripts"):
        LLMWorldModel(OpenAIChatBackend("http://127.0.0.1:9")).predict([task, task], [SCRIPT])


# --------------------------------------------------------------------------- other backends and the factory


def test_transformers_backend_needs_a_local_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="never from a model hub"):
        TransformersBackend(tmp_path / "no-such-model")
    with pytest.raises(ConfigError, match=r"no config\.json"):
        TransformersBackend("HuggingFaceTB/SmolLM2-135M-Instruct")  # a hub id is not a directory


def test_factory_builds_an_llm_world_model(canned: _CannedServer, task: Task) -> None:
    wm = make_world_model("llm", backend="openai", backend_options={"base_url": _url(canned), "model": "score"})
    assert isinstance(wm, LLMWorldModel) and isinstance(wm, WorldModel)
    assert wm.name == "llm"
    assert wm.predict([task], [SCRIPT])[0].score == pytest.approx(0.8)


def test_factory_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown world model 'oracle'"):
        make_world_model("oracle")
    with pytest.raises(ConfigError, match="unknown LLM backend"):
        make_world_model("llm", backend="carrier-pigeon")
    missing = ("wmrl_envs.world_models.no_such_module", "SurrogateWorldModel")
    monkeypatch.setitem(wm_base._REGISTRY, "surrogate", missing)
    with pytest.raises(ConfigError, match="'surrogate' is not available"):
        make_world_model("surrogate")


def test_failed_prediction_is_nan_not_zero() -> None:
    prediction = Prediction.failed("boom", cost_s=1.5)
    assert not prediction.parsed and math.isnan(prediction.score) and prediction.error == "boom"
    assert prediction.cost_s == 1.5


# --------------------------------------------------------------------------- outcome prompts

OUTCOME_SCRIPTS = ["import lightgbm\n", "import pandas as pd\nprint(1)\n", "x = (\n"]


@pytest.mark.parametrize("style", ["holistic", "decomposed"])
def test_outcome_styles_predict_status_exception_and_score(canned, task, style):
    from wmrl_envs.world_models.llm_outcome import LLMOutcomeWorldModel

    model = LLMOutcomeWorldModel(_world_model(canned, "outcome"), style)
    failing, sound, unparsable = model.predict([task] * 3, OUTCOME_SCRIPTS)
    assert (failing.status, failing.exception, failing.score, failing.p_valid) == (
        "import_error", "ModuleNotFoundError", 0.0, 0.0)
    assert (sound.status, sound.score, sound.p_valid) == ("valid", 0.6, 1.0)
    if style == "decomposed":
        # The compile gate settles the syntax error without a request; the sound script meets
        # every aspect and then the score prompt, the failing one stops at its first aspect.
        assert (unparsable.status, unparsable.exception) == ("syntax_error", "SyntaxError")
        asked = [r["body"]["messages"][-1]["content"] for r in canned.requests]
        assert sum("lightgbm" in a for a in asked) == 1 and sum("print(1)" in a for a in asked) == 5
    assert all(p.cost_s > 0 for p in (failing, sound))


@pytest.mark.parametrize(("text", "status", "exception"), [
    ("STATUS: runtime_error\nEXCEPTION: KeyError", "runtime_error", "KeyError"),
    ("**Status:** crash\nException: sklearn.exceptions.NotFittedError", "runtime_error", "NotFittedError"),
    ("STATUS: valid\nEXCEPTION: none", "valid", None),
    ("It will probably work.", None, None),
])
def test_outcome_answers_are_parsed(text, status, exception):
    from wmrl_envs.world_models.llm_outcome import parse_exception, parse_status

    assert parse_status(text) == status and parse_exception(text) == exception


def test_an_outcome_answer_without_a_status_is_not_an_outcome(canned, task):
    from wmrl_envs.world_models.llm_outcome import LLMOutcomeWorldModel

    prediction = LLMOutcomeWorldModel(_world_model(canned, "garbage"), "holistic").predict([task], ["x = 1\n"])[0]
    assert not prediction.parsed and "STATUS" in prediction.error
