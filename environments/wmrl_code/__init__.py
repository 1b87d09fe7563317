"""WMRL's code tasks as an OpenEnv Space: the typed client and its action and observation."""

from .client import WmrlCodeEnv
from .models import WMRLAction, WMRLObservation, WMRLState

__all__ = ["WMRLAction", "WMRLObservation", "WMRLState", "WmrlCodeEnv"]
