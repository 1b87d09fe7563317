"""LIBERO-Long (``libero_10``) as ``wmrl/LIBERO-Long-v0``: env, goal teleports, scripted
demonstrations and a learned success reward model.

Importing this package imports nothing heavy. It only sets ``MUJOCO_GL=egl`` (unless the
user chose a backend) because MuJoCo reads that variable once, at its own import: EGL
renders offscreen through Mesa on machines without a display or GPU.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from wmrl_envs.libero.tasks import INSTRUCTIONS, N_INIT_STATES, N_TASKS, TASK_NAMES, task_index

__all__ = ["INSTRUCTIONS", "N_INIT_STATES", "N_TASKS", "TASK_NAMES", "task_index"]
