"""One LIBERO-Long task in MuJoCo, behind a small interface the env, the teleports and the
scripted controller share.

LIBERO's own wrapper is used for the scene, the robot, the controller and the success
check; this class adds three things:

* **Fast deterministic resets.** ``hard_reset=False`` reuses the compiled model (0.2-1.3 s
  instead of 2-20 s), but two pieces of state then survive from the previous episode: the
  gripper's remembered command and MuJoCo's constraint-solver warm start. Clearing both
  makes a reset bit-identical to a fresh build. A third source of variation is
  LIBERO's own: every reset re-samples the *fixtures'* placement (stove, cabinet,
  microwave: about +-1 cm) from NumPy's global RNG, and the init states do not hold
  fixture poses. We draw that sample from a seed fixed by (task, init state), so init state
  ``k`` of a task is always the same scene.
* **Fixed-size state.** ``proprio`` is the MiniVLA convention (end-effector position,
  axis-angle orientation, two finger joints); ``object_state`` lists every object and
  fixture in slots of :data:`SLOT_DIM` numbers, the task's objects of interest first.
* **Images on demand.** Cameras render only when :meth:`frames` is called, so state-only
  stepping (teleports, scripted rollouts) never pays for rendering. Frames are upright:
  MuJoCo's OpenGL read-back is bottom row first, so it is flipped vertically.
"""

from __future__ import annotations

import gc
import zlib
from dataclasses import dataclass

import numpy as np

from wmrl_envs.extras import requires_extra
from wmrl_envs.libero.tasks import ENV_ID, SAMPLED_INIT_STATES_START, bddl_path, init_states, task_index

#: Slots in ``object_state``; libero_10's busiest scene holds 8 objects and fixtures.
MAX_OBJECTS = 8
#: Per slot: present flag, position (3), orientation quaternion w-x-y-z (4), up to 3
#: articulated joint positions (drawers, doors, knobs; 0 where absent).
SLOT_DIM = 11
MAX_JOINTS = 3
PROPRIO_DIM = 8
CAMERAS = {"agentview_image": "agentview", "wrist_image": "robot0_eye_in_hand"}
NO_OP = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)  # hold still, gripper open

_FREE_JOINT = 0  # mujoco.mjtJoint.mjJNT_FREE


@dataclass(frozen=True)
class ObjectSlot:
    """Where one object's state lives in the MuJoCo model."""

    name: str
    body_id: int
    joint_qpos_addrs: tuple[int, ...]  # articulated (non-free) joints only
    is_fixture: bool


class LiberoSim:
    """A built LIBERO-Long task. Holds about 1.5 GB; keep one per process.

    Args:
        task: Index 0-9 or libero_10 task name.
        cameras: Build the offscreen renderer so :meth:`frames` works.
        camera_size: Side of the square camera images, in pixels.
    """

    def __init__(self, task: int | str, cameras: bool = False, camera_size: int = 128) -> None:
        with requires_extra("libero", ENV_ID):
            from libero.libero.envs import OffScreenRenderEnv  # noqa: PLC0415 - libero is the optional [libero] extra

        self.task_index = task_index(task)
        self.cameras = cameras
        self.camera_size = camera_size
        # ignore_done: robosuite would raise past its horizon; the env truncates itself.
        self.wrapper = OffScreenRenderEnv(
            bddl_file_name=str(bddl_path(self.task_index)), use_camera_obs=False,
            has_offscreen_renderer=cameras, hard_reset=False, ignore_done=True,
            camera_heights=camera_size, camera_widths=camera_size)
        self.env = self.wrapper.env
        self.init_states = init_states(self.task_index)
        self.slots = self._object_slots()
        self._obs: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ state
    def _object_slots(self) -> tuple[ObjectSlot, ...]:
        env, model = self.env, self.env.sim.model
        of_interest = [n for n in env.obj_of_interest if n in env.obj_body_id]
        names = of_interest + [n for n in [*env.objects_dict, *env.fixtures_dict] if n not in of_interest]
        if len(names) > MAX_OBJECTS:
            raise RuntimeError(f"task {self.task_index} has {len(names)} objects; MAX_OBJECTS is {MAX_OBJECTS}")
        slots = []
        for name in names:
            joints = [model.joint_name2id(j) for j in env.get_object(name).joints]
            addrs = tuple(int(model.jnt_qposadr[j]) for j in joints if model.jnt_type[j] != _FREE_JOINT)
            slots.append(ObjectSlot(name, int(env.obj_body_id[name]), addrs[:MAX_JOINTS], name in env.fixtures_dict))
        return tuple(slots)

    def object_state(self) -> np.ndarray:
        """``[MAX_OBJECTS, SLOT_DIM]`` float32: the slot layout of the module docstring."""
        data = self.env.sim.data
        out = np.zeros((MAX_OBJECTS, SLOT_DIM), dtype=np.float32)
        for i, slot in enumerate(self.slots):
            out[i, 0] = 1.0
            out[i, 1:4] = data.body_xpos[slot.body_id]
            out[i, 4:8] = data.body_xquat[slot.body_id]
            for j, addr in enumerate(slot.joint_qpos_addrs):
                out[i, 8 + j] = data.qpos[addr]
        return out

    def proprio(self) -> np.ndarray:
        """``[8]`` float32: end-effector position, axis-angle orientation, finger joints."""
        from robosuite.utils.transform_utils import quat2axisangle  # noqa: PLC0415 - robosuite is the optional [libero] extra

        obs = self._obs
        return np.concatenate([obs["robot0_eef_pos"], quat2axisangle(obs["robot0_eef_quat"]),
                               obs["robot0_gripper_qpos"]]).astype(np.float32)

    def success(self) -> bool:
        return bool(self.env._check_success())

    # ------------------------------------------------------------------ dynamics
    def reset_to(self, init_state: int | np.ndarray) -> None:
        """Load init state ``k`` (or a flattened MuJoCo state) deterministically.

        ``k`` in 0-49 is LIBERO's file; ``k >= SAMPLED_INIT_STATES_START`` is the placement
        robosuite's soft reset samples from the BDDL regions under a seed fixed by (task, k).
        """
        sampled = np.ndim(init_state) == 0 and int(init_state) >= SAMPLED_INIT_STATES_START
        if sampled:
            state, placement_seed = None, zlib.crc32(f"sampled/{self.task_index}/{int(init_state)}".encode())
        elif np.ndim(init_state) == 0:
            state = self.init_states[int(init_state)]
            placement_seed = self.task_index * 1000 + int(init_state)
        else:
            state = np.asarray(init_state, dtype=np.float64)
            placement_seed = zlib.crc32(state.tobytes())
        # robosuite's soft reset samples placements from the global NumPy RNG: seed it for
        # the fixtures' sake (and a sampled state's objects), and give the caller's global RNG
        # back untouched.
        rng_state = np.random.get_state()
        np.random.seed(placement_seed)
        self.env.reset()
        np.random.set_state(rng_state)
        for robot in self.env.robots:
            robot.gripper.current_action = np.zeros(robot.gripper.dof)
        self.env.sim.data.qacc_warmstart[:] = 0
        # A sampled scene is loaded back like a file's, so both kinds start through one path.
        self._obs = self.wrapper.set_init_state(self.get_state() if sampled else state)
        self.env.sim.data.qacc_warmstart[:] = 0

    def step(self, action: np.ndarray) -> bool:
        """Apply one 7-d action (20 Hz control); return whether the task is now solved."""
        self._obs, _, done, _ = self.wrapper.step(np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0))
        return bool(done)

    def refresh(self) -> None:
        """Recompute derived quantities and observations after editing ``sim.data`` directly."""
        self.env.sim.forward()
        self.env._post_process()
        self.env._update_observables(force=True)
        self._obs = self.env._get_observations(force_update=True)

    def get_state(self) -> np.ndarray:
        return self.env.sim.get_state().flatten()

    # ------------------------------------------------------------------ images
    def frames(self) -> dict[str, np.ndarray]:
        """Upright ``[H, W, 3]`` uint8 images of the third-person and wrist cameras."""
        if not self.cameras:
            raise RuntimeError("this LiberoSim was built without cameras")
        size = self.camera_size
        return {key: np.ascontiguousarray(self.env.sim.render(width=size, height=size, camera_name=cam)[::-1])
                for key, cam in CAMERAS.items()}

    def close(self) -> None:
        self.wrapper.close()
        del self.wrapper, self.env
        gc.collect()  # the MuJoCo model is large; free it before the next build
