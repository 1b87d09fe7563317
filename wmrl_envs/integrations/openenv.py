"""WMRL's text code envs as an OpenEnv 0.10 server (``wmrl serve``).

One server process serves one env id (``wmrl/MLEDojo-v0``, ``wmrl/DSBench-v0`` or another
subclass of :class:`~wmrl_envs.mle.MLEDojoEnv`) to up to ``max_sessions`` concurrent OpenEnv
sessions (one WebSocket each, ``/ws``). Every session has an env of its own (its task, group,
turn), and every session's env holds the server's **one** :class:`SharedScoringCore`: one
calibrator that all sessions' anchors feed and all sessions' world-model scores are calibrated
by, one world model loaded once, one sandbox pool. The integration adds no scoring logic: a
step is the env's ``step``, which calls the core.

Concurrency: two sessions may step at once. Their world-model predictions and sandbox runs
overlap; only :meth:`ScoringCore.fuse` (calibrate the anchors, add their pairs, calibrate the
world-model scores, read the anchor weight) runs under the core's lock, one call at a time.
So the calibrator is never fed by two steps at once, ``c`` is fixed once, and every reward the
server returns equals that of one in-process env fed the same steps in the order of their
fuses. ``metadata["calibrator_pairs"]`` (the calibrator's pair count right after the step's
fuse) gives that order. ``GET /wmrl/calibrator`` returns the shared calibrator's pairs, η̂² and
``c``.

Wire format (``GenericEnvClient(base_url).sync()``):

* ``reset(seed=, task_id=, group_id=, episode_id=)``: ``observation["text"]`` is the task
  prompt; ``metadata`` holds the env's reset info (``task_id``, ``group_id``, ``split``).
* ``step({"response": text})``: the agent's response, one fenced ```python block in it.
  ``observation["text"]`` is the turn's feedback, ``reward`` and ``done`` as the env's, and
  ``metadata`` the env's ``info`` (``stream``, ``score``, ``real_score``, ``wm_score_raw``,
  ``wm_score_calibrated``, ``fusion_weight``, ``valid``, ``error``, ``cost``, ...) as JSON
  (NaN as null) plus ``calibrator_pairs``.
* A bad action (not an object, an unknown field, a response that is not text or longer than
  :data:`~wmrl_envs.mle.MAX_ACTION_CHARS`) is refused with one bounded message and the session
  stays usable; a WebSocket message over :data:`MAX_MESSAGE_BYTES` closes only its session.
* The HTTP routes (``POST /reset``, ``/step``) answer a user error with a 4xx status and a
  one-line ``{"detail": ...}`` (:data:`USER_ERRORS`), and log one bounded line; a 500 means a
  fault of the server. HTTP is stateless: each request gets a fresh env, so ``/step`` always
  answers 409 (no episode); episodes need a WebSocket session.

LIBERO-Long is not served: its action is a 7-d vector per control step, so one episode would
be about 520 round trips, and each session would hold its own MuJoCo simulator (1.4-1.8 GB).
"""

from __future__ import annotations

import functools
import logging
import sys
import uuid
from typing import Any

from gymnasium.error import ResetNeeded

import wmrl_envs
from wmrl_envs.errors import ConfigError, TaskNotFoundError, WMRLError, preview
from wmrl_envs.extras import requires_extra
from wmrl_envs.integrations.shared import DEFAULT_ENV, SharedEnvs, jsonable
from wmrl_envs.mle import MAX_ACTION_CHARS
from wmrl_envs.scoring.results import bounded

with requires_extra("openenv", "the OpenEnv server"):
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from openenv.core import EnvClient
    from openenv.core.client_types import StepResult
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
    from openenv.core.env_server.types import EnvironmentMetadata
    from pydantic import Field, model_validator

#: Largest WebSocket message the server reads (bytes). A maximal response, JSON-escaped at six
#: bytes a character, still fits; anything larger closes its own connection, not the server.
MAX_MESSAGE_BYTES = 1 << 20
_ACTION_FIELDS = ("response", "metadata")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Longest message an HTTP error answer and its log line carry (characters).
_MAX_ERROR_CHARS = 500

log = logging.getLogger(__name__)


class InvalidActionError(WMRLError):
    """An OpenEnv action the env cannot take (the message says why and stays short).

    Not a ``ValueError`` on purpose: pydantic passes it through unchanged, where it would wrap a
    ``ValueError`` into a validation error that quotes the whole offending input back.
    """


def check_action(data: Any) -> None:
    """Refuse a raw action that is not ``{"response": str[, "metadata": dict]}`` within bounds.

    Raises:
        InvalidActionError: naming the problem, never quoting the input's bulk.
    """
    if not isinstance(data, dict):
        raise InvalidActionError(f"an action is an object {{'response': <text>}}, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in _ACTION_FIELDS)
    if unknown:
        raise InvalidActionError(f"unknown action field(s) {preview(unknown)}; an action has 'response' "
                                 "(the agent's text) and optionally 'metadata'")
    response = data.get("response")
    if not isinstance(response, str):
        got = "nothing" if response is None else type(response).__name__
        raise InvalidActionError(f"the action's 'response' must be text, got {got}")
    if len(response) > MAX_ACTION_CHARS:
        raise InvalidActionError(f"the response has {len(response):,} characters; at most "
                                 f"{MAX_ACTION_CHARS:,} are accepted")
    if not isinstance(data.get("metadata", {}), dict):
        raise InvalidActionError("the action's 'metadata' must be an object")


class WMRLAction(Action):
    """One agent response: a short analysis and one fenced ```python block holding the script."""

    response: str = Field(description="the agent's response; its last fenced python block is the script")

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        check_action(data)
        return data


class WMRLObservation(Observation):
    """The env's text observation; ``metadata`` carries its info dict."""

    text: str = Field(default="", description="the task prompt after reset, the turn's feedback after a step")


class WMRLState(State):
    """The session's episode: its task, group and turn (``step_count``)."""

    task_id: str | None = None
    group_id: int | str | None = None


#: The user errors the HTTP routes answer with a 4xx status (any other exception is a 500).
USER_ERRORS: dict[type[Exception], int] = {
    ConfigError: 400,  # reset arguments: an unknown option, a seed or group id of the wrong type
    TaskNotFoundError: 404,
    ResetNeeded: 409,  # a step without an episode: every HTTP /step, since HTTP is stateless
    InvalidActionError: 422,
}
_STATELESS_HINT = ("; over HTTP each request gets a fresh env, so /step never has an episode: "
                   "step through a WebSocket session (/ws), as OpenEnv's client does")


async def _user_error(request: Request, exc: Exception) -> JSONResponse:
    """A user error as its 4xx status and one bounded line, in the answer and in the log."""
    status = next(code for cls, code in USER_ERRORS.items() if isinstance(exc, cls))
    message = " ".join(str(exc).split()) + (_STATELESS_HINT if isinstance(exc, ResetNeeded) else "")
    message = bounded(message, _MAX_ERROR_CHARS)
    log.warning("%s %s -> %d %s", request.method, request.url.path, status, message)
    return JSONResponse({"detail": message}, status_code=status)


class WMRLServer(SharedEnvs):
    """What every session of one server shares (:class:`SharedEnvs`), and its OpenEnv app.

    Build it with :meth:`build`, get the OpenEnv FastAPI app with :meth:`app`, and :meth:`close`
    it when the app stops (:func:`serve` does all three).
    """

    def app(self, max_sessions: int = 4):
        """The OpenEnv FastAPI app: ``/ws`` sessions (up to ``max_sessions`` at once), ``/health``,
        ``/schema``, and ``GET /wmrl/calibrator`` (:meth:`calibrator_report`)."""
        if not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigError(f"max_sessions must be an int >= 1, got {max_sessions!r}")
        app = create_app(functools.partial(WMRLEnvironment, self), WMRLAction, WMRLObservation,
                         max_concurrent_envs=max_sessions, state_cls=WMRLState)
        app.add_api_route("/wmrl/calibrator", self.calibrator_report, methods=["GET"],
                          summary="The server's shared calibrator: its anchor pairs, eta2 and c")
        for error in USER_ERRORS:
            app.add_exception_handler(error, _user_error)
        return app


class WMRLEnvironment(Environment[WMRLAction, WMRLObservation, WMRLState]):
    """One OpenEnv session over a WMRL text env that holds the server's shared core."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # sessions share only the core, whose fuse is locked

    def __init__(self, server: WMRLServer) -> None:
        super().__init__()
        self._server = server
        self._env = server.make_env()
        self._state = WMRLState()

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              group_id: int | str | None = None, **options: Any) -> WMRLObservation:
        """Start an episode: the env's ``reset(seed=, options={"task_id", "group_id"})``.

        Without ``group_id`` the env draws one from ``seed``, which also fixes its stream.
        """
        if options:
            raise ConfigError(f"unknown reset option(s) {preview(sorted(options))}; "
                              "reset takes seed, episode_id, task_id and group_id")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ConfigError(f"seed must be an int, got {type(seed).__name__}")
        if group_id is not None and (not isinstance(group_id, (int, str)) or isinstance(group_id, bool)):
            # JSON has no tuples, and a list is no group id: ints and strings mean the same everywhere.
            raise ConfigError(f"group_id must be an int or a string, got {type(group_id).__name__}")
        text, info = self._env.reset(seed=seed, options={"task_id": task_id, "group_id": group_id})
        self._state = WMRLState(episode_id=episode_id or str(uuid.uuid4()), task_id=info["task_id"],
                                group_id=info["group_id"])
        return WMRLObservation(text=text, metadata=jsonable(info))

    def step(self, action: WMRLAction, timeout_s: float | None = None) -> WMRLObservation:
        """One turn: the env scores the response through the shared core.

        ``timeout_s`` is not used: every sandbox run is bounded by its task's own limits.
        """
        text, reward, terminated, truncated, info = self._env.step(action.response)
        self._state.step_count += 1
        metadata = {**jsonable(info), "calibrator_pairs": self._server.core.take_fused_pairs()}
        return WMRLObservation(text=text, reward=float(reward), done=bool(terminated or truncated), metadata=metadata)

    @property
    def state(self) -> WMRLState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """``GET /metadata``: the env id, its reward mode and task count, and this package's version."""
        options = self._server.options
        return EnvironmentMetadata(
            name=self._server.env_id, version=wmrl_envs.__version__,
            description=f"WMRL {self._server.env_id}: {len(options['task_ids'])} {options['split']} ML-engineering "
                        f"tasks; a response's script is scored by the {options['reward']!r} reward "
                        "(real execution, a world model, or the world model with executed anchors)")

    def close(self) -> None:
        # The env's own close() would stop the shared core's sandbox pool under the other sessions.
        self._env = None


class WMRLEnvClient(EnvClient[WMRLAction, WMRLObservation, WMRLState]):
    """A typed OpenEnv client of a WMRL server (``GenericEnvClient`` works too, with dicts).

    ::

        with WMRLEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
            result = env.reset(task_id="wine-cultivar")
            result = env.step(WMRLAction(response="```python\n...\n```"))
            result.reward, result.observation.metadata["stream"]
    """

    def _step_payload(self, action: WMRLAction) -> dict[str, Any]:
        return {"response": action.response}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[WMRLObservation]:
        data = payload.get("observation", {})
        observation = WMRLObservation(text=data.get("text", ""), done=payload.get("done", False),
                                      reward=payload.get("reward"),
                                      metadata=payload.get("metadata", data.get("metadata", {})))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False),
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> WMRLState:
        return WMRLState(**payload)


def serve(env_id: str = DEFAULT_ENV, *, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 4,
          **env_kwargs: Any) -> None:
    """Serve ``env_id`` over OpenEnv until interrupted; ``env_kwargs`` as :meth:`WMRLServer.build`.

    Binds the loopback address by default. Any client that reaches the server runs code in this
    machine's sandbox, and OpenEnv has no authentication, so another ``host`` is a deliberate choice.
    """
    with requires_extra("openenv", "wmrl serve"):
        import uvicorn  # noqa: PLC0415 - uvicorn is the optional [openenv] extra
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"port must be in 1..65535, got {port!r}")
    server = WMRLServer.build(env_id, **env_kwargs)
    try:
        app = server.app(max_sessions)
        if host not in _LOOPBACK:
            print(f"wmrl: warning: serving on {host}: every client that reaches it runs code in this machine's "
                  "sandbox, and there is no authentication", file=sys.stderr)
        url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        print(f"wmrl serve: {env_id} (reward {server.options['reward']}, {len(server.options['task_ids'])} tasks, "
              f"up to {max_sessions} sessions) at {url}  (OpenEnv client: GenericEnvClient(base_url={url!r}))",
              flush=True)
        uvicorn.run(app, host=host, port=port, ws_max_size=MAX_MESSAGE_BYTES, log_level="warning")
    finally:
        server.close()
