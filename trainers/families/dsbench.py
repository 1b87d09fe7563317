"""``wmrl/DSBench-v0``: the built-in ``dsbench`` suite, rewarded by relative performance gap."""

from trainers.families.code import code_profile

PROFILE = code_profile("wmrl/DSBench-v0", suite="dsbench", quantity="rpg")
