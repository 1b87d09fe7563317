"""``wmrl/LIBERO-Long-v0``: the ten long-horizon LIBERO manipulation tasks as one Gymnasium env.

An episode is one task from one of its 50 init states (or, for held-out evaluation beyond
those, a sampled placement ``init_state >= 1000``: see :func:`.tasks.check_init_state`)::

    env = gym.make("wmrl/LIBERO-Long-v0", reward="fused", obs_mode="state")
    obs, info = env.reset(seed=0, options={"task_id": 2, "init_state": 7, "group_id": 41})

* **Reset.** Loads the init state (fast, bit-identical: see :mod:`.sim`), then applies
  ``wait_steps`` (10) no-op actions so objects settle, as LIBERO's evaluation does.
* **Observation.** A Dict: ``instruction`` (Text), ``proprio`` (8: end-effector position,
  axis-angle orientation, finger joints) and, by ``obs_mode``:

  - ``"state"``: ``object_state`` ``[8, 11]`` (privileged object poses and joints);
  - ``"pixels"``: ``agentview_image`` and ``wrist_image``, ``[H, W, 3]`` uint8, **upright**
    (row 0 is the top of the picture; MuJoCo's bottom-up read-back is flipped vertically);
  - ``"both"``: all of them.
* **Action.** ``[dx, dy, dz, dax, day, daz, gripper]`` in [-1, 1]: OSC_POSE deltas (scaled
  by the controller to 5 cm and 0.5 rad per step); gripper -1 opens, +1 closes.
* **End.** ``terminated`` when the simulator's success check holds (a success is a terminal
  state in every reward mode); ``truncated`` after ``max_steps`` (520) policy steps, or, on
  the world-model stream, after ``wm_horizon`` steps.
* **Reward** (on the last step of the episode only; 0 before):

  - ``"real"``: 1.0 if the task was solved, else 0.
  - ``"world_model"``: the success reward model's P(success) for the whole episode, read from
    the states of its first ``wm_horizon`` steps, mapped through the shared calibrator.
    Stopping at ``wm_horizon`` is the point: the model predicts the outcome of the rest of
    the rollout, so those simulator steps are never paid for.
  - ``"fused"``: the group id (``options["group_id"]``) picks the stream through the scoring
    core's anchor schedule (a hash of the group id by default; a trainer's step schedule when
    one is injected). Anchor groups run to the end and get the real success *and* the model's
    prediction at ``wm_horizon``; that pair feeds the calibrator. Other groups are
    world-model episodes.

  Every mode scores a finished episode through one :class:`~wmrl_envs.scoring.ScoringCore`,
  the one the trainer uses (``core=``), so calibration and the anchor weight follow a single
  rule. ``options["stream"]`` ("real", "world_model" or "anchor") overrides the stream of one
  episode, for tools.
* **Info**: the one shape of every WMRL env (:mod:`wmrl_envs.info`: ``task_id`` (the libero_10
  task name), ``group_id``, ``stream``, ``status``, ``score``, ``raw_score``, ``real_score``,
  ``wm_score_raw``, ``wm_score_calibrated``, ``valid``, ``error``, ``infra_failure``,
  ``fusion_weight``, ``cost``), then ``task_index``, ``init_state``, ``step`` and ``result``.
  ``score``, ``cost`` and ``result`` are None and ``status`` is ``""`` until the episode ends (so
  that equal seeds and actions give equal infos, as Gymnasium's checker demands). ``status`` is
  then ``success``, ``failure`` (all ``max_steps`` without success) or ``unfinished`` (a
  world-model episode stopped at ``wm_horizon``); ``raw_score`` and ``real_score`` are the success
  (1.0 or 0.0) of an episode run to its end. ``cost`` is the whole episode's: ``simulation_s``
  (wall, reset and any rebuild included), ``simulation_cpu_s``, ``simulation_steps`` (wait steps
  included), ``world_model_s`` and ``world_model_cpu_s`` (the execution keys are 0);
  ``result`` is the episode's :class:`~wmrl_envs.scoring.ScoreResult` as the core scored it (the
  flat keys are its fields), which a trainer keeps as it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wmrl_envs.errors import ConfigError
from wmrl_envs.info import FAILURE, SUCCESS, UNFINISHED, env_info
from wmrl_envs.libero.reward_model import load_reward_model
from wmrl_envs.libero.sim import MAX_OBJECTS, NO_OP, PROPRIO_DIM, SLOT_DIM, LiberoSim
from wmrl_envs.libero.tasks import (
    INSTRUCTION_CHARSET,
    INSTRUCTIONS,
    MAX_INSTRUCTION_CHARS,
    N_INIT_STATES,
    N_TASKS,
    TASK_NAMES,
    check_init_state,
    task_index,
)
from wmrl_envs.libero.trajectory import Trajectory
from wmrl_envs.scoring import (
    AnchorSchedule,
    FusionConfig,
    ScoredGroup,
    ScoreResult,
    ScoringCore,
    check_reward_mode,
    env_core,
)
from wmrl_envs.scoring.schedule import check_stream

OBS_MODES = ("state", "pixels", "both")
CALIBRATOR_KEY = "libero/success_model"


@dataclass
class LiberoEnvConfig:
    """Options of :class:`LiberoLongEnv` (its constructor keywords).

    Attributes:
        reward: ``"real"``, ``"world_model"`` or ``"fused"``.
        obs_mode: ``"state"``, ``"pixels"`` or ``"both"`` (see the module docstring).
        task_ids: Tasks a reset without ``options["task_id"]`` draws from (default all 10).
        max_steps: Policy steps before truncation (LIBERO-Long's protocol: 520).
        wait_steps: No-op steps after each reset, not counted in ``max_steps``.
        wm_horizon: Policy steps a world-model episode runs before the model predicts the
            outcome; anchors are scored by the model at the same point.
        camera_size: Side of the square camera images.
        render_mode: ``None`` or ``"rgb_array"`` (the upright third-person camera).
        anchor_fraction: Expected share of anchor groups under ``reward="fused"``.
        anchor_seed: Seeds the anchor choice, with the group id.
        fusion_rule: The anchor weight's rule (:class:`~wmrl_envs.scoring.FusionConfig`; default
            ``"none"``: anchors weigh as much as world-model samples).
        w_max: Upper clip of the anchor fusion weight reported in ``fusion_weight``.
        c: The anchor weight's slope (rules ``eta2``, ``sampling``: default ``1/eta2`` at the first
            residual; ``paper``: fixed after its anchor groups).
        reward_model: Path of a success-model artefact (default: the shipped one).
    """

    reward: str = "real"
    obs_mode: str = "state"
    task_ids: tuple[int, ...] = tuple(range(N_TASKS))
    max_steps: int = 520
    wait_steps: int = 10
    wm_horizon: int = 260
    camera_size: int = 128
    render_mode: str | None = None
    anchor_fraction: float = 0.1
    anchor_seed: int = 0
    fusion_rule: str = FusionConfig.rule
    w_max: float = 4.0
    c: float | None = None
    reward_model: str | None = None

    def __post_init__(self) -> None:
        check_reward_mode(self.reward)
        if self.obs_mode not in OBS_MODES:
            raise ConfigError(f"obs_mode must be one of {OBS_MODES}, got {self.obs_mode!r}")
        if self.render_mode not in (None, "rgb_array"):
            raise ConfigError(f"render_mode must be None or 'rgb_array', got {self.render_mode!r}")
        self.task_ids = tuple(task_index(t) for t in self.task_ids)
        if not self.task_ids:
            raise ConfigError("task_ids must name at least one task")
        if self.max_steps < 1 or self.wait_steps < 0:
            raise ConfigError(f"need max_steps >= 1 and wait_steps >= 0, got {self.max_steps}, {self.wait_steps}")
        if not 1 <= self.wm_horizon <= self.max_steps:
            raise ConfigError(f"wm_horizon must be in [1, max_steps={self.max_steps}], got {self.wm_horizon}")
        if self.camera_size < 16:
            raise ConfigError(f"camera_size must be >= 16, got {self.camera_size}")
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise ConfigError(f"anchor_fraction must be in (0, 1], got {self.anchor_fraction}")
        FusionConfig(self.fusion_rule, w_max=self.w_max, c=self.c)  # validates the three

    @property
    def needs_cameras(self) -> bool:
        return self.obs_mode != "state" or self.render_mode is not None


class LiberoLongEnv(gym.Env):
    """LIBERO-Long with real, world-model or fused success rewards.

    Keywords: those of :class:`LiberoEnvConfig`, plus ``schedule`` (an anchor schedule for
    ``reward="fused"``), ``calibrator`` (default: :func:`~wmrl_envs.scoring.env_core`'s, the
    process-wide one of the reward model; a ``real`` env's own) and
    ``core`` (a ready :class:`~wmrl_envs.scoring.ScoringCore`, e.g. a trainer's; it replaces
    both, and its reward must match ``reward``).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, *, schedule: AnchorSchedule | None = None, calibrator: Any = None,
                 core: ScoringCore | None = None, **kwargs: Any) -> None:
        self.config = LiberoEnvConfig(**kwargs)
        check_reward_mode(self.config.reward, schedule=schedule, core=core)
        self._schedule, self._given_calibrator, self._core = schedule, calibrator, core
        self.render_mode = self.config.render_mode
        self.observation_space: spaces.Dict = self._observation_space()
        self.action_space = spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32)
        self._sim: LiberoSim | None = None
        self._reward_model: Any = None
        self._episode: _Episode | None = None

    def _observation_space(self) -> spaces.Dict:
        cfg = self.config
        space: dict[str, spaces.Space] = {
            "instruction": spaces.Text(max_length=MAX_INSTRUCTION_CHARS, min_length=1, charset=INSTRUCTION_CHARSET),
            "proprio": spaces.Box(-np.inf, np.inf, shape=(PROPRIO_DIM,), dtype=np.float32),
        }
        if cfg.obs_mode in ("state", "both"):
            space["object_state"] = spaces.Box(-np.inf, np.inf, shape=(MAX_OBJECTS, SLOT_DIM), dtype=np.float32)
        if cfg.obs_mode in ("pixels", "both"):
            image = spaces.Box(0, 255, shape=(cfg.camera_size, cfg.camera_size, 3), dtype=np.uint8)
            space["agentview_image"] = image
            space["wrist_image"] = image
        return spaces.Dict(space)

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        cfg = self.config
        task = options.get("task_id")
        task = cfg.task_ids[int(self.np_random.integers(len(cfg.task_ids)))] if task is None else task_index(task)
        init_state = options.get("init_state")
        init_state = (int(self.np_random.integers(N_INIT_STATES)) if init_state is None
                      else check_init_state(init_state))
        group_id = options.get("group_id")
        if group_id is None:  # every episode belongs to a group, so fused rewards still mix streams
            group_id = int(self.np_random.integers(2**62))
        stream = check_stream(options.get("stream") or self.core.streams([group_id])[0])

        episode = _Episode(task, init_state, group_id, stream)
        with episode.charge():
            if self._sim is None or self._sim.task_index != task:
                self._close_sim()
                self._sim = LiberoSim(task, cameras=cfg.needs_cameras, camera_size=cfg.camera_size)
            self._sim.reset_to(init_state)
            for _ in range(cfg.wait_steps):
                self._sim.step(NO_OP)
            episode.cost["simulation_steps"] += cfg.wait_steps
        episode.record(self._sim)
        self._episode = episode
        return self._observation(episode, self._sim), self._info(episode)

    def step(self, action: np.ndarray):
        episode, sim, cfg = self._episode, self._sim, self.config
        if episode is None or sim is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if episode.done:
            raise gym.error.ResetNeeded("the episode has ended; call reset()")
        action = np.clip(np.asarray(action, dtype=np.float64).reshape(7), -1.0, 1.0)
        with episode.charge():
            success = sim.step(action)
        episode.cost["simulation_steps"] += 1
        episode.t += 1
        episode.record(sim, action)

        terminated = success
        truncated = not terminated and (
            episode.t >= cfg.max_steps or (episode.stream == "world_model" and episode.t >= cfg.wm_horizon))
        if (episode.stream == "anchor" and episode.result.wm_score_raw is None
                and (terminated or episode.t >= cfg.wm_horizon)):
            self._predict(episode)  # the same prefix a world-model episode is scored on
        if episode.stream == "world_model" and (terminated or truncated):
            self._predict(episode)
        reward = 0.0
        if terminated or truncated:
            episode.done = True
            reward = self._finish(episode, success)
        return self._observation(episode, sim), reward, terminated, truncated, self._info(episode)

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self._sim is None:
            return None
        return self._sim.frames()["agentview_image"]

    def close(self) -> None:
        self._close_sim()

    def __getstate__(self) -> dict[str, Any]:
        # The simulator and the reward model do not travel: the copy rebuilds them on reset().
        state = self.__dict__.copy()
        state.update(_sim=None, _reward_model=None, _episode=None)
        return state

    # ------------------------------------------------------------------ rewards
    @property
    def core(self) -> ScoringCore:
        """The scoring core every episode of this env is scored through (built on first use)."""
        if self._core is None:
            cfg = self.config
            self._core = env_core(cfg.reward, lambda: f"{CALIBRATOR_KEY}/{self.reward_model.name}",
                                  schedule=self._schedule, calibrator=self._given_calibrator,
                                  anchor_fraction=cfg.anchor_fraction, anchor_seed=cfg.anchor_seed,
                                  fusion=FusionConfig(cfg.fusion_rule, w_max=cfg.w_max, c=cfg.c))
        return self._core

    @core.setter
    def core(self, core: ScoringCore) -> None:
        """Score later episodes through ``core`` (a trainer's, say); its reward must match the env's."""
        check_reward_mode(self.config.reward, core=core)
        self._core = core

    @property
    def calibrator(self):
        """The calibrator of this env's scoring core."""
        return self.core.calibrator

    @property
    def reward_model(self):
        """The success reward model (loaded on first use)."""
        if self._reward_model is None:
            self._reward_model = load_reward_model(self.config.reward_model)
        return self._reward_model

    def _predict(self, episode: _Episode) -> None:
        """Score the episode so far with the reward model (the raw world-model score)."""
        start, cpu = time.perf_counter(), time.process_time()
        episode.result.wm_score_raw = float(self.reward_model.predict([episode.trajectory()])[0])
        episode.cost["world_model_s"] += time.perf_counter() - start
        episode.cost["world_model_cpu_s"] += time.process_time() - cpu

    def _finish(self, episode: _Episode, success: bool) -> float:
        """Score the finished episode's result through the core; return the reward."""
        result = episode.result
        if episode.stream != "world_model":
            result.real_score = result.raw_score = float(success)
        result.status = SUCCESS if success else FAILURE if episode.t >= self.config.max_steps else UNFINISHED
        result.decided_by = "world_model" if episode.stream == "world_model" else "execution"
        self.core.fuse([ScoredGroup(result.task_id, episode.group_id, episode.stream, [result])])
        return float(result.score)

    # ------------------------------------------------------------------ observations
    def _observation(self, episode: _Episode, sim: LiberoSim) -> dict[str, Any]:
        # Copies: a caller editing an observation must not edit the episode's record.
        obs: dict[str, Any] = {"instruction": INSTRUCTIONS[episode.task], "proprio": episode.proprio[-1].copy()}
        if "object_state" in self.observation_space.spaces:
            obs["object_state"] = episode.object_state[-1].copy()
        if "agentview_image" in self.observation_space.spaces:
            with episode.charge():
                obs.update(sim.frames())
        return obs

    @staticmethod
    def _info(e: _Episode) -> dict[str, Any]:
        # The one info shape (wmrl_envs.info), the Gymnasium user's view of the episode's one
        # ScoreResult, which travels whole, once the episode is scored, as ``result`` (what the
        # trainer reads).
        r = e.result
        return {**env_info(r, e.group_id, scored=e.done), "task_index": e.task, "init_state": e.init_state,
                "step": e.t, "result": r if e.done else None}

    def _close_sim(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None

    # ------------------------------------------------------------------ for tools
    @property
    def sim(self) -> LiberoSim:
        """The live simulator (for teleports, scripted control and tests); reset first."""
        if self._sim is None:
            raise gym.error.ResetNeeded("call reset() first")
        return self._sim

    def trajectory(self) -> Trajectory:
        """The current episode's record so far."""
        if self._episode is None:
            raise gym.error.ResetNeeded("call reset() first")
        return self._episode.trajectory()


class _Episode:
    """Book-keeping of the running episode: its states, and its one :class:`ScoreResult`
    (scores and cost), which the core fuses when the episode ends."""

    def __init__(self, task: int, init_state: int, group_id: Any, stream: str) -> None:
        self.task, self.init_state, self.group_id, self.stream = task, init_state, group_id, stream
        self.t = 0
        self.done = False
        self.proprio: list[np.ndarray] = []
        self.object_state: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        # An executed episode is always a valid "submission": it succeeds or it does not.
        cost = {"simulation_s": 0.0, "simulation_cpu_s": 0.0, "simulation_steps": 0, "world_model_s": 0.0,
                "world_model_cpu_s": 0.0}
        self.result = ScoreResult(task_id=TASK_NAMES[task], stream=stream,
                                  valid=None if stream == "world_model" else True, cost=cost)

    @property
    def cost(self) -> dict[str, float]:
        """The episode's cost so far (its result's)."""
        return self.result.cost

    @contextmanager
    def charge(self) -> Iterator[None]:
        """Add the wall and CPU time of the block to the episode's simulation cost."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.cost["simulation_s"] += time.perf_counter() - wall
            self.cost["simulation_cpu_s"] += time.process_time() - cpu

    def record(self, sim: LiberoSim, action: np.ndarray | None = None) -> None:
        self.proprio.append(sim.proprio())
        self.object_state.append(sim.object_state())
        if action is not None:
            self.actions.append(action.astype(np.float32))

    def trajectory(self) -> Trajectory:
        actions = np.array(self.actions, dtype=np.float32).reshape(-1, 7)
        real = self.result.real_score
        return Trajectory(self.task, self.init_state, np.array(self.proprio), np.array(self.object_state),
                          actions, None if real is None else bool(real), "env")

