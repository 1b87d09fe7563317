"""GRPO math: group-relative advantages and the clipped surrogate loss.

Pure functions on tensors; no model, optimiser or trainer state lives here.

Shapes. Log-probabilities are ``[B, T]`` with a 0/1 ``mask`` ``[B, T]`` marking the tokens the
policy produced. A row is one sample of a group. A multi-step trajectory (a research agent's
several turns, or a VLA episode of many action steps with several action tokens each) is just
a longer masked row: every produced token of the trajectory sits in the same row and receives
the trajectory's group advantage.

Conventions compared with TRL and verl (see :func:`group_advantages` for the details):

============================  =====================  ======================  ====================
                              WMRL (default)         TRL ``GRPOTrainer``     verl ``grpo``
============================  =====================  ======================  ====================
group routing                 explicit group ids     contiguous blocks of G  explicit uid index
std                           unbiased (n - 1)       unbiased (n - 1)        unbiased (n - 1)
epsilon                       1e-4                   1e-4                    1e-6
group of one                  advantage 0            disallowed (G >= 2)     advantage r/(1+1e-6)
zero-variance group           advantage exactly 0    0 up to rounding/1e-4   0 up to rounding/1e-6
============================  =====================  ======================  ====================
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np
import torch

AdvantageMode = Literal["std", "mean"]
StdConvention = Literal["unbiased", "biased"]
Aggregation = Literal["token", "sequence", "seq-mean-token-sum", "dr-grpo"]

_AGGREGATIONS: tuple[str, ...] = ("token", "sequence", "seq-mean-token-sum", "dr-grpo")


def group_advantages(
    rewards: torch.Tensor | np.ndarray | Sequence[float],
    group_ids: torch.Tensor | np.ndarray | Sequence[Hashable],
    mode: AdvantageMode = "std",
    eps: float = 1e-4,
    std: StdConvention = "unbiased",
) -> torch.Tensor:
    """Group-relative advantage of every sample, routed by explicit group ids.

    Rows belong to the group named by ``group_ids[i]`` (any hashable: ints, strings, tuples);
    row position never matters, so rows of one group may be interleaved with other groups.

    * ``mode="std"`` (GRPO): ``A_i = (r_i - mean_g) / (std_g + eps)``.
    * ``mode="mean"`` (Dr.GRPO): ``A_i = r_i - mean_g``; ``eps`` and ``std`` are unused.

    ``std="unbiased"`` divides the squared deviations by ``n - 1`` (``torch.std``'s default, as
    TRL and verl use); ``"biased"`` divides by ``n``.

    Edge cases, and how the references differ:

    * Group of one: there is no baseline to compare against, so the sample carries no
      group-relative signal and we return 0 (in both modes). verl instead sets mean 0 and std 1
      for such a group, so its advantage is ``r / (1 + 1e-6)``, i.e. the raw reward. TRL never
      meets the case: it requires at least two generations per prompt (and ``torch.std`` of one
      element with ``n - 1`` would be NaN).
    * Zero-variance group (all rewards equal): the advantage is exactly 0. TRL and verl compute
      ``(r - mean) / (std + eps)``, which is 0 only up to rounding: in float32 the mean of seven
      copies of 0.1 is off by ~7e-9, and verl's ``eps=1e-6`` amplifies that to ~0.007. We compute
      the group statistics in float64 and zero constant groups explicitly.

    Returns a 1-D float tensor on ``rewards``' device (float32 unless ``rewards`` is floating).
    """
    if mode not in ("std", "mean"):
        raise ValueError(f"mode must be 'std' or 'mean', got {mode!r}")
    if std not in ("unbiased", "biased"):
        raise ValueError(f"std must be 'unbiased' or 'biased', got {std!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")

    r = torch.as_tensor(rewards)
    out_dtype = r.dtype if r.is_floating_point() else torch.float32
    if r.dim() != 1:
        raise ValueError(f"rewards must be 1-D, got shape {tuple(r.shape)}")
    ids = group_ids.tolist() if isinstance(group_ids, (torch.Tensor, np.ndarray)) else list(group_ids)
    if len(ids) != r.numel():
        raise ValueError(f"{r.numel()} rewards but {len(ids)} group ids")
    if not torch.isfinite(r).all():
        raise ValueError(f"{int((~torch.isfinite(r)).sum())} non-finite rewards")

    # Dense group index in order of first appearance; row order stays untouched.
    dense: dict[Hashable, int] = {}
    index = torch.tensor([dense.setdefault(g, len(dense)) for g in ids], dtype=torch.long, device=r.device)
    n_groups = len(dense)

    r64 = r.to(torch.float64)
    zeros = torch.zeros(n_groups, dtype=torch.float64, device=r.device)
    count = zeros.index_add(0, index, torch.ones_like(r64))
    mean = zeros.index_add(0, index, r64) / count
    deviation = r64 - mean[index]

    # Constant groups (including groups of one) carry no signal: return exact zeros.
    g_max = torch.full_like(count, -torch.inf).scatter_reduce(0, index, r64, reduce="amax")
    g_min = torch.full_like(count, torch.inf).scatter_reduce(0, index, r64, reduce="amin")
    constant = (g_max == g_min)[index]

    if mode == "mean":
        advantage = deviation
    else:
        dof = count - 1 if std == "unbiased" else count
        sq_sum = zeros.index_add(0, index, deviation.square())
        # Groups of one have dof 0 under "unbiased"; they are constant and zeroed below anyway.
        group_std = (sq_sum / dof.clamp(min=1)).sqrt()
        advantage = deviation / (group_std[index] + eps)
    return torch.where(constant, torch.zeros_like(advantage), advantage).to(out_dtype)


def clipped_surrogate_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    aggregation: Aggregation = "token",
    sample_weights: torch.Tensor | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO/GRPO clipped surrogate loss (to minimise) and detached statistics.

    Per produced token ``t`` of sample ``i``, with ``rho = exp(logp_new - logp_old)``::

        l_it = -min(rho * A_i, clip(rho, 1 - epsilon, 1 + epsilon_high) * A_i)

    ``epsilon_high`` (DAPO's "clip-higher") defaults to ``epsilon``; a larger value lets
    low-probability tokens with positive advantage grow further. ``advantages`` is ``[B]`` (one
    per sample, broadcast over its tokens) or ``[B, T]``.

    Aggregation over the masked tokens, with ``n_i`` the number of tokens of row ``i`` and ``w_i``
    the sample weight (1 when ``sample_weights`` is None); each normaliser is the sum of weights of
    the units being averaged, so the loss is a weighted mean whatever the weights' scale:

    * ``"token"`` (DAPO): ``sum_i w_i sum_t l_it / sum_i w_i n_i``; every token counts equally.
    * ``"sequence"`` (original GRPO): ``sum_i w_i mean_t(l_it) / sum_i w_i``; every sequence
      counts equally. Rows with no tokens are left out of both sums.
    * ``"seq-mean-token-sum"``: ``sum_i w_i sum_t l_it / sum_i w_i``.
    * ``"dr-grpo"`` (Dr.GRPO's constant normaliser): ``sum_i w_i sum_t l_it / (T * sum_i w_i)``,
      with ``T`` the padded row length (the generation budget), so the loss of a row does not
      shrink as its length grows.

    The optional KL penalty to a reference policy uses the k3 estimator per token,
    ``k3 = exp(d) - d - 1`` with ``d = ref_logp - logp_new``. It is non-negative and an unbiased
    estimate of ``KL(pi_new || pi_ref)`` for tokens drawn from ``pi_new`` (Schulman, "Approximating
    KL divergence", 2020); here tokens come from ``pi_old``, which is close. The penalty
    ``kl_coef * k3`` is aggregated like the policy term but without sample weights: the weights
    correct reward noise in the advantages, which the KL term does not contain.

    Masked positions may hold any value, even NaN or -inf; they never reach the loss or its
    gradient. ``logp_old`` and ``ref_logp`` are treated as constants.

    Stats (token means over masked tokens, unweighted): ``policy/clip_fraction`` (tokens whose
    gradient the clip removes), its ``_low`` (``rho < 1 - epsilon``, ``A < 0``) and ``_high``
    (``rho > 1 + epsilon_high``, ``A > 0``) parts, ``policy/approx_kl`` (k3 estimate of
    ``KL(pi_old || pi_new)``: ``mean(rho - 1 - log rho)``), ``policy/ratio_mean``,
    ``policy/pg_loss``, and with ``ref_logp`` ``policy/kl_ref`` (mean k3).
    """
    eps_low = epsilon
    eps_high = epsilon if epsilon_high is None else epsilon_high
    if not 0 <= eps_low < 1:
        raise ValueError(f"epsilon must be in [0, 1), got {eps_low}")
    if eps_high < 0:
        raise ValueError(f"epsilon_high must be >= 0, got {eps_high}")
    if aggregation not in _AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {_AGGREGATIONS}, got {aggregation!r}")
    if kl_coef < 0:
        raise ValueError(f"kl_coef must be >= 0, got {kl_coef}")
    if kl_coef > 0 and ref_logp is None:
        raise ValueError("kl_coef > 0 needs ref_logp")
    if logp_new.dim() != 2 or logp_old.shape != logp_new.shape:
        raise ValueError(f"logp_new and logp_old must both be [B, T], got {tuple(logp_new.shape)} "
                         f"and {tuple(logp_old.shape)}")

    valid = torch.ones_like(logp_new, dtype=torch.bool) if mask is None else mask.to(torch.bool)
    if valid.shape != logp_new.shape:
        raise ValueError(f"mask shape {tuple(valid.shape)} != logprob shape {tuple(logp_new.shape)}")
    if not valid.any():
        raise ValueError("mask selects no tokens")
    adv = advantages.to(logp_new.dtype)
    if adv.dim() == 1:
        adv = adv.unsqueeze(-1)
    adv = adv.expand_as(logp_new)
    weights = None if sample_weights is None else _check_weights(sample_weights, logp_new)

    # Zero the log-ratio on masked positions *before* exp: a NaN/-inf there would otherwise
    # poison the gradient even through torch.where (0 * inf = NaN in the backward pass).
    zero = torch.zeros_like(logp_new)
    log_ratio = torch.where(valid, logp_new - logp_old.detach(), zero)
    ratio = log_ratio.exp()
    adv = torch.where(valid, adv, zero)
    clipped_ratio = ratio.clamp(1 - eps_low, 1 + eps_high)
    per_token = -torch.minimum(ratio * adv, clipped_ratio * adv)
    pg_loss = _aggregate(per_token, valid, aggregation, weights)
    loss = pg_loss

    kl_ref = None
    if ref_logp is not None:
        d = torch.where(valid, ref_logp.detach() - logp_new, zero)
        kl_ref = d.exp() - d - 1
        if kl_coef > 0:
            loss = loss + kl_coef * _aggregate(kl_ref, valid, aggregation, None)

    with torch.no_grad():
        n_tokens = valid.sum()

        def token_mean(x: torch.Tensor) -> float:
            return float(torch.where(valid, x, zero).sum() / n_tokens)

        clip_low = (ratio < 1 - eps_low) & (adv < 0)
        clip_high = (ratio > 1 + eps_high) & (adv > 0)
        stats = {
            "policy/pg_loss": float(pg_loss),
            "policy/clip_fraction": token_mean((clip_low | clip_high).to(zero.dtype)),
            "policy/clip_fraction_low": token_mean(clip_low.to(zero.dtype)),
            "policy/clip_fraction_high": token_mean(clip_high.to(zero.dtype)),
            "policy/approx_kl": token_mean(ratio - 1 - log_ratio),
            "policy/ratio_mean": token_mean(ratio),
        }
        if kl_ref is not None:
            stats["policy/kl_ref"] = token_mean(kl_ref)
    return loss, stats


def _check_weights(sample_weights: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    w = sample_weights.detach().to(logp.dtype)
    if w.shape != logp.shape[:1]:
        raise ValueError(f"sample_weights must be [B]={tuple(logp.shape[:1])}, got {tuple(w.shape)}")
    if not torch.isfinite(w).all() or (w < 0).any() or not (w > 0).any():
        raise ValueError("sample_weights must be finite, non-negative and not all zero")
    return w


def _aggregate(
    per_token: torch.Tensor, valid: torch.Tensor, aggregation: str, weights: torch.Tensor | None
) -> torch.Tensor:
    """Reduce masked per-token values ``[B, T]`` to a scalar (normalisers in the caller's doc)."""
    w = torch.ones_like(per_token[:, 0]) if weights is None else weights
    row_sum = torch.where(valid, per_token, torch.zeros_like(per_token)).sum(dim=-1)
    n = valid.sum(dim=-1).to(per_token.dtype)
    if aggregation == "token":
        return (w * row_sum).sum() / (w * n).sum()
    if aggregation == "sequence":
        w = torch.where(n > 0, w, torch.zeros_like(w))  # an empty row has no mean to contribute
        return (w * row_sum / n.clamp(min=1)).sum() / w.sum()
    if aggregation == "seq-mean-token-sum":
        return (w * row_sum).sum() / w.sum()
    # "dr-grpo"
    return (w * row_sum).sum() / (per_token.shape[-1] * w.sum())
