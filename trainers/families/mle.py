"""``wmrl/MLEDojo-v0``: the built-in ``mle`` suite, rewarded by leaderboard position score."""

from trainers.families.code import code_profile

PROFILE = code_profile("wmrl/MLEDojo-v0", suite="mle", quantity="position")
