"""WMRL from other RL stacks: thin adapters that call the one scoring core (``wmrl_envs.scoring``).

Each module imports its library lazily (an optional extra) and adds no scoring logic of its own:
streams come from the core's schedule, rewards and anchor weights from the core.
"""
