"""Goal "teleports": put a scene into a state that satisfies its BDDL goal, without a robot.

There are no LIBERO demonstrations offline, so positive examples of success come from
editing the simulator state directly:

1. Read the goal predicates from the task's BDDL file (``In``, ``On``, ``Close``, ``TurnOn``).
2. Sweep the joint of each articulated predicate's drawer, door or knob over its range,
   and keep the middle of the values where the predicate holds (the middle, so that
   settling cannot push it out).
3. Place every object of an ``In``/``On`` predicate a little above its target (a site
   region, or another object's body), spreading several objects with the same target apart,
   and zero all velocities.
4. Let physics settle for a few steps with the robot holding still, and ask the real
   success check. If it fails, try again from the same start with a larger drop height.

Order matters for containers that must end closed (the drawer of task 3): the drawer is
opened wide, the bowl dropped in and settled, and only then is the drawer closed, with the
bowl moved along by the drawer's displacement. Objects going into a region get the
region's heading, so the book of task 5 fits the caddy's narrow back slot.

:func:`near_miss` then breaks one predicate of a teleported goal state (an object moved a
few centimetres out of its target, a drawer or door left ajar, a knob turned back), which
gives hard negatives right next to the success boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from wmrl_envs.libero.sim import NO_OP, LiberoSim

UNARY = ("close", "open", "turnon", "turnoff")
PLACEMENT = ("in", "on")
#: Drop heights tried in turn, above the object's resting height at the start.
LIFTS = (0.03, 0.06, 0.10, 0.15)
SETTLE_STEPS = 30
#: Jittered retries after the plain drops. The caddy's back slot (task 5) needs them: its
#: success box starts 3.5 mm above the slot's floor, so an upright book standing on the
#: floor fails, and only a book that leans or wedges in the slot counts as placed.
JITTER_ATTEMPTS = 48


@dataclass(frozen=True)
class _Placement:
    lift: float  # metres above the object's starting height
    tilt: float = 0.0  # radians, about the target's longer horizontal axis
    shift: float = 0.0  # metres, along the target's shorter horizontal axis


def _placements(jitter_attempts: int) -> Iterator[_Placement]:
    yield from (_Placement(lift) for lift in LIFTS)
    rng = np.random.default_rng(0)
    for _ in range(jitter_attempts):
        yield _Placement(float(rng.choice(LIFTS)), float(rng.choice([-1, 1]) * rng.uniform(0.17, 0.7)),
                         float(rng.uniform(-0.015, 0.015)))


def goal_predicates(sim: LiberoSim) -> list[tuple[str, ...]]:
    """The task's goal as ``(predicate, arg, ...)`` tuples, lower case."""
    return [tuple(str(a).lower() for a in p) for p in sim.env.parsed_problem["goal_state"]]


def predicate_holds(sim: LiberoSim, predicate: tuple[str, ...]) -> bool:
    return bool(sim.env._eval_predicate(list(predicate)))


def teleport_to_goal(sim: LiberoSim, settle_steps: int = SETTLE_STEPS, jitter_attempts: int = JITTER_ATTEMPTS) -> bool:
    """Edit the current scene so the goal holds; return the simulator's success check.

    Tries plain drops from each of :data:`LIFTS`, then up to ``jitter_attempts`` placements
    tilted and shifted by a fixed-seed RNG (so the result is deterministic). The scene is
    left in the settled goal state, or in the last failed attempt.
    """
    start = sim.get_state()
    for placement in _placements(jitter_attempts):
        _set_state(sim, start)
        _apply_goal(sim, placement, settle_steps)
        if sim.success():
            return True
    return False


def near_miss(sim: LiberoSim, rng: np.random.Generator, settle_steps: int = SETTLE_STEPS,
              attempts: int = 8) -> str | None:
    """From a goal state, break one goal predicate; return which (e.g. ``"in:butter_1"``).

    Placed objects move 6-15 cm horizontally and drop; articulated objects go back to a
    value where their predicate fails. A perturbation after which the task still counts as
    solved (an object that fell back into its basket) is undone and another is drawn;
    None if every attempt still succeeded.
    """
    goal_state = sim.get_state()
    predicates = goal_predicates(sim)
    data = sim.env.sim.data
    for _ in range(attempts):
        _set_state(sim, goal_state)
        predicate = predicates[int(rng.integers(len(predicates)))]
        if predicate[0] in UNARY:
            addrs = joint_addrs(sim, predicate[1])
            values = joint_sweep(sim, predicate, addrs)
            failing = values[~values[:, 1].astype(bool), 0]
            data.qpos[addrs] = failing[int(rng.integers(len(failing)))]
        else:
            addr = _free_joint_addr(sim, predicate[1])
            angle = rng.uniform(0, 2 * np.pi)
            data.qpos[addr:addr + 2] += rng.uniform(0.06, 0.15) * np.array([np.cos(angle), np.sin(angle)])
            data.qpos[addr + 2] += 0.03
        data.qvel[:] = 0
        sim.refresh()
        for _ in range(settle_steps):
            sim.step(NO_OP)
        if not sim.success():
            return f"{predicate[0]}:{predicate[1]}"
    return None


# ---------------------------------------------------------------------------- internals
def _set_state(sim: LiberoSim, state: np.ndarray) -> None:
    sim.env.sim.set_state_from_flattened(state)
    sim.refresh()


def _apply_goal(sim: LiberoSim, placement: _Placement, settle_steps: int) -> None:
    """Open hosts, place and settle objects, then set articulations, carrying contents along."""
    data = sim.env.sim.data
    predicates = goal_predicates(sim)
    by_target: dict[str, list[str]] = {}
    for predicate in predicates:
        if predicate[0] in PLACEMENT:
            by_target.setdefault(predicate[2], []).append(predicate[1])
    articulations = {}
    for predicate in predicates:
        if predicate[0] in UNARY:
            addrs = joint_addrs(sim, predicate[1])
            values = joint_sweep(sim, predicate, addrs)
            holding = values[values[:, 1].astype(bool), 0]
            if holding.size:
                goal_value = float(np.median(holding))
                articulations[predicate[1]] = (addrs, goal_value)
                if any(_hosts(sim, predicate[1], target) for target in by_target):
                    # A drawer or door that must end closed holds an object: open it wide first.
                    data.qpos[addrs] = values[np.argmax(np.abs(values[:, 0] - goal_value)), 0]
    sim.refresh()

    for target, names in by_target.items():
        center, half_size, yaw = _target_frame(sim, target)
        long_axis = int(np.argmax(half_size[:2]))
        spacing = min(0.08, 1.2 * half_size[long_axis]) if len(names) > 1 else 0.0
        tilt_axis = np.eye(3)[long_axis]
        for i, name in enumerate(names):
            addr = _free_joint_addr(sim, name)
            xy = center[:2].copy()
            xy[long_axis] += (i - (len(names) - 1) / 2) * spacing
            xy[1 - long_axis] += placement.shift
            rest_height = data.qpos[addr + 2]  # the object rests on the table at the start
            data.qpos[addr:addr + 2] = xy
            data.qpos[addr + 2] = max(rest_height, center[2]) + placement.lift
            quat = data.qpos[addr + 3:addr + 7]
            if yaw is not None:  # a slot (the caddy's) only takes an object aligned with it
                quat = _with_yaw(quat, yaw)
            half = placement.tilt / 2
            data.qpos[addr + 3:addr + 7] = _quat_mul(np.concatenate([[np.cos(half)], np.sin(half) * tilt_axis]), quat)
    data.qvel[:] = 0
    sim.refresh()
    for _ in range(settle_steps):
        sim.step(NO_OP)

    before = {target: _target_frame(sim, target)[0] for target in by_target}
    for addrs, value in articulations.values():
        data.qpos[addrs] = value
    sim.refresh()
    for target, names in by_target.items():
        shift = _target_frame(sim, target)[0] - before[target]
        for name in names:  # contents ride along with their drawer
            addr = _free_joint_addr(sim, name)
            data.qpos[addr:addr + 3] += shift
    data.qvel[:] = 0
    sim.refresh()
    for _ in range(settle_steps):
        sim.step(NO_OP)


def _hosts(sim: LiberoSim, articulated: str, target: str) -> bool:
    """Whether placement ``target`` is (or sits on) the articulated object ``articulated``."""
    site = sim.env.object_sites_dict.get(target)
    return target == articulated or (site is not None and site.parent_name == articulated)


def _target_frame(sim: LiberoSim, target: str) -> tuple[np.ndarray, np.ndarray, float | None]:
    """World position, horizontal half-size and yaw (None: any) of a placement target."""
    env = sim.env
    if target in env.object_sites_dict:
        xmat = env.sim.data.get_site_xmat(target)
        size = np.abs(xmat @ np.asarray(env.object_sites_dict[target].size, float))
        return env.sim.data.get_site_xpos(target).copy(), size, float(np.arctan2(xmat[1, 0], xmat[0, 0]))
    # Another object (a plate): its body position; "On" wants the centres within 3 cm.
    return env.sim.data.body_xpos[env.obj_body_id[target]].copy(), np.array([0.01, 0.01, 0.0]), None


def _with_yaw(quat_wxyz: np.ndarray, yaw: float) -> np.ndarray:
    """The orientation with its heading replaced by ``yaw`` (tilt kept)."""
    w, x, y, z = quat_wxyz
    current = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    half = (yaw - current) / 2
    turn = np.array([np.cos(half), 0.0, 0.0, np.sin(half)])
    return _quat_mul(turn, quat_wxyz)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


def joint_addrs(sim: LiberoSim, name: str) -> list[int]:
    env = sim.env
    joints = env.object_sites_dict[name].joints if name in env.object_sites_dict else env.get_object(name).joints
    return [int(env.sim.model.get_joint_qpos_addr(j)) for j in joints]


def _free_joint_addr(sim: LiberoSim, name: str) -> int:
    joint = sim.env.get_object(name).joints[-1]
    return int(sim.env.sim.model.get_joint_qpos_addr(joint)[0])


def joint_sweep(sim: LiberoSim, predicate: tuple[str, ...], addrs: list[int]) -> np.ndarray:
    """``[n, 2]`` rows of (joint value, predicate holds) over the joint's range; state restored."""
    model, data = sim.env.sim.model, sim.env.sim.data
    joint_ids = [int(np.flatnonzero(model.jnt_qposadr == a)[0]) for a in addrs]
    lo = max(model.jnt_range[j][0] for j in joint_ids)
    hi = min(model.jnt_range[j][1] for j in joint_ids)
    saved = data.qpos[addrs].copy()
    rows = []
    for value in np.linspace(lo, hi, 43):
        data.qpos[addrs] = value
        sim.env.sim.forward()
        rows.append((value, predicate_holds(sim, predicate)))
    data.qpos[addrs] = saved
    sim.env.sim.forward()
    return np.array(rows, dtype=float)
