"""The Space's client, under the name OpenEnv's ``AutoEnv`` looks for (``WmrlCodeEnv``)."""

from wmrl_envs.integrations.openenv import WMRLEnvClient as WmrlCodeEnv

__all__ = ["WmrlCodeEnv"]
