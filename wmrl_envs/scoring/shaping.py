"""Potential-based shaping: a world model's P(success | prefix) as a dense reward beside the sparse one.

This is the embodied reward of the paper's reference release: the success model's reading
``Phi_t = P(success | states 0..t)`` is a *potential*, each step is rewarded by its change, and
the simulator's sparse success counts on every rollout. For an episode of ``T`` steps,

    r_t = gamma * Phi_{t+1} - Phi_t,        R = success + sum_t r_t.

**gamma = 1.** LIBERO-Long is episodic and undiscounted: its reward is the success at the end,
and GRPO scores an episode by its undiscounted return. Ng, Harada and Russell (1999) show that
shaping keeps the task's optimal policies when its gamma is the task's own, here 1. With
gamma = 1 the sum telescopes, ``sum_t r_t = Phi_T - Phi_0``, so the return needs only the first
and the last reading; the readings in between cancel exactly. With gamma < 1 the undiscounted
sum would keep ``(gamma - 1) * sum_t Phi_t``, a penalty on every step spent in a state the
model rates well, which is the opposite of the intent. All members of a GRPO group start from
the same state (one task, one init state, a deterministic reset), so ``Phi_0`` is one number
per group and group-relative advantages cancel it: what orders the members is their success
and the potential they end at.

**Calibration.** The potential is read through the run's calibrator, the same map that
debiases a truncated episode's prediction (fitted on anchor pairs of ``Phi_T`` and the real
success): a monotone map of a potential is still a potential, and on the calibrated scale
``Phi`` is in units of success probability, the unit of the sparse term it is added to.

**What it costs.** Nothing is truncated: every episode runs to success or ``max_steps`` in the
simulator, because its success counts. A shaped update therefore simulates exactly as many
steps as real GRPO's (plus two success-model readings per episode). Its saving, if any, is in
updates, not in steps: a denser reward can lower the gradient noise scale ``B`` (the batch, in
groups, at which an update is as much signal as noise), and at ``b`` groups an update then
reaches the same progress in about ``(1 + B_shaped / b) / (1 + B_sparse / b)`` of the steps
(McCandlish et al. 2018). ``bench/libero_gradient_noise.py --shaped`` measures both ``B``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def shaped_return(real: ArrayLike, potential_end: ArrayLike, potential_start: ArrayLike) -> np.ndarray:
    """``success + sum_t (Phi_{t+1} - Phi_t) = success + Phi_T - Phi_0`` per episode (gamma = 1).

    Args:
        real: The simulator's success (the sparse reward) of each episode.
        potential_end: ``Phi_T``, the potential at each episode's last state, on the reward's scale.
        potential_start: ``Phi_0``, the potential at its first state, on the same scale.
    """
    real, end, start = (np.asarray(v, dtype=float) for v in (real, potential_end, potential_start))
    if not (real.shape == end.shape == start.shape):
        raise ValueError(f"shapes differ: real {real.shape}, potential_end {end.shape}, potential_start {start.shape}")
    if not np.isfinite(real).all():
        raise ValueError("a shaped return needs every episode's success: the sparse reward counts on every rollout")
    return real + end - start
