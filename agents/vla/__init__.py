"""VLA policies for LIBERO-Long: MiniVLA (trained here) and an adapter for OpenVLA-family checkpoints."""

from agents.vla.policy import EpisodePrompt, MiniVLAPolicy, VLAConfig, VLAEpisodePolicy
from agents.vla.tokenizer import ActionTokenizer
from wmrl_envs.libero.scripted import ScriptedPolicy

__all__ = ["ActionTokenizer", "EpisodePrompt", "MiniVLAPolicy", "VLAConfig", "VLAEpisodePolicy", "episode_policy"]


def episode_policy(spec: str, seed: int = 0, greedy: bool = True):
    """An evaluator policy from a ``--policy`` value: ``"scripted"`` (the privileged
    controller) or the path of a saved :class:`MiniVLAPolicy`."""
    if spec == "scripted":
        return ScriptedPolicy(seed=seed)
    return VLAEpisodePolicy(MiniVLAPolicy.load(spec), greedy=greedy, seed=seed)
