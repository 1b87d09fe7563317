"""Online debiasing of world-model scores (docs/architecture.md §2).

Anchor groups are executed *and* world-model scored. Their (world-model score, real score)
pairs feed a monotone isotonic map, fitted globally and per task, that recalibrates every
world-model score. Two numbers leave this module for the trainer:

* :attr:`Calibrator.eta2`, the residual variance η̂² of calibrated vs real scores. It is
  cross-fitted, so it is not optimistic, and it sets the anchor weight of the
  inverse-variance gradient fusion (``trainers/fusion.py``).
* :meth:`Calibrator.audit`, the Assumption-6 audit. Debiasing assumes the world model's
  bias is a monotone distortion of the true score. Rank statistics of raw world-model vs real
  scores and a cross-fitted non-monotone challenger flag cases where it is not. A bias that
  depends on the kind of solution (the world model over-scores one model family) is no
  function of the score at all, so neither check can see it; the audit therefore also
  compares the calibrated residuals of each *stratum* (a label the caller gives each pair,
  the script's model family for code tasks) with zero.

A world model whose error drifts during training (the policy moves away from what it was
trained on) is tracked by forgetting: :attr:`CalibratorConfig.pair_window` keeps the maps, η̂²
and the audit on the most recent pairs.

What the caller adds: an invalid submission enters as real score 0, like any reward. An
infrastructure failure (the sandbox could not start, the grader timed out) is not a score.
The caller must leave it out.

The package is pure. State round-trips through dicts and JSON strings, and the caller writes
the files.
"""

from wmrl_envs.calibration.audit import AuditReport
from wmrl_envs.calibration.calibrator import Calibrator
from wmrl_envs.calibration.config import CalibratorConfig
from wmrl_envs.calibration.maps import CalibrationMap

__all__ = ["AuditReport", "CalibrationMap", "Calibrator", "CalibratorConfig"]
