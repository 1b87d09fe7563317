"""Inverse-variance fusion on synthetic gradient streams with known variances."""

import math

import numpy as np
import pytest
import torch

from trainers.fusion import estimate_c, fused_mean, per_sample_grad_variance
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring.fusion import FusionConfig, anchor_reward, anchor_weight, sample_weights

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
    assert cfg.rule == "none" and cfg.w_max == 4.0 and cfg.c is None  # the rule issue 28's grid chose
    assert FusionConfig("eta2", c=2.5, w_max=1.0).c == 2.5
    with pytest.raises(ConfigError, match="no effect under the 'none' rule"):
        FusionConfig(c=2.5)  # a slope the default rule never reads is refused, not ignored
    for bad in ({"w_max": 0.5}, {"w_max": math.inf}, {"rule": "eta2", "c": -1.0}, {"rule": "eta2", "c": math.nan}):
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


# -- the anchor-weight rules ----------------------------------------------------------------------------
# Synthetic GRPO batches: K groups of G samples, gradients g = mu + b_k + eps (group part V_b,
# within-group part V_w) and a world-model error d = a_k + delta (V_a, V_delta).
G, V_B, V_W, V_A, V_DELTA = 4, 0.6, 0.4, 0.05, 0.3


def _grouped_batch(groups: int, dims: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    per_dim = lambda v: math.sqrt(v / dims)  # noqa: E731  (total variance v over the dims)
    labels = [k for k in range(groups) for _ in range(G)]
    own = torch.as_tensor(labels)
    real = MU + per_dim(V_B) * rand(groups, dims)[own] + per_dim(V_W) * rand(groups * G, dims)
    error = per_dim(V_A) * rand(groups, dims)[own] + per_dim(V_DELTA) * rand(groups * G, dims)
    return real, real + error, labels


def test_grouped_variances_recover_the_group_level_weight_and_stay_below_the_per_sample_one() -> None:
    from trainers.fusion import grouped_stream_variances, stream_variances

    real, wm, labels = _grouped_batch(groups=4000, dims=8, seed=1)
    v_anchor, v_wm = grouped_stream_variances(real, wm, labels)
    assert v_anchor == pytest.approx(G * V_B + V_W, rel=0.05)
    assert v_wm / v_anchor == pytest.approx(1 + (G * V_A + V_DELTA) / (G * V_B + V_W), rel=0.03)
    per_sample = stream_variances(real, wm)
    assert per_sample[1] / per_sample[0] == pytest.approx(1 + (V_A + V_DELTA) / (V_B + V_W), rel=0.05)
    assert v_wm / v_anchor < per_sample[1] / per_sample[0]  # the anchor stream's sampling variance counts
    with pytest.raises(ValueError, match="two groups"):
        grouped_stream_variances(real[:G], wm[:G], labels[:G])


def test_the_group_level_weight_minimises_the_fused_means_variance_where_the_per_sample_one_does_not() -> None:
    """One anchor group and seven world-model groups per batch, scalar gradients: the variance of
    the fused mean over many batches is smallest at step 6's weight, not at step 2's."""
    gen = np.random.default_rng(0)
    reps, m_anchor, m_wm = 40_000, 1, 7

    def stream(groups: int, noisy: bool) -> np.ndarray:
        shape = (reps, groups)
        x = math.sqrt(V_B) * gen.standard_normal(shape)[..., None] + math.sqrt(V_W) * gen.standard_normal((*shape, G))
        if noisy:
            x = x + math.sqrt(V_A) * gen.standard_normal(shape)[..., None] + math.sqrt(V_DELTA) * gen.standard_normal((*shape, G))
        return x.reshape(reps, -1)

    anchors, wms = stream(m_anchor, False), stream(m_wm, True)

    def fused_variance(w: float) -> float:
        total = w * anchors.sum(axis=1) + wms.sum(axis=1)
        return float(np.var(total / (w * anchors.shape[1] + wms.shape[1])))

    grouped = 1 + (G * V_A + V_DELTA) / (G * V_B + V_W)
    per_sample = 1 + (V_A + V_DELTA) / (V_B + V_W)
    grid = np.linspace(1.0, 3.0, 41)
    best = grid[int(np.argmin([fused_variance(w) for w in grid]))]
    assert abs(best - grouped) <= 0.15 < abs(best - per_sample)
    assert fused_variance(grouped) < fused_variance(per_sample)


def test_group_disagreement_is_the_centred_gap_over_the_real_variance() -> None:
    from wmrl_envs.scoring.fusion import group_disagreement

    real = np.array([0.0, 1.0, 0.0, 1.0])  # variance 0.25
    assert group_disagreement(real + np.array([0.1, -0.1, 0.1, -0.1]), real) == pytest.approx(0.01 / 0.25)
    assert group_disagreement(real + 0.3, real) == pytest.approx(0.0)  # a shift GRPO cannot see
    assert group_disagreement(np.array([0.2, 0.5, 0.9]), np.full(3, 0.4)) is None  # no ranking to disagree with
    assert group_disagreement(np.array([0.2, np.nan, 1.2]), np.array([0.0, 0.5, 1.0])) == pytest.approx(0.0)  # NaN dropped


def test_the_paper_rule_fixes_c_at_the_target_weight_then_tracks_the_disagreement() -> None:
    from wmrl_envs.scoring.fusion import DisagreementTracker

    tracker = DisagreementTracker(FusionConfig(rule="paper"))
    real = np.array([0.0, 1.0, 0.0, 1.0])
    gap = lambda a: real + np.array([a, -a, a, -a])  # noqa: E731  (disagreement 4a²)
    tracker.observe(np.array([0.1, 0.7, 0.2, 0.9]), np.full(4, 0.5))  # a flat group is skipped
    for _ in range(31):
        tracker.observe(gap(0.1), real)
    assert tracker.weight() == 1.0 and tracker.c is None  # 31 groups: not calibrated yet
    tracker.observe(gap(0.1), real)
    assert tracker.c == pytest.approx(1 / 0.04) and tracker.weight() == pytest.approx(2.0)
    for _ in range(64):  # one half-life at twice the disagreement: the EMA is half way there
        tracker.observe(gap(0.1 * math.sqrt(2)), real)
    assert tracker.ema == pytest.approx(0.06) and tracker.weight() == pytest.approx(2.5)
    for _ in range(2000):  # ten times the error: the cap holds
        tracker.observe(gap(0.1 * math.sqrt(10)), real)
    assert tracker.weight() == 4.0
    restored = DisagreementTracker(FusionConfig(rule="paper"))
    restored.load_state_dict(tracker.state_dict())
    assert restored.weight() == tracker.weight()


def test_the_core_applies_the_configured_rule() -> None:
    from wmrl_envs.calibration import Calibrator, CalibratorConfig
    from wmrl_envs.scoring import HashSchedule, ScoredGroup, ScoreResult, ScoringCore

    def anchor_group(gid: int, real, wm) -> ScoredGroup:
        return ScoredGroup("t", gid, "anchor", [ScoreResult("t", "anchor", real_score=r, wm_score_raw=w, valid=True)
                                                 for r, w in zip(real, wm)])

    def core(**fusion) -> ScoringCore:
        return ScoringCore(HashSchedule(), Calibrator(CalibratorConfig(min_pairs_global=2)), FusionConfig(**fusion))

    real, wm = [0.2, 0.9, 0.5, 0.4], [0.6, 0.1, 0.5, 0.3]
    for rule, c in (("none", None), ("eta2", 3.0), ("sampling", 3.0)):
        scoring = core(rule=rule, c=c)
        weight = scoring.fuse([anchor_group(1, real, wm)])[0].samples[0].fusion_weight
        expected = 1.0 if rule == "none" else anchor_weight(scoring.calibrator.eta2, c, 4.0)
        assert weight == pytest.approx(expected)
    paper = core(rule="paper", calibrate_after=2)
    weights = [paper.fuse([anchor_group(g, real, wm)])[0].samples[0].fusion_weight for g in range(3)]
    assert weights[0] == 1.0 and weights[1] == pytest.approx(2.0)  # c fixed at the second group
    assert paper.state_dict()["disagreement"]["groups"] == 3
    with pytest.raises(ConfigError, match="rule must be one of"):
        FusionConfig(rule="inverse")


def test_anchor_reward_blends_real_with_the_calibrated_score() -> None:
    assert anchor_reward(0.8, 0.4, 1.0) == 0.8  # the paper's: the real score alone
    assert anchor_reward(0.8, 0.4, 0.0) == 0.4  # anchors as calibration data only
    assert anchor_reward(0.8, 0.4, 0.25) == pytest.approx(0.25 * 0.8 + 0.75 * 0.4)
    assert anchor_reward(0.8, None, 0.0) == 0.8  # no world-model score: the real one stands
    for bad in (-0.1, 1.5, math.nan, True, "0.5"):
        with pytest.raises(ConfigError, match="anchor_real_share"):
            FusionConfig(anchor_real_share=bad)


@pytest.mark.parametrize("debias", [True, False])
def test_the_core_blends_each_anchor_with_its_out_of_sample_world_model_score(debias: bool) -> None:
    from wmrl_envs.calibration import Calibrator, CalibratorConfig
    from wmrl_envs.scoring import HashSchedule, ScoredGroup, ScoreResult, ScoringCore

    def groups(gid: int) -> list[ScoredGroup]:
        return [ScoredGroup("t", gid, "anchor", [ScoreResult("t", "anchor", real_score=r, wm_score_raw=w, valid=True)
                                                  for r, w in zip([0.2, 0.9, 0.5, 0.4], [0.6, 0.1, 1.3, 0.3])])]

    def fused(share: float, rounds: int = 3) -> tuple[list[float], ScoringCore]:
        core = ScoringCore(HashSchedule(), Calibrator(CalibratorConfig(min_pairs_global=2)),
                           FusionConfig(anchor_real_share=share), debias=debias)
        for gid in range(rounds):
            out = core.fuse(groups(gid))[0]
        return [s.score for s in out.samples], core

    real, _ = fused(1.0)
    world, core = fused(0.0)
    half, _ = fused(0.5)
    assert real == [0.2, 0.9, 0.5, 0.4]
    expected = [0.6, 0.1, 1.0, 0.3]  # without debiasing: raw, clipped to the score range
    if debias:  # the last group's scores as the map fitted on the two groups before it gives them
        before = Calibrator(CalibratorConfig(min_pairs_global=2))
        before.add_pairs([0.6, 0.1, 1.3, 0.3] * 2, [0.2, 0.9, 0.5, 0.4] * 2, ["t"] * 8)
        expected = before.calibrate([0.6, 0.1, 1.3, 0.3], ["t"] * 4).tolist()
    assert world == pytest.approx(expected)
    assert half == pytest.approx([(r + w) / 2 for r, w in zip(real, expected)])
    assert core.calibrator.n_pairs == 12  # anchors still feed the calibrator

