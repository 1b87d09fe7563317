"""A scripted controller for LIBERO-Long that reads privileged simulator state.

There are no LIBERO demonstrations offline, so this controller is the demonstration
source for behaviour cloning. It reads the task's BDDL goal and turns each predicate
into a skill made of end-effector waypoints:

* ``TurnOn`` (stove): grasp the knob's bar and twist the wrist.
* ``In`` / ``On``: pick (approach above, descend, close, lift) and place (carry at a safe
  height, lower until the object touches something, open, retreat).
* ``Close`` (drawer, microwave door): push the front along the joint's direction of
  travel with a closed gripper.

Grasps come from the object's collision geometry, not from per-task numbers: a *pinch*
closes across the narrowest horizontal width of the object's top part (cans, boxes, the
book, the moka pot's lid knob), a *rim* grasp holds the wall of a cup or bowl away from
its handle. Predicates that already hold (a stove that starts on) are skipped.

Each skill is a generator that yields one action per simulator step and reads the
simulator again after each step, so the script reacts to what really happened (a missed
grasp is retried). ``action_noise`` and ``target_noise`` make demonstrations diverse and
produce the near-misses that negatives need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.sim import LiberoSim
from wmrl_envs.libero.teleport import goal_predicates, joint_addrs, joint_sweep, predicate_holds

OPEN, CLOSED = -1.0, 1.0
POS_SCALE, ROT_SCALE = 0.05, 0.5  # metres and radians per unit action (OSC_POSE limits)
MAX_PINCH = 0.072  # widest object part the Panda's 8 cm opening grasps reliably
REACH_START = 0.55
ROBOT_PREFIXES = ("robot0_", "gripper0_", "mount0_")  # horizontal distance from the robot's base beyond which the fingers lean out
RIM_CLASSES = ("PorcelainMug", "WhiteYellowMug", "AkitaBlackBowl")
#: Objects held by their handle: the moka pot is too wide for the gripper anywhere else.
HANDLE_CLASSES = ("MokaPot",)
#: Grasp only the top part of these objects (the stove knob's bar above its burner ring).
TOP_LAYER = {"FlatStove": 0.02}


@dataclass(frozen=True)
class ScriptConfig:
    """Knobs of :class:`ScriptedController`.

    Attributes:
        action_noise: Std of Gaussian noise added to every action (before clipping).
        target_noise: Std, in metres, of an error added to each grasp and place point.
        kp: Proportional gain from position error to action.
        tolerance: Distance, in metres, at which a waypoint counts as reached.
        waypoint_steps: Steps after which an unreached waypoint is given up.
        grasp_retries: Extra pick attempts after a missed grasp.
    """

    action_noise: float = 0.0
    target_noise: float = 0.0
    kp: float = 1.5
    tolerance: float = 0.008
    waypoint_steps: int = 70
    grasp_retries: int = 2

    def __post_init__(self) -> None:
        if self.action_noise < 0 or self.target_noise < 0:
            raise ConfigError("action_noise and target_noise must be >= 0")
        if self.kp <= 0 or self.tolerance <= 0 or self.waypoint_steps < 1 or self.grasp_retries < 0:
            raise ConfigError(f"invalid controller gains or limits: {self}")


@dataclass(frozen=True)
class Grasp:
    position: np.ndarray  # end-effector target (world) when the fingers close
    angle: float  # world heading of the fingers' closing axis


class ScriptedController:
    """Closed-loop waypoint controller for the task loaded in ``sim``.

    Call :meth:`act` once per step, after :meth:`LiberoSim.reset_to` and the wait steps.
    """

    def __init__(self, sim: LiberoSim, config: ScriptConfig | None = None,
                 rng: np.random.Generator | None = None) -> None:
        self.sim = sim
        self.config = config or ScriptConfig()
        self.rng = rng or np.random.default_rng(0)
        self._script = self._plan()

    def act(self) -> np.ndarray:
        action = next(self._script)
        if self.config.action_noise > 0:
            action = action + self.rng.normal(0.0, self.config.action_noise, 7) * np.r_[np.ones(6), 0.0]
        return np.clip(action, -1.0, 1.0)

    # ------------------------------------------------------------------ plan
    def _plan(self) -> Iterator[np.ndarray]:
        predicates = goal_predicates(self.sim)
        order = {"turnon": 0, "in": 1, "on": 1, "close": 2}
        placed: dict[str, int] = {}
        counts: dict[str, int] = {}
        for p in predicates:
            if p[0] in ("in", "on"):
                counts[p[2]] = counts.get(p[2], 0) + 1
        for predicate in sorted(predicates, key=lambda p: order.get(p[0], 1)):
            if predicate_holds(self.sim, predicate):
                continue
            kind = predicate[0]
            if kind == "turnon":
                yield from self._turn_on(predicate[1])
            elif kind in ("in", "on"):
                obj, target = predicate[1], predicate[2]
                slot = placed.get(target, 0)
                placed[target] = slot + 1
                yield from self._pick_and_place(obj, target, slot, counts[target])
            elif kind == "close":
                yield from self._close(predicate[1])
            else:
                raise ConfigError(f"the scripted controller has no skill for {predicate}")
        while True:
            yield self._hold(OPEN)

    # ------------------------------------------------------------------ skills
    def _pick_and_place(self, obj: str, target: str, slot: int, n_slots: int) -> Iterator[np.ndarray]:
        for attempt in range(1 + self.config.grasp_retries):
            # A grasp whose descent stalls (the hand met something) is dropped for the next one.
            candidates = self._grasp_candidates(obj)
            grasp = candidates[min(attempt, len(candidates) - 1)]
            # Objects sharing a target sit side by side across their narrow (closing) axis.
            points, _ = self._geom_points(obj)
            width = float(np.ptp(points[:, :2] @ np.array([np.cos(grasp.angle), np.sin(grasp.angle)])))
            goal, entry = self._place_goal(target, slot, n_slots, grasp.angle, width)  # while the arm is clear
            resting = self._aabb(obj)[0][2]
            yield from self._pick(grasp)
            if self._holding(obj, resting):
                yield from (self._place(obj, target, goal) if entry is None else self._insert(obj, goal, entry))
                return
            yield from self._grip(OPEN, self._closing_angle(), steps=6)
            yield from self._move_rel(dz=0.10, gripper=OPEN)

    def _pick(self, grasp: Grasp) -> Iterator[np.ndarray]:
        yield from self._travel(grasp.position + [0, 0, 0.10], grasp.angle, OPEN)
        yield from self._move(grasp.position, grasp.angle, OPEN)
        if np.linalg.norm(grasp.position - self._eef_pos()) > 0.015:
            return  # stalled above the grasp: do not close on the wrong thing
        yield from self._grip(CLOSED, grasp.angle)
        yield from self._move(grasp.position + [0, 0, 0.12], grasp.angle, CLOSED, tolerance=0.02)

    def _place(self, obj: str, target: str, goal: np.ndarray) -> Iterator[np.ndarray]:
        """Carry the held object above ``goal`` (its floor point), lower it until it touches, let go.

        The success checks read the object's body position, and a held object swings about the
        fingers, so every step aims the fingers by where the body hangs *now*.
        """
        eef = self._eef_pos()
        hang = eef[2] - self._aabb(obj)[0][2]  # fingers above the object's bottom
        angle = self._closing_angle()
        carry_z = max(self._clearance_height(target) + hang + 0.04, eef[2])
        yield from self._travel(np.r_[goal[:2] - self._hanging(obj), carry_z], angle, CLOSED)
        yield from self._move(lambda: np.r_[goal[:2] - self._hanging(obj), carry_z], angle, CLOSED, tolerance=0.01)
        yield from self._move(lambda: np.r_[goal[:2] - self._hanging(obj), goal[2] + hang - 0.03], angle, CLOSED,
                              stop=lambda: self._touching_other(obj), speed=0.5)
        yield from self._grip(OPEN, angle)
        yield from self._move(self._eef_pos() + [0, 0, 0.10], angle, OPEN, tolerance=0.02)

    def _hanging(self, obj: str) -> np.ndarray:
        """Horizontal offset of the object's body from the fingers."""
        env = self.sim.env
        return env.sim.data.body_xpos[env.obj_body_id[obj]][:2] - self._eef_pos()[:2]

    def _insert(self, obj: str, goal: np.ndarray, entry: np.ndarray) -> Iterator[np.ndarray]:
        """Slide the held object into an enclosure along ``entry``, just above its floor."""
        eef = self._eef_pos()
        offset = self._hanging(obj)
        hang = eef[2] - self._aabb(obj)[0][2]
        angle = self._closing_angle()
        inside = np.r_[goal[:2] - offset, goal[2] + hang + 0.015]
        outside = inside - 0.15 * entry
        yield from self._travel(outside + [0, 0, 0.08], angle, CLOSED)
        yield from self._move(outside, angle, CLOSED, tolerance=0.015)
        yield from self._move(inside, angle, CLOSED, speed=0.5)
        yield from self._grip(OPEN, angle)
        yield from self._move(self._eef_pos() - 0.12 * entry, angle, OPEN, tolerance=0.02)
        yield from self._move_rel(dz=0.10, gripper=OPEN)

    def _place_goal(self, target: str, slot: int, n_slots: int, across: float,
                    width: float) -> tuple[np.ndarray, np.ndarray | None]:
        """Floor point inside ``target`` for the ``slot``-th of ``n_slots`` objects (side by side
        along the heading ``across``, ``width`` wide there), and the horizontal direction to
        enter along (None: from above).

        The point is the one nearest its share of the target with nothing overhead (an open
        drawer's exposed part). A target with a ceiling everywhere (the microwave) is entered
        from the side its opening faces, and the object goes just past the threshold.
        """
        center, half_size = self._target_area(target)
        noise = np.r_[self.rng.normal(0.0, self.config.target_noise, 2), 0.0]
        preferred = center.copy()
        if n_slots > 1:
            spread = min(width + 0.015, 1.3 * float(np.min(half_size[:2])))
            preferred[:2] += (slot - (n_slots - 1) / 2) * spread * np.array([np.cos(across), np.sin(across)])
        if self._open_above(preferred):
            return preferred + noise, None
        grid = np.linspace(-0.7, 0.7, 8)
        candidates = [center + np.r_[dx * half_size[0], dy * half_size[1], 0.0] for dx in grid for dy in grid]
        clear = [c for c in candidates if self._open_above(c)]
        if clear:
            return min(clear, key=lambda c: np.linalg.norm(c[:2] - preferred[:2])) + noise, None
        entry = -self._opening(center, half_size)
        inside = center - entry * (float(np.abs(entry[:2]) @ half_size[:2]) - 0.03)
        return inside + noise, entry

    def _opening(self, point: np.ndarray, half_size: np.ndarray) -> np.ndarray:
        """Horizontal direction out of an enclosure at ``point``: the middle of the headings
        whose rays leave the enclosure's box without hitting anything."""
        headings = np.linspace(-np.pi, np.pi, 36, endpoint=False)
        free = []
        for heading in headings:
            direction = np.array([np.cos(heading), np.sin(heading), 0.0])
            distance, _ = self._ray(point + [0, 0, 0.05], direction)
            if distance < 0 or distance > float(np.abs(direction[:2]) @ half_size[:2]) + 0.05:
                free.append(direction)
        mean = np.mean(free, axis=0) if free else np.array([-1.0, 0.0, 0.0])
        return mean / np.linalg.norm(mean)

    def _ray(self, start: np.ndarray, direction: np.ndarray) -> tuple[float, int]:
        """Distance to the first geom along a ray (-1: none) and that geom's id."""
        import mujoco  # noqa: PLC0415 - mujoco is the optional [libero] extra

        sim = self.sim.env.sim
        geom = np.full(1, -1, dtype=np.int32)
        distance = mujoco.mj_ray(sim.model._model, sim.data._data, np.asarray(start, float),
                                 np.asarray(direction, float), None, 1, -1, geom)
        return float(distance), int(geom[0])

    def _open_above(self, point: np.ndarray, height: float = 0.35) -> bool:
        """Whether an object lowered from ``height`` above ``point`` (a floor point) would land
        near that floor: the first surface straight below, ignoring the robot, is at most
        8 cm above it (not a cabinet's top or a microwave's roof)."""
        start = np.asarray(point, float) + [0.0, 0.0, height]
        model = self.sim.env.sim.model
        for _ in range(6):
            distance, geom = self._ray(start, np.array([0.0, 0.0, -1.0]))
            if distance < 0:
                return True
            hit_z = start[2] - distance
            body = model.body_id2name(int(model.geom_bodyid[geom]))
            if not body.startswith(ROBOT_PREFIXES):
                return hit_z <= point[2] + 0.08
            start = np.r_[start[:2], hit_z - 1e-3]  # look past the arm
        return False

    def _turn_on(self, name: str) -> Iterator[np.ndarray]:
        """Grasp the knob's bar and twist the wrist the way its joint turns on."""
        addrs = joint_addrs(self.sim, name)
        values = joint_sweep(self.sim, ("turnon", name), addrs)
        goal = float(np.median(values[values[:, 1].astype(bool), 0]))
        data = self.sim.env.sim.data
        twist = np.sign(goal - data.qpos[addrs[0]])  # the knob's joint axis points up
        grasp = self._grasp_candidates(name, part=self.sim.env.sim.model.body_id2name(
            int(self.sim.env.sim.model.jnt_bodyid[np.flatnonzero(self.sim.env.sim.model.jnt_qposadr == addrs[0])[0]])))[0]
        yield from self._move(grasp.position + [0, 0, 0.08], grasp.angle, OPEN, tolerance=0.015)
        yield from self._move(grasp.position, grasp.angle, OPEN)
        yield from self._grip(CLOSED, grasp.angle)
        for _ in range(self.config.waypoint_steps):
            if twist * (goal - data.qpos[addrs[0]]) <= 0:
                break
            yield self._hold(CLOSED, rotation=np.array([0.0, 0.0, 0.6 * twist]))
        yield from self._grip(OPEN, self._closing_angle())
        yield from self._move_rel(dz=0.10, gripper=OPEN)

    def _close(self, name: str) -> Iterator[np.ndarray]:
        """Push a drawer or door shut along its joint's direction of travel."""
        addrs = joint_addrs(self.sim, name)
        values = joint_sweep(self.sim, ("close", name), addrs)
        closed = float(np.median(values[values[:, 1].astype(bool), 0]))
        for _ in range(5):  # re-aim after each push: a door's push direction turns with it
            if predicate_holds(self.sim, ("close", name)):
                return
            contact, direction = self._push_point(addrs, closed)
            angle = float(np.arctan2(direction[1], direction[0])) + np.pi / 2
            start = contact - 0.07 * direction
            yield from self._move(np.r_[start[:2], contact[2] + 0.12], angle, CLOSED, tolerance=0.02)
            yield from self._move(start, angle, CLOSED, tolerance=0.015)
            yield from self._move(contact + 0.10 * direction, angle, CLOSED,
                                  stop=lambda: predicate_holds(self.sim, ("close", name)), speed=0.6)
            yield from self._move(self._eef_pos() - 0.05 * direction + [0, 0, 0.05], angle, CLOSED, tolerance=0.02)

    # ------------------------------------------------------------------ geometry
    def _grasp_candidates(self, obj: str, part: str | None = None) -> list[Grasp]:
        """Pinches across the narrow widths of the top part, or rim grasps for cups and bowls,
        best first: grasps whose hand clears the neighbouring objects, then narrow widths, the
        near side and little wrist rotation."""
        points, tops = self._geom_points(obj, part)
        cls = type(self.sim.env.get_object(obj)).__name__
        noise = np.r_[self.rng.normal(0.0, self.config.target_noise, 2), 0.0]
        if cls in RIM_CLASSES:
            candidates = self._rim_grasps(points)
        else:
            if cls in HANDLE_CLASSES:
                keep = _handle(points)
                points, tops = points[keep], tops[keep]
            layer = TOP_LAYER.get(cls)
            if layer is not None:
                keep = tops >= points[:, 2].max() - layer
                points, tops = points[keep], tops[keep]
            candidates = self._pinch_grasps(points)
        current = self._closing_angle()
        candidates.sort(key=lambda g: g[0] + 0.05 * abs(_wrap_half(g[1].angle - current)))
        ranked = sorted((not self._hand_clear(g, obj), i) for i, (_, g) in enumerate(candidates))
        return [Grasp(candidates[i][1].position + noise, candidates[i][1].angle) for _, i in ranked]

    def _pinch_grasps(self, points: np.ndarray) -> list[tuple[float, Grasp]]:
        """Grasps across the points' horizontal widths that fit the gripper; narrowest first."""
        top, bottom = points[:, 2].max(), points[:, 2].min()
        z = top - min(0.02, 0.5 * (top - bottom))
        out = []
        for angle in np.linspace(0.0, np.pi, 36, endpoint=False):
            u = np.array([np.cos(angle), np.sin(angle)])
            v = np.array([-u[1], u[0]])
            pu, pv = points[:, :2] @ u, points[:, :2] @ v
            width = pu.max() - pu.min()
            if width <= MAX_PINCH:
                center = u * (pu.max() + pu.min()) / 2 + v * (pv.max() + pv.min()) / 2
                out.append((50.0 * width, Grasp(np.r_[center, z], float(angle))))
        if not out:  # nothing fits: try across the narrowest width anyway
            angle = min(np.linspace(0.0, np.pi, 36, endpoint=False),
                        key=lambda a: np.ptp(points[:, :2] @ np.array([np.cos(a), np.sin(a)])))
            u = np.array([np.cos(angle), np.sin(angle)])
            v = np.array([-u[1], u[0]])
            pu, pv = points[:, :2] @ u, points[:, :2] @ v
            out.append((0.0, Grasp(np.r_[u * (pu.max() + pu.min()) / 2 + v * (pv.max() + pv.min()) / 2, z], angle)))
        return out

    def _rim_grasps(self, points: np.ndarray) -> list[tuple[float, Grasp]]:
        """Grasps of a cup's or bowl's wall, away from its handle; near side first."""
        top = points[:, 2].max()
        center, radial = _footprint(points)
        radius = np.percentile(radial[points[:, 2] >= top - 0.01], 75)
        far = points[radial > radius + 0.01][:, :2]  # the handle, if any
        handle = np.arctan2(*(far.mean(0) - center)[::-1]) if len(far) else None
        out = []
        for theta in np.linspace(-np.pi, np.pi, 24, endpoint=False):
            if handle is not None and abs(_wrap(theta - handle)) < np.radians(70):
                continue
            point = center + (radius - 0.012) * np.array([np.cos(theta), np.sin(theta)])
            out.append((2.0 * (point[0] - center[0]), Grasp(np.r_[point, top - 0.015], float(theta))))
        return out

    def _hand_clear(self, grasp: Grasp, obj: str) -> bool:
        """Whether the hand (20 cm across the closing axis, just above the fingers) misses every
        other object's bounding box at this grasp."""
        axis = np.array([np.cos(grasp.angle), np.sin(grasp.angle), 0.0])
        samples = [grasp.position + a * axis + [0, 0, dz] for a in np.linspace(-0.11, 0.11, 9) for dz in (0.03, 0.08)]
        for slot in self.sim.slots:
            if slot.name == obj:
                continue
            lo, hi = self._aabb(slot.name)
            if any(np.all(p > lo - 0.01) and np.all(p < hi + 0.01) for p in samples):
                return False
        return True

    def _geom_points(self, obj: str, part: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Corners (world) of the collision geoms of ``obj`` (or of its body ``part``), and each
        corner's geom top height."""
        env = self.sim.env
        model, data = env.sim.model, env.sim.data
        root = model.body_name2id(part) if part else env.obj_body_id[obj]
        bodies = _subtree(model, root)
        corners, tops = [], []
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        for g in np.flatnonzero(np.isin(model.geom_bodyid, bodies)):
            if not (model.geom_contype[g] or model.geom_conaffinity[g]):
                continue
            center, half = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
            pts = data.geom_xpos[g] + (center + signs * half) @ data.geom_xmat[g].reshape(3, 3).T
            corners.append(pts)
            tops.append(np.full(len(pts), pts[:, 2].max()))
        return np.concatenate(corners), np.concatenate(tops)

    def _aabb(self, obj: str) -> tuple[np.ndarray, np.ndarray]:
        points, _ = self._geom_points(obj)
        return points.min(0), points.max(0)

    def _target_area(self, target: str) -> tuple[np.ndarray, np.ndarray]:
        """Centre (its floor height in z) and half-size of a placement target."""
        env = self.sim.env
        if target in env.object_sites_dict:
            data = env.sim.data
            size = np.abs(data.get_site_xmat(target) @ np.asarray(env.object_sites_dict[target].size, float))
            center = data.get_site_xpos(target).copy()
            center[2] -= size[2]
            return center, size
        lo, hi = self._aabb(target)
        return np.r_[(lo + hi)[:2] / 2, hi[2]], np.array([0.01, 0.01, 0.0])

    def _clearance_height(self, target: str) -> float:
        """Height the carried object's bottom must clear on its way to ``target``."""
        env = self.sim.env
        site = env.object_sites_dict.get(target)
        owner = site.parent_name if site is not None else target
        if owner in env.obj_body_id:
            return float(self._aabb(owner)[1][2]) + 0.02
        return float(self._target_area(target)[0][2]) + 0.02

    def _push_point(self, addrs: list[int], closed: float) -> tuple[np.ndarray, np.ndarray]:
        """Where to push a drawer or door toward the joint value ``closed``, and which way: the
        back of the part that travels furthest, and its direction of travel."""
        env = self.sim.env
        model, data = env.sim.model, env.sim.data
        moving = [int(model.jnt_bodyid[np.flatnonzero(model.jnt_qposadr == a)[0]]) for a in addrs]
        bodies = [b for m in moving for b in _subtree(model, m)]
        geoms = [g for g in np.flatnonzero(np.isin(model.geom_bodyid, bodies))
                 if model.geom_contype[g] or model.geom_conaffinity[g]]
        before = data.geom_xpos[geoms].copy()
        saved = data.qpos[addrs].copy()
        data.qpos[addrs] = saved + np.sign(closed - saved[0]) * 0.02
        env.sim.forward()
        travel = data.geom_xpos[geoms] - before
        data.qpos[addrs] = saved
        env.sim.forward()
        speed = np.linalg.norm(travel[:, :2], axis=1)
        fast = speed >= 0.7 * speed.max()
        direction = travel[fast][:, :2].mean(0)
        direction = np.r_[direction / np.linalg.norm(direction), 0.0]
        candidates = before[fast]
        return candidates[np.argmin(candidates @ direction)].copy(), direction

    # ------------------------------------------------------------------ state
    def _eef_pos(self) -> np.ndarray:
        robot = self.sim.env.robots[0]
        return self.sim.env.sim.data.site_xpos[robot.eef_site_id].copy()

    def _eef_rot(self) -> np.ndarray:
        robot = self.sim.env.robots[0]
        return self.sim.env.sim.data.site_xmat[robot.eef_site_id].reshape(3, 3).copy()

    def _closing_angle(self) -> float:
        axis = self._eef_rot()[:, 0]  # the fingers close along the end effector's x axis
        return float(np.arctan2(axis[1], axis[0]))

    def _holding(self, obj: str, resting: float) -> bool:
        """The fingers touch the object and it has left its support (bottom was at ``resting``)."""
        return bool(self._gripper_touching(obj) and self._aabb(obj)[0][2] > resting + 0.03)

    def _gripper_touching(self, obj: str) -> bool:
        return bool(self.sim.env.check_contact(self.sim.env.robots[0].gripper, self.sim.env.get_object(obj)))

    def _touching_other(self, obj: str) -> bool:
        """The held object touches something besides the gripper (it has been set down)."""
        env = self.sim.env
        model, data = env.sim.model, env.sim.data
        own = set(_subtree(model, env.obj_body_id[obj]))
        gripper = {model.geom_name2id(g) for g in env.robots[0].gripper.contact_geoms if g in model._geom_name2id}
        for contact in data.contact[:data.ncon]:
            g1, g2 = int(contact.geom1), int(contact.geom2)
            in1, in2 = model.geom_bodyid[g1] in own, model.geom_bodyid[g2] in own
            if in1 != in2 and (g2 if in1 else g1) not in gripper:
                return True
        return False

    # ------------------------------------------------------------------ motion
    def _pose_action(self, position: np.ndarray, angle: float, gripper: float, speed: float = 1.0) -> np.ndarray:
        cfg = self.config
        error = position - self._eef_pos()
        move = np.clip(cfg.kp * error / POS_SCALE, -speed, speed)
        rotvec = Rotation.from_matrix(self._target_rotation(position, angle) @ self._eef_rot().T).as_rotvec()
        turn = np.clip(1.5 * rotvec / ROT_SCALE, -1.0, 1.0)
        return np.r_[move, turn, gripper]

    def _target_rotation(self, position: np.ndarray, angle: float) -> np.ndarray:
        """Fingers down with their closing axis at ``angle``, leaning outward far from the base.

        Straight down, the arm cannot reach the far corners of the living-room table; leaning
        the fingers away from the robot (about the closing axis, up to 40 degrees) brings the
        wrist closer to the shoulder.
        """
        # The closing axis is symmetric: turn the shorter way.
        angle = self._closing_angle() + _wrap_half(angle - self._closing_angle())
        closing = np.array([np.cos(angle), np.sin(angle), 0.0])
        down = np.column_stack([closing, [np.sin(angle), -np.cos(angle), 0.0], [0.0, 0.0, -1.0]])
        radial = position[:2] - self._base_pos()[:2]
        reach = np.linalg.norm(radial)
        tilt = 0.7 * np.clip((reach - REACH_START) / 0.25, 0.0, 1.0)
        lean = np.array([-closing[1], closing[0]])  # where +tilt about the closing axis leans the fingers
        tilt *= np.sign(lean @ radial) or 1.0
        return Rotation.from_rotvec(tilt * closing).as_matrix() @ down

    def _base_pos(self) -> np.ndarray:
        env = self.sim.env
        return env.sim.data.body_xpos[env.sim.model.body_name2id(env.robots[0].robot_model.root_body)]

    def _move(self, position: np.ndarray | Callable[[], np.ndarray], angle: float, gripper: float,
              tolerance: float | None = None, stop: Callable[[], bool] | None = None,
              speed: float = 1.0) -> Iterator[np.ndarray]:
        """Step toward ``position`` (or a target recomputed every step) until within ``tolerance``,
        ``stop()`` holds, or ``waypoint_steps`` run out."""
        tolerance = tolerance or self.config.tolerance
        for _ in range(self.config.waypoint_steps):
            target = np.asarray(position() if callable(position) else position, dtype=float)
            if np.linalg.norm(target - self._eef_pos()) < tolerance or (stop is not None and stop()):
                return
            yield self._pose_action(target, angle, gripper, speed)

    def _travel(self, position: np.ndarray, angle: float, gripper: float) -> Iterator[np.ndarray]:
        """Rise, cross at the higher of the two heights, then descend: no sweeping through
        baskets or across objects on the way."""
        position = np.asarray(position, dtype=float)
        height = max(self._eef_pos()[2], position[2])
        yield from self._move(np.r_[self._eef_pos()[:2], height], angle, gripper, tolerance=0.02)
        yield from self._move(np.r_[position[:2], height], angle, gripper, tolerance=0.02)
        yield from self._move(position, angle, gripper, tolerance=0.015)

    def _move_rel(self, dz: float, gripper: float) -> Iterator[np.ndarray]:
        yield from self._move(self._eef_pos() + [0, 0, dz], self._closing_angle(), gripper, tolerance=0.02)

    def _grip(self, gripper: float, angle: float, steps: int = 12) -> Iterator[np.ndarray]:
        hold = self._eef_pos()
        for _ in range(steps):
            yield self._pose_action(hold, angle, gripper)

    def _hold(self, gripper: float, rotation: np.ndarray | None = None) -> np.ndarray:
        return np.r_[np.zeros(3), np.zeros(3) if rotation is None else rotation, gripper]


def _subtree(model, root: int) -> list[int]:
    """Body ids of ``root`` and all its descendants."""
    bodies = [root]
    for b in range(root + 1, model.nbody):
        if model.body_parentid[b] in bodies:
            bodies.append(b)
    return bodies


def _footprint(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre of an object's base (its lowest centimetre) and each point's horizontal distance to it."""
    base = points[points[:, 2] <= points[:, 2].min() + 0.012][:, :2]
    center = (base.min(0) + base.max(0)) / 2
    return center, np.linalg.norm(points[:, :2] - center, axis=1)


def _handle(points: np.ndarray) -> np.ndarray:
    """Mask of the points of an object's handle: far from its base centre, on the side of the
    farthest point (a spout on the other side is left out)."""
    center, radial = _footprint(points)
    direction = points[:, :2] - center
    far = direction[np.argmax(radial)] / radial.max()
    aligned = direction @ far > np.cos(np.radians(40)) * np.maximum(radial, 1e-9)
    return aligned & (radial > radial.max() - 0.035)


def _wrap(angle: float) -> float:
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def _wrap_half(angle: float) -> float:
    """Wrap to [-pi/2, pi/2): a closing axis is the same after half a turn."""
    return float((angle + np.pi / 2) % np.pi - np.pi / 2)



class ScriptedPolicy:
    """The scripted controller behind the evaluator's episode-policy interface
    (:func:`wmrl_envs.libero.evaluate.evaluate_libero`); it reads ``env.sim``, not observations."""

    def __init__(self, config: ScriptConfig | None = None, seed: int = 0) -> None:
        self.config = config or ScriptConfig()
        self.seed = seed
        self._controller: ScriptedController | None = None

    def reset(self, env, task_index: int, init_state: int) -> None:
        rng = np.random.default_rng([self.seed, task_index, init_state])
        self._controller = ScriptedController(env.sim, self.config, rng)

    def act(self, observation: dict) -> np.ndarray:
        if self._controller is None:
            raise RuntimeError("call reset() before act()")
        return self._controller.act()
