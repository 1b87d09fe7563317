r"""Inverse-variance fusion of the anchor and world-model gradient streams.

Derivation
----------
Each sample contributes ``g_i = A_i s_i`` to the policy gradient, with ``s_i = ∇ log π(τ_i)``.
An *anchor* sample's advantage comes from its real reward ``r``. A *world-model* sample's comes
from the calibrated score ``r + e``; calibration removes the bias, so ``E[e] = 0`` and
``Var(e) = η²``, the calibrator's residual, with ``e`` independent of the trajectory.

1. Variance inflation. With std-normalised advantages, ``A = (r - r̄)/σ_r`` and the world-model
   advantage is ``Ã ≈ A + e/σ_r``, so ``g̃_i = g_i + (e_i/σ_r) s_i``. The extra term is zero-mean
   and uncorrelated with ``g_i``, so the per-sample gradient variance (trace of the covariance)
   grows by ``(η²/σ²_r) E‖s‖²``. In the noise-dominated regime of policy gradients
   (``tr Cov(g) ≈ E[A²] E‖s‖²`` with ``E[A²] ≈ 1``) that is a factor ``1 + κη²`` with
   ``κ ≈ 1/σ²_r``: κ converts reward variance into advantage variance.
   (If each world-model group is normalised by its own std ``√(σ²_r + η²)`` instead, the noise
   shows up as a signal shrink by ``ρ = σ_r/√(σ²_r + η²)`` at unchanged variance; dividing by
   ``ρ`` gives the same ``1 + κη²`` in signal-to-noise terms. Warmup must therefore compare the
   two streams on a common scale, e.g. on the same anchor trajectories scored both ways.)

2. Inverse-variance weights. Two unbiased estimators of the same mean with per-sample variances
   ``v_A`` and ``v_W = v_A (1 + κη²)`` are best combined with weights ``∝ 1/v``. Relative to a
   world-model sample (weight 1) an anchor sample gets ``w_A = v_W / v_A = 1 + κη²``. The fused
   mean ``(w_A Σ_A g + Σ_W g)/(n_A w_A + n_W)`` then has variance
   ``1/(n_A/v_A + n_W/v_W)``, below each stream's alone (:func:`fused_mean`).

3. Measuring c instead of trusting κ. κ ≈ 1/σ²_r rests on the approximations above (independent
   ``A`` and ``s``, unit ``E[A²]``, group-mean noise ignored). Warmup therefore measures the two
   per-sample gradient variances directly (:func:`per_sample_grad_variance`, e.g. on the last
   layer's gradients) together with the calibrator's residual ``η̂²_cal``, and picks the slope
   ``c`` so that ``1 + c·η̂²_cal`` equals the measured ratio ``v_W/v_A``::

       c = (ratio - 1) / η̂²_cal                                   (estimate_c)

   ``c`` is the empirical κ. The paper writes ``c = 1/η̂²_cal``; that is this formula at
   ``ratio = 2``: it pins the weight to 2 at calibration time and lets it move in proportion to
   ``η̂²_t/η̂²_cal`` afterwards. Measuring the ratio replaces that fixed 2 with the value the
   gradients actually show.

   On the same anchor rollouts scored both ways, ``g_i = A_i s_i`` (real) and
   ``g̃_i = Ã_i s_i`` (calibrated world model), :func:`stream_variances` gives
   ``v_A = tr Cov(g)`` and ``v_W = v_A + mean‖g̃_i − g_i‖²``: the world-model stream's
   per-sample spread *around the real gradient*. Comparing ``tr Cov(g̃)`` with ``tr Cov(g)``
   instead would see nothing under std-normalised advantages, where both rows have unit scale
   and the noise only turns the signal (the caveat in step 1).

4. Training. Each step uses the current residual: ``w_A = clip(1 + c·η̂²_t, 1, w_max)``
   (:func:`wmrl_envs.scoring.fusion.anchor_weight`, the one implementation every path calls).
   The floor 1 keeps anchors at least as trusted as world-model samples. The cap ``w_max`` bounds the harm of an overestimated ``η̂²_t`` (the residual is
   itself estimated from few anchors): a huge weight would shrink the effective batch to the
   handful of anchors, whose own sampling variance then dominates.

5. Normalisation. Weights are rescaled to mean 1 over the batch
   (:func:`wmrl_envs.scoring.fusion.sample_weights`), i.e.
   divided by the total weight over N, so the step size does not depend on the anchor share:
   an all-anchor or all-world-model batch gets weights of exactly 1, i.e. plain GRPO.

Log ``fusion/w_anchor``, ``calibration/eta2`` and the warmup ratio (``fusion/warmup_ratio``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from wmrl_envs.scoring.fusion import sample_weights

# Below this residual the calibration anchors show no measurable reward noise (scores in [0, 1]
# make 1e-12 far below any real residual).
_ETA2_FLOOR = 1e-12


def per_sample_grad_variance(per_sample_grads: torch.Tensor) -> float:
    """Total variance of per-sample gradients ``[N, P]``: the trace of their covariance.

    ``Σ_i ‖g_i - ḡ‖² / (N - 1)``, the unbiased mean squared deviation from the mean gradient,
    summed over the P coordinates. Computed in float64.
    """
    if per_sample_grads.dim() != 2 or per_sample_grads.shape[0] < 2:
        raise ValueError(f"need [N, P] gradients with N >= 2, got shape {tuple(per_sample_grads.shape)}")
    g = per_sample_grads.detach().to(torch.float64)
    return float((g - g.mean(dim=0)).square().sum() / (g.shape[0] - 1))


def stream_variances(real_grads: torch.Tensor, wm_grads: torch.Tensor) -> tuple[float, float]:
    """Per-sample variances ``(v_A, v_W)`` of the two streams on the same rollouts (step 3).

    ``real_grads[i] = A_i s_i`` with the real advantage, ``wm_grads[i] = Ã_i s_i`` with the
    calibrated world-model advantage, both ``[N, P]``. ``v_W`` adds the world-model rows' mean
    squared error against the real rows to ``v_A``.
    """
    if real_grads.shape != wm_grads.shape:
        raise ValueError(f"real_grads {tuple(real_grads.shape)} and wm_grads {tuple(wm_grads.shape)} differ")
    v_a = per_sample_grad_variance(real_grads)
    err = (wm_grads.double() - real_grads.double()).pow(2).sum(dim=1).mean().item()
    return v_a, v_a + float(err)


def estimate_c(anchor_grad_var: float, wm_grad_var: float, eta2_cal: float) -> float:
    """Slope c such that ``1 + c·eta2_cal`` equals the measured ratio ``wm_grad_var/anchor_grad_var``.

    ``c = max(ratio - 1, 0) / eta2_cal``. Degenerate measurements give 0 (plain averaging):

    * ``ratio < 1``: the world-model stream looked no noisier than the anchors (sampling noise
      of the measurement, or a near-perfect world model), so there is no noise to down-weight;
      a negative slope would only ever be clipped to w_A = 1 anyway.
    * ``eta2_cal ≈ 0``: the calibrator shows no residual, so any measured gap cannot be
      attributed to world-model noise and a slope through ~0 would be unbounded.

    Raises ValueError for non-finite or negative inputs, or ``anchor_grad_var == 0``.
    """
    values = {"anchor_grad_var": anchor_grad_var, "wm_grad_var": wm_grad_var, "eta2_cal": eta2_cal}
    for name, value in values.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be finite and >= 0, got {value}")
    if anchor_grad_var == 0:
        raise ValueError("anchor_grad_var is 0: the anchor gradients carry no variance to compare with")
    if eta2_cal <= _ETA2_FLOOR:
        return 0.0
    ratio = wm_grad_var / anchor_grad_var
    return max(ratio - 1.0, 0.0) / eta2_cal


def fused_mean(anchor_estimates: torch.Tensor, wm_estimates: torch.Tensor, w_anchor: float) -> torch.Tensor:
    """Weighted mean over samples (dim 0) of both streams: ``(w_A Σ_A x + Σ_W x)/(n_A w_A + n_W)``.

    Rows are per-sample estimates (e.g. per-sample gradients ``[n, P]``); trailing dimensions are
    kept. Uses :func:`sample_weights`, so it checks the weights the trainer feeds to the loss.
    """
    if anchor_estimates.shape[1:] != wm_estimates.shape[1:]:
        raise ValueError(
            f"stream shapes differ past dim 0: {tuple(anchor_estimates.shape)} vs {tuple(wm_estimates.shape)}"
        )
    x = torch.cat([anchor_estimates, wm_estimates])
    is_anchor = np.arange(x.shape[0]) < anchor_estimates.shape[0]
    w = torch.as_tensor(sample_weights(is_anchor, w_anchor), dtype=x.dtype, device=x.device)
    w = w.reshape(-1, *([1] * (x.dim() - 1)))
    return (w * x).sum(dim=0) / w.sum()
