"""The one scoring core: how samples become rewards on every path (env, trainer, adapters).

::

    from wmrl_envs.scoring import CodeGroup, CodeScorer, HashSchedule, ScoringCore
    from wmrl_envs.calibration import Calibrator

    core = ScoringCore(HashSchedule(anchor_fraction=0.1, seed=0), Calibrator(), scorer=CodeScorer())
    groups = core.score([CodeGroup(task, scripts, group_id=7), ...])   # one batch, one fan-out
    groups[0].rewards, groups[0].stream, core.anchor_weight()

See ``docs/architecture.md`` for the data flow of one fused reward and one trainer step.
"""

from wmrl_envs.scoring.calibrators import shared_calibrator
from wmrl_envs.scoring.code import CodeGroup, CodeScorer, completion_text, extract_code
from wmrl_envs.scoring.core import GroupScorer, ScoringCore
from wmrl_envs.scoring.fusion import FusionConfig, anchor_weight, sample_weights
from wmrl_envs.scoring.inflight import InFlightAnchors, Landing, land_in_order
from wmrl_envs.scoring.modes import REWARD_MODES, check_reward_mode, env_core
from wmrl_envs.scoring.results import STREAMS, ScoredGroup, ScoreResult, bounded
from wmrl_envs.scoring.schedule import AnchorSchedule, ConstantSchedule, HashSchedule, InformedSchedule, StepSchedule

__all__ = [
    "REWARD_MODES",
    "STREAMS",
    "AnchorSchedule",
    "CodeGroup",
    "CodeScorer",
    "ConstantSchedule",
    "FusionConfig",
    "GroupScorer",
    "HashSchedule",
    "InFlightAnchors",
    "InformedSchedule",
    "Landing",
    "ScoreResult",
    "ScoredGroup",
    "ScoringCore",
    "StepSchedule",
    "anchor_weight",
    "completion_text",
    "land_in_order",
    "bounded",
    "check_reward_mode",
    "env_core",
    "extract_code",
    "sample_weights",
    "shared_calibrator",
]
