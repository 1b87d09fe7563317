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

6. Groups, not samples (the ``sampling`` rule). Steps 1-2 treat samples as independent. In
   GRPO they are not: the G samples of a group share a task and a prompt. Write a sample's
   gradient as ``g = μ + b_k + ε`` with a group part ``b_k`` (variance ``V_b``: which task,
   which prompt) and a within-group part ``ε`` (``V_w``), and a world-model sample's error
   as ``d = a_k + δ`` (``V_a``, ``V_δ``). A stream of m groups of G samples has a mean of
   variance ``(G·V_b + V_w)/(mG)`` (anchors) and ``(G·V_b + V_w + G·V_a + V_δ)/(mG)`` (world
   model), and inverse-variance weighting of the two stream means gives per-sample weight

       w_A = 1 + (G·V_a + V_δ) / (G·V_b + V_w)

   With one anchor group in eight, ``G·V_b`` is the anchor stream's own sampling variance.
   When it dominates, the weight falls towards 1, however large the world model's error: the
   few anchor groups are no better an estimate of the batch's gradient than the many noisy
   ones. With ``V_b = V_a = 0`` it is step 2's ``1 + V_e/V``. :func:`grouped_stream_variances`
   estimates both sums from the warmup anchors' group means (``G·Var(group mean)`` estimates
   ``G·V_b + V_w``; ``G·mean‖group-mean error‖²`` estimates ``G·V_a + V_δ``, and a bias left
   by calibration counts against the world model too), and :func:`estimate_c` turns the ratio
   into the slope of ``1 + c·η̂²_t``, as in step 3.

7. The reference release's rule (``paper``) uses no gradients: an EMA of each anchor group's
   centred calibrated-vs-real disagreement over the group's real-score variance, ``c`` fixed
   after 32 anchor groups so that the weight is 2 then
   (:class:`wmrl_envs.scoring.fusion.DisagreementTracker`). Normalising by the group's real
   variance is step 1's ``κ = 1/σ²_r``; fixing the weight at 2 is step 3's ``ratio = 2``.

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


def grouped_stream_variances(real_grads: torch.Tensor, wm_grads: torch.Tensor,
                             groups: list) -> tuple[float, float]:
    """Per-sample-equivalent variances of the two streams' means, groups as the units (step 6).

    ``real_grads``/``wm_grads`` as in :func:`stream_variances`, ``groups[i]`` the group of row i
    (at least two groups). Returns ``(G·Var(group mean of g), that + G·mean‖group mean of
    g̃ − g‖²)`` with G the mean group size, so that their ratio is step 6's weight.
    """
    if real_grads.shape != wm_grads.shape or real_grads.dim() != 2 or len(groups) != real_grads.shape[0]:
        raise ValueError(f"need two [N, P] gradient arrays of one shape and N group labels, got "
                         f"{tuple(real_grads.shape)}, {tuple(wm_grads.shape)} and {len(groups)} labels")
    labels = sorted(set(groups), key=str)
    if len(labels) < 2:
        raise ValueError("grouped variances need anchor rollouts of at least two groups")
    real, error = real_grads.detach().double(), (wm_grads.detach().double() - real_grads.detach().double())
    members = [torch.as_tensor([i for i, g in enumerate(groups) if g == label]) for label in labels]
    size = real.shape[0] / len(labels)
    real_means = torch.stack([real[m].mean(dim=0) for m in members])
    error_means = torch.stack([error[m].mean(dim=0) for m in members])
    v_anchor = size * float((real_means - real_means.mean(dim=0)).square().sum() / (len(labels) - 1))
    return v_anchor, v_anchor + size * float(error_means.square().sum(dim=1).mean())


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
