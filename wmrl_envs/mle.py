"""``wmrl/MLEDojo-v0``: an ML-engineering agent solves Kaggle-style tasks in text.

One episode is one task. The observation is text (the task prompt, then feedback); the
action is the agent's response, which holds one fenced Python block. The block runs in a
sandbox (or is scored by a world model, depending on ``reward``) and the feedback reports
its output and, on train tasks only, its test score and leaderboard position.

Reward: 0 on intermediate turns; on the last turn, the score of the episode's **last valid
submission** (its leaderboard position score). Repeated submissions never add up, and on
held-out tasks the test score is never shown during the episode: it is only the final reward.
"""

from __future__ import annotations

import string
from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from wmrl_envs import outcome
from wmrl_envs.calibration import Calibrator
from wmrl_envs.errors import ConfigError
from wmrl_envs.info import env_info
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.scoring import (
    AnchorSchedule,
    CodeGroup,
    CodeScorer,
    FusionConfig,
    InFlightAnchors,
    ScoreResult,
    ScoringCore,
    check_reward_mode,
    env_core,
    extract_code,
)
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks import get_task, list_tasks
from wmrl_envs.world_models.base import DEFAULT_WORLD_MODEL

#: Printable ASCII plus whitespace. Feedback is sanitised into it so observations always lie
#: in the observation space, whatever bytes agent code prints.
CHARSET = frozenset(string.printable)
MAX_OBS_CHARS = 64_000
MAX_ACTION_CHARS = 64_000
FEEDBACK_TAIL_CHARS = 2_000

RESPONSE_FORMAT = """\
Respond with a short analysis, then exactly one fenced Python block (```python ... ```) holding a
complete script. The script runs with the task files under `data/` in its working directory and
must write `submission.csv` to the working directory. It has no internet access."""


def task_prompt(task: Task, max_turns: int) -> str:
    """The task prompt an episode starts with (also the instruction of a Harbor export)."""
    turns = f"You have {max_turns} attempt(s); the last valid submission counts."
    return f"# Task: {task.spec.name}\n\n{task.description.strip()}\n\n## Response format\n{RESPONSE_FORMAT}\n{turns}\n"


def sanitize(text: str, limit: int) -> str:
    """Map text into :data:`CHARSET` and keep its tail within ``limit`` characters."""
    clean = "".join(c if c in CHARSET else "?" for c in text)
    return clean if len(clean) <= limit else "...[truncated]...\n" + clean[-(limit - 20):]


#: How a turn that did not run in full was answered (by ``ScoreResult.decided_by``), as its feedback says.
PREDICTED_BY = {
    "proof": "proved without running the script",
    "sample_run": "from a run of the script on a sample of the task's data; it was not run in full",
    "reuse": "from an earlier run of the same code; it was not run again",
    "neighbours": "estimated by a world model, corrected by runs of this code with other numbers; it was not run",
    "world_model": "estimated by a world model, the script was not run",
}


class MLEDojoEnv(gym.Env):
    """Text environment over a suite of ML-engineering tasks.

    Every reward mode goes through one :class:`~wmrl_envs.scoring.ScoringCore`, the same one
    the trainer uses: ``reward`` only picks its schedule (every group executed, every group
    world-model scored, or anchors chosen by the schedule).

    Args:
        reward: ``"real"`` (sandboxed execution), ``"world_model"`` or ``"fused"``.
        split: Which tasks :meth:`reset` samples from when no ``task_id`` is given.
        task_ids: Restrict the pool to these ids (overrides ``split``).
        max_turns: Responses per episode; the last valid one's score is final.
        executor: Sandbox backend name for real execution (``"auto"`` by default: ``"warm"`` where the
            host allows it, else ``"bwrap"``).
        workers: Parallel sandbox runs.
        world_model: World model name or instance (``"surrogate"`` by default).
        world_model_kwargs: Options of the named world model.
        anchor_fraction: ``fused``: share of anchor groups under the default hash schedule.
        anchor_seed: ``fused``: seeds the hash schedule, with the group id.
        schedule: ``fused``: an anchor schedule to use instead, e.g. a trainer's
            :class:`~wmrl_envs.scoring.StepSchedule`.
        calibrator: The calibrator to use; default the process-wide one of
            ``"<suite>/<world model>"``, shared by every env of this suite and world model
            (a ``real`` env, which calibrates nothing, gets its own: :func:`~wmrl_envs.scoring.env_core`).
        calibrate: ``world_model``: False gives raw world-model scores (no debiasing).
        fusion_rule, c, w_max: The anchor weight's rule (``"none"`` by default: anchors weigh as
            much as world-model samples), slope and clip (:class:`~wmrl_envs.scoring.FusionConfig`).
        core: A ready scoring core (advanced: shares one core, e.g. a trainer's, with this env);
            it replaces every option above except ``reward``, which must match it.
        render_mode: ``None`` or ``"ansi"``.
        async_anchors: ``fused``, one turn: an anchor step returns at once, rewarded as a
            world-model step (``info["pending"]``), while its script runs; :meth:`landed` gives
            each anchor's real reward when its run returns, oldest first. False: an anchor step
            waits for its run.
        anchor_timeout_s: With ``async_anchors``: a run not back this many seconds after its
            step is an infrastructure failure (None: the sandbox's own limits end it).
    """

    metadata = {"render_modes": ["ansi"]}
    suite = "mle"
    env_id = "wmrl/MLEDojo-v0"

    def __init__(
        self,
        reward: str = "real",
        split: str = "train",
        task_ids: Sequence[str] | None = None,
        max_turns: int = 1,
        *,
        executor: str = DEFAULT_EXECUTOR,
        workers: int | None = None,
        world_model: Any = DEFAULT_WORLD_MODEL,
        world_model_kwargs: dict[str, Any] | None = None,
        anchor_fraction: float = 0.1,
        anchor_seed: int = 0,
        schedule: AnchorSchedule | None = None,
        calibrator: Calibrator | None = None,
        calibrate: bool = True,
        fusion_rule: str = FusionConfig.rule,
        c: float | None = None,
        w_max: float = 4.0,
        core: ScoringCore | None = None,
        render_mode: str | None = None,
        async_anchors: bool = False,
        anchor_timeout_s: float | None = None,
    ) -> None:
        check_reward_mode(reward, schedule=schedule, core=core)
        if max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1, got {max_turns}")
        if async_anchors and (reward != "fused" or max_turns != 1):
            raise ConfigError("async_anchors lets a fused env's one-turn anchor steps return before their runs: "
                              f"reward 'fused' and max_turns 1, got reward {reward!r} and max_turns {max_turns}")
        if anchor_timeout_s is not None and not anchor_timeout_s > 0:
            raise ConfigError(f"anchor_timeout_s must be None or > 0, got {anchor_timeout_s}")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.reward_mode = reward
        self.async_anchors, self.anchor_timeout_s = async_anchors, anchor_timeout_s
        self._in_flight: deque[InFlightAnchors] = deque()
        self.split = split
        self.max_turns = max_turns
        self.render_mode = render_mode
        self.task_ids = list(task_ids) if task_ids is not None else self._default_task_ids(split)
        if not self.task_ids:
            raise ConfigError(f"no {self.suite} tasks found for split={split!r}")
        if core is None:
            scorer = CodeScorer(world_model, world_model_kwargs, executor=executor, workers=workers)
            core = env_core(reward, lambda: f"{self.suite}/{scorer.world_model_name}", scorer=scorer,
                            schedule=schedule, calibrator=calibrator, anchor_fraction=anchor_fraction,
                            anchor_seed=anchor_seed, fusion=FusionConfig(fusion_rule, w_max=w_max, c=c), debias=calibrate)
        self.core = core
        self.observation_space = spaces.Text(max_length=MAX_OBS_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self._task: Task | None = None
        self._tasks: dict[str, Task] = {}
        self._group_id: Any = None
        self._turn = 0
        self._final: ScoreResult | None = None
        self._last_obs = ""

    # ----------------------------------------------------------------- construction
    def _default_task_ids(self, split: str) -> list[str]:
        return [t.id for t in list_tasks(suite=self.suite, split=split)]

    def _load_task(self, task_id: str) -> Task:
        # A lookup scans every task folder; an env resets thousands of times on the same few tasks.
        if task_id not in self._tasks:
            self._tasks[task_id] = get_task(task_id)
        return self._tasks[task_id]

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        task_id = options.get("task_id")
        if task_id is None:
            task_id = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        self._task = self._load_task(task_id)
        # Every episode belongs to a group; without one, draw it so fused rewards still mix streams.
        self._group_id = options.get("group_id")
        if self._group_id is None:
            self._group_id = int(self.np_random.integers(2**62))
        self._turn = 0
        self._final = None
        self._last_obs = sanitize(self.prompt(self._task), MAX_OBS_CHARS)
        return self._last_obs, {"task_id": task_id, "group_id": self._group_id, "split": self._task.spec.split}

    def step(self, action: str):
        if self._task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._turn >= self.max_turns:
            raise gym.error.ResetNeeded("the episode has ended; call reset()")
        self._turn += 1
        group = CodeGroup(self._task, [extract_code(str(action))], self._group_id)
        flight = None
        if self.async_anchors:
            now, flight = self.core.score_async([group], tag=self._group_id, timeout_s=self.anchor_timeout_s)
            result = (now[0] if flight is None else flight.scored[0]).samples[0]
            if flight is not None:
                self._in_flight.append(flight)
        else:
            result = self.core.score([group])[0].samples[0]
        if not result.infra_failure and result.valid is not False:  # executed and valid, or estimated
            self._final = result
        terminated = self._turn >= self.max_turns
        final = self._final
        reward = float(final.score) if terminated and final is not None else 0.0
        self._last_obs = sanitize(self.feedback(result, terminated), MAX_OBS_CHARS)
        info = self._info(result, final if terminated else None)
        info["pending"] = flight is not None
        if self._task.spec.is_heldout and not terminated:
            # The trainer-facing info must not leak a held-out test score mid-episode either.
            info.update(score=None, raw_score=None, real_score=None, leaderboard={})
        return self._last_obs, reward, terminated, False, info

    def landed(self, wait: bool = False) -> list[dict[str, Any]]:
        """The anchors of earlier steps whose runs have returned, oldest first (``wait``: every one,
        blocking): for each, its ``group_id``, ``task_id``, real ``reward`` and ``info``. Their pairs
        reach the calibrator here, in step order; a step after one still running waits for it."""
        out = []
        while self._in_flight:
            landed = self.core.land(self._in_flight[0], wait)
            if landed is None:
                break
            flight = self._in_flight.popleft()
            result = landed[0].samples[0]
            out.append({"group_id": flight.tag, "task_id": result.task_id, "reward": float(result.score),
                        "info": {**env_info(result, flight.tag), "exception": result.exception,
                                 "executed": result.executed}})
        return out

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        self.core.close()

    # ----------------------------------------------------------------- text
    def prompt(self, task: Task) -> str:
        return task_prompt(task, self.max_turns)

    def feedback(self, result: ScoreResult, terminated: bool) -> str:
        """Feedback for one turn, in the sandbox's format whether the script ran or not.

        A world-model turn reports the predicted outcome, marked as predicted: a proved failure
        gives the exact result line the run would have given, an estimate the predicted
        exception class or "valid, estimated score". Held-out tasks never reveal a test score.
        """
        parts = [f"## Attempt {self._turn}/{self.max_turns}"]
        if result.stdout.strip():
            parts.append("stdout (tail):\n" + result.stdout[-FEEDBACK_TAIL_CHARS:])
        if result.infra_failure:
            parts.append(f"The run could not be evaluated ({result.error}). This attempt is not scored.")
        elif result.status == outcome.NO_CODE:
            parts.append(f"Result: {result.error}")
        elif not result.executed:
            parts.append(self._predicted_line(result))
        elif not result.valid:
            if result.stderr.strip():
                parts.append("stderr (tail):\n" + result.stderr[-FEEDBACK_TAIL_CHARS:])
            parts.append(f"Result: {result.error}")
        elif self._task.spec.is_heldout:
            parts.append("Result: the submission is valid. Test scores are hidden on held-out tasks.")
        else:
            parts.append(self._score_line(result))
        if terminated:
            parts.append("The episode is over.")
        return "\n\n".join(parts) + "\n"

    def _predicted_line(self, result: ScoreResult) -> str:
        """A world-model (or proved) outcome says that it is predicted: the script did not run in full."""
        how = PREDICTED_BY.get(result.decided_by, PREDICTED_BY["world_model"])
        if result.proved:
            return f"Result: {result.error} [predicted: {how}]"
        if result.status and result.status != outcome.VALID:
            what = f"{result.status} ({result.exception})" if result.exception else result.status
            return f"Result: predicted to fail: {what}; P(valid) = {result.p_valid:.2f} [predicted: {how}]"
        if self._task.spec.is_heldout:
            return f"Result: predicted valid [predicted: {how}]. Scores are hidden on held-out tasks."
        return f"Result: predicted valid, estimated score ~ {result.score:.3f} [predicted: {how}]"

    def _score_line(self, result: ScoreResult) -> str:
        spec = self._task.spec
        board = result.leaderboard
        line = f"Result: valid submission. Test {spec.metric} = {result.raw_score:.6g}"
        if "position" in board:
            line += f"; leaderboard position {board['position']}/{board['n']} (position score {board['position_score']:.3f})"
        if "rpg" in board:
            line += f"; relative performance gap {board['rpg']:.3f}"
        if result.stream == "anchor":
            line += " [executed anchor]"
        return line + "."

    def _info(self, result: ScoreResult, final: ScoreResult | None) -> dict[str, Any]:
        """The one info shape (:mod:`wmrl_envs.info`), then what only a code env reports."""
        return {
            **env_info(result, self._group_id),
            "turn": self._turn,
            "exception": result.exception,
            "proved": result.proved,
            "executed": result.executed,
            "feedback_predicted": not result.executed and not result.infra_failure,
            "p_valid": result.p_valid,
            "leaderboard": dict(result.leaderboard),
            "final_score": None if final is None else final.score,
        }
