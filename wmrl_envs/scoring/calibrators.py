"""Where a run's calibrator comes from: injected, or the process-wide one for a key.

A calibrator must be *one per run*: every sample of a run calibrates through it and every
anchor pair feeds it. An env made without one takes the process-wide calibrator of its key
(``"<suite>/<world model>"``), so every env of that suite and world model in a process shares
its anchors. A trainer or an adapter injects its own.
"""

from __future__ import annotations

import threading

from wmrl_envs.calibration import Calibrator, CalibratorConfig

_SHARED: dict[str, Calibrator] = {}
_LOCK = threading.Lock()


def shared_calibrator(key: str, config: CalibratorConfig | None = None) -> Calibrator:
    """The process-wide calibrator for ``key`` (created with ``config`` on first use).

    The returned calibrator carries ``shared_key``, so an env that is pickled into another
    process takes that process's calibrator of the same key instead of a copy.
    """
    with _LOCK:
        if key not in _SHARED:
            calibrator = Calibrator(config)
            calibrator.shared_key = key
            _SHARED[key] = calibrator
        return _SHARED[key]
