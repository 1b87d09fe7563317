"""The Space's action, observation and state: those of ``wmrl serve`` (wmrl_envs.integrations.openenv)."""

from wmrl_envs.integrations.openenv import WMRLAction, WMRLObservation, WMRLState

__all__ = ["WMRLAction", "WMRLObservation", "WMRLState"]
