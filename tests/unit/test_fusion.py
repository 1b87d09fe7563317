"""Inverse-variance fusion on synthetic gradient streams with known variances."""

import math

import pytest
import torch

import numpy as np

from trainers.fusion import estimate_c, fused_mean, per_sample_grad_variance
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring.fusion import FusionConfig, anchor_weight, sample_weights

torch.set_num_threads(1)

N_ANCHOR, N_WM = 8, 72  # ~10% anchors
SIGMA2, KAPPA, ETA2 = 0.5, 2.0, 0.75  # per-sample variance ratio 1 + kappa * eta2 = 2.5
RATIO = 1 + KAPPA * ETA2
MU = 0.3
REPS = 20_000  # relative standard error of a variance estimate: sqrt(2 / REPS) = 1%


def _streams(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """REPS Monte Carlo batches: anchor samples ~ N(mu, s2), world-model ~ N(mu, s2 (1 + k eta2))."""
    gen = torch.Generator().manual_seed(seed)
    anchor = MU + math.sqrt(SIGMA2) * torch.randn(N_ANCHOR, REPS, generator=gen, dtype=torch.float64)
    wm = MU + math.sqrt(SIGMA2 * RATIO) * torch.randn(N_WM, REPS, generator=gen, dtype=torch.float64)
    return anchor, wm


def _theory_var(w: float) -> float:
    """Variance of the fused mean with anchor weight w: (n_A w² v_A + n_W v_W) / (n_A w + n_W)²."""
    v_a, v_w = SIGMA2, SIGMA2 * RATIO
    return (N_ANCHOR * w**2 * v_a + N_WM * v_w) / (N_ANCHOR * w + N_WM) ** 2


def test_fused_estimator_beats_each_stream_and_reaches_inverse_variance_optimum() -> None:
    anchor, wm = _streams()
    fused = fused_mean(anchor, wm, w_anchor=RATIO)
    var_fused = fused.var().item()
    var_anchor_only = anchor.mean(dim=0).var().item()
    var_wm_only = wm.mean(dim=0).var().item()
    optimum = 1 / (N_ANCHOR / SIGMA2 + N_WM / (SIGMA2 * RATIO))

    assert fused.mean().item() == pytest.approx(MU, abs=4 * math.sqrt(optimum / REPS))  # unbiased
    assert var_fused < var_anchor_only and var_fused < var_wm_only
    assert var_fused == pytest.approx(optimum, rel=0.05)
    assert _theory_var(RATIO) == pytest.approx(optimum)


def test_exact_weight_minimises_variance_over_alternatives() -> None:
    anchor, wm = _streams(seed=1)  # common random numbers: every weight sees the same samples
    empirical = {w: fused_mean(anchor, wm, w).var().item() for w in (1.0, 1.75, RATIO, 4.0, 8.0)}
    for w, var in empirical.items():
        assert var == pytest.approx(_theory_var(w), rel=0.05)
        assert empirical[RATIO] <= var
    # Plain averaging (w = 1) is measurably worse than the inverse-variance weight.
    assert empirical[1.0] / empirical[RATIO] == pytest.approx(_theory_var(1.0) / _theory_var(RATIO), rel=0.02)
    assert _theory_var(1.0) / _theory_var(RATIO) > 1.05


def test_fused_mean_matches_hand_value() -> None:
    out = fused_mean(torch.tensor([[1.0, 0.0]]), torch.tensor([[4.0, 2.0], [7.0, 2.0]]), w_anchor=2.0)
    torch.testing.assert_close(out, torch.tensor([(2 * 1 + 4 + 7) / 4, (0 + 2 + 2) / 4]))


def test_per_sample_grad_variance_hand_value() -> None:
    grads = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    # Mean (1, 1); every squared deviation is 2; 8 / (N - 1).
    assert per_sample_grad_variance(grads) == pytest.approx(8 / 3)


def test_kappa_is_inverse_reward_variance_for_noisy_advantages() -> None:
    # g = A s with the world-model advantage A + e / sigma_r: the variance ratio is 1 + eta2 / sigma_r².
    gen = torch.Generator().manual_seed(2)
    n, p, sigma_r2, eta2 = 20_000, 16, 0.25, 0.2
    scores = torch.randn(n, p, generator=gen, dtype=torch.float64)
    adv = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    noise = math.sqrt(eta2) * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    v_anchor = per_sample_grad_variance(adv * scores)
    v_wm = per_sample_grad_variance((adv + noise / math.sqrt(sigma_r2)) * scores)
    assert v_wm / v_anchor == pytest.approx(1 + eta2 / sigma_r2, rel=0.04)
    # c = (ratio - 1) / eta2 magnifies the ratio's relative error by ratio / (ratio - 1) = 2.25.
    assert estimate_c(v_anchor, v_wm, eta2) == pytest.approx(1 / sigma_r2, rel=0.1)


def test_estimate_c_recovers_planted_ratio() -> None:
    gen = torch.Generator().manual_seed(3)
    n, p, eta2_cal = 2000, 64, 0.4
    anchor = 0.1 + torch.randn(n, p, generator=gen, dtype=torch.float64)
    wm = 0.1 + math.sqrt(RATIO) * torch.randn(n, p, generator=gen, dtype=torch.float64)
    c = estimate_c(per_sample_grad_variance(anchor), per_sample_grad_variance(wm), eta2_cal)
    assert c == pytest.approx((RATIO - 1) / eta2_cal, rel=0.04)
    assert 1 + c * eta2_cal == pytest.approx(RATIO, rel=0.02)


def test_paper_c_is_the_ratio_two_case() -> None:
    assert estimate_c(1.0, 2.0, 0.3) == pytest.approx(1 / 0.3)


@pytest.mark.parametrize(
    ("anchor_var", "wm_var", "eta2_cal"), [(2.0, 1.5, 0.3), (1.0, 3.0, 0.0), (1.0, 3.0, 1e-15)]
)
def test_estimate_c_degenerate_cases_fall_back_to_zero(anchor_var, wm_var, eta2_cal) -> None:
    assert estimate_c(anchor_var, wm_var, eta2_cal) == 0.0


@pytest.mark.parametrize(
    ("anchor_var", "wm_var", "eta2_cal"),
    [(0.0, 1.0, 0.1), (-1.0, 1.0, 0.1), (1.0, float("nan"), 0.1), (1.0, 1.0, -0.1), (1.0, 1.0, float("inf"))],
)
def test_estimate_c_rejects_invalid_measurements(anchor_var, wm_var, eta2_cal) -> None:
    with pytest.raises(ValueError):
        estimate_c(anchor_var, wm_var, eta2_cal)


def test_per_sample_grad_variance_needs_two_samples() -> None:
    with pytest.raises(ValueError):
        per_sample_grad_variance(torch.ones(1, 3))
    with pytest.raises(ValueError):
        per_sample_grad_variance(torch.ones(4))


@pytest.mark.parametrize(
    ("eta2", "c", "expected"),
    [(0.0, 5.0, 1.0), (0.5, 0.0, 1.0), (0.5, 2.0, 2.0), (0.5, 6.0, 4.0), (10.0, 1.0, 4.0)],
)
def test_anchor_weight_clips_between_one_and_w_max(eta2, c, expected) -> None:
    assert anchor_weight(eta2, c, w_max=4.0) == expected


@pytest.mark.parametrize(
    ("eta2", "c", "w_max"), [(-0.1, 1.0, 4.0), (0.1, -1.0, 4.0), (0.1, 1.0, 0.5), (math.nan, 1.0, 4.0)]
)
def test_anchor_weight_rejects_invalid_inputs(eta2, c, w_max) -> None:
    with pytest.raises(ValueError):
        anchor_weight(eta2, c, w_max)


@pytest.mark.parametrize("n_anchor", [0, 1, 3, 10, 16])
def test_sample_weights_mean_one_and_keep_the_ratio(n_anchor: int) -> None:
    is_anchor = np.arange(16) < n_anchor
    w = sample_weights(is_anchor, w_anchor=3.0)
    assert w.mean() == pytest.approx(1.0)
    if 0 < n_anchor < 16:
        assert (w[is_anchor] / w[~is_anchor][0]).tolist() == pytest.approx([3.0] * n_anchor)
    else:  # one stream only: plain GRPO weights
        np.testing.assert_allclose(w, np.ones(16))


def test_step_size_does_not_depend_on_anchor_share() -> None:
    # Identical per-sample gradients give the same fused step whatever the anchor share or weight.
    for n_anchor in (1, 4, 12):
        out = fused_mean(torch.full((n_anchor, 3), 0.5), torch.full((16 - n_anchor, 3), 0.5), w_anchor=4.0)
        torch.testing.assert_close(out, torch.full((3,), 0.5))


def test_sample_weights_reject_invalid_inputs() -> None:
    with pytest.raises(ValueError):
        sample_weights(np.zeros(0, dtype=bool), 2.0)
    with pytest.raises(ValueError):
        sample_weights(np.ones((2, 2), dtype=bool), 2.0)
    with pytest.raises(ValueError):
        sample_weights(np.ones(2, dtype=bool), 0.0)


def test_fusion_config_defaults_and_validation() -> None:
    cfg = FusionConfig()
    assert cfg.w_max == 4.0 and cfg.c is None
    assert FusionConfig(c=2.5, w_max=1.0).c == 2.5
    for bad in ({"w_max": 0.5}, {"w_max": math.inf}, {"c": -1.0}, {"c": math.nan}):
        with pytest.raises(ConfigError):
            FusionConfig(**bad)


def test_stream_variances_see_world_model_noise_under_std_normalised_advantages():
    """Unit-scale advantages hide noise from a plain spread comparison; the error term sees it."""
    from trainers.fusion import stream_variances
    from trainers.grpo import group_advantages

    gen = torch.Generator().manual_seed(0)
    groups = torch.arange(64).repeat_interleave(8)
    real = torch.rand(512, generator=gen)
    scores = torch.randn(512, 16, generator=gen)
    ratios = []
    for eta in (0.0, 0.1, 0.3):
        noisy = real + eta * torch.randn(512, generator=gen)
        a_real = group_advantages(real, groups.tolist())
        a_wm = group_advantages(noisy, groups.tolist())
        v_a, v_w = stream_variances(a_real[:, None] * scores, a_wm[:, None] * scores)
        ratios.append(v_w / v_a)
    assert ratios[0] == pytest.approx(1.0)
    assert ratios[0] < ratios[1] < ratios[2]
