"""The gradient-noise estimators of ``bench/libero_gradient_noise.py`` on gradients of known signal and noise.

Tolerances: each estimate is compared with its true value within 4 standard errors of the
estimator at these sizes (computed for Gaussian noise), so a correct estimator fails about once
in 10^4 runs, and the generator is seeded.
"""

from __future__ import annotations

import math

import pytest
import torch


@pytest.fixture(scope="module")
def noise(bench_script):
    with bench_script("libero_gradient_noise") as module:
        yield module


def planted(n: int, dims: int, signal_norm: float, sigma: float, seed: int = 0, direction=None):
    gen = torch.Generator().manual_seed(seed)
    if direction is None:
        direction = torch.randn(dims, generator=gen, dtype=torch.float64)
    s = direction / direction.norm() * signal_norm
    return s, s + sigma * torch.randn(n, dims, generator=gen, dtype=torch.float64)


def test_signal_and_trace_are_unbiased(noise):
    n, dims, sigma = 400, 500, 1.0
    _, grads = planted(n, dims, signal_norm=2.0, sigma=sigma)
    signal, trace = noise.noise_scale_terms(grads)
    # Var of the signal estimate ~ (4|s|^2 sigma^2 / n + 2 P sigma^4 / n^2); of the trace ~ 2 P sigma^4 / n.
    assert signal == pytest.approx(4.0, abs=4 * math.sqrt(4 * 4.0 / n + 2 * dims / n**2))
    assert trace == pytest.approx(dims * sigma**2, abs=4 * math.sqrt(2 * dims / n))
    result = noise.noise_scale(grads)
    assert result["noise_scale_groups"] == pytest.approx(trace / signal)
    assert result["noise_scale_groups"] == pytest.approx(dims / 4.0, rel=0.25)
    assert 0 < result["noise_scale_groups_se"] < result["noise_scale_groups"]
    assert 0 < result["signal_norm2_se"] < signal
    assert result["noise_scale_groups_lower"] == pytest.approx(trace / (signal + 2 * result["signal_norm2_se"]))
    assert result["groups_with_gradient"] == n


def test_no_signal_gives_no_finite_noise_scale_or_a_huge_one(noise):
    _, grads = planted(50, 2000, signal_norm=0.0, sigma=1.0, seed=1)
    b = noise.noise_scale(grads)["noise_scale_groups"]
    # The signal estimate is ~0 +- its SE: B is infinite (estimate <= 0) or far above the batch.
    assert b == math.inf or b > 50


def test_zero_rows_count_as_groups_without_gradient(noise):
    _, grads = planted(10, 20, signal_norm=1.0, sigma=0.1, seed=2)
    grads[3] = 0
    assert noise.noise_scale(grads)["groups_with_gradient"] == 9
    with pytest.raises(ValueError, match="at least 2"):
        noise.noise_scale_terms(grads[:1])


def test_expected_cosine_ignores_each_streams_own_noise(noise):
    n, dims = 300, 400
    gen = torch.Generator().manual_seed(3)
    u, v = torch.randn(dims, generator=gen, dtype=torch.float64), torch.randn(dims, generator=gen, dtype=torch.float64)
    v = v - (v @ u) / (u @ u) * u  # orthogonal to u
    mixed = 0.6 * u / u.norm() + 0.8 * v / v.norm()  # cos(u, mixed) = 0.6
    _, a = planted(n, dims, signal_norm=1.0, sigma=0.5, seed=4, direction=u)
    _, b = planted(n, dims, signal_norm=3.0, sigma=2.0, seed=5, direction=mixed)
    assert noise.expected_cosine(a, b) == pytest.approx(0.6, abs=0.15)
    # The same-batch cosine of the sums is pulled toward 0 by the noise; the estimator is not.
    naive = float(torch.nn.functional.cosine_similarity(a.sum(0), b.sum(0), dim=0))
    assert naive < 0.5


def test_half_batch_agreement(noise):
    _, grads = planted(8, 100, signal_norm=1.0, sigma=0.0, seed=6)
    same = noise.half_batch_agreement(grads)
    assert same["half_batch_cosine"] == pytest.approx(1.0) and same["half_batch_sign_agreement"] == 1.0
    _, pure_noise = planted(400, 5000, signal_norm=0.0, sigma=1.0, seed=7)
    random = noise.half_batch_agreement(pure_noise)
    assert abs(random["half_batch_cosine"]) < 0.1
    assert random["half_batch_sign_agreement"] == pytest.approx(0.5, abs=4 * 0.5 / math.sqrt(5000))


def test_report_renders_each_policy_and_the_adam_probe(noise):
    stats = {"noise_scale_groups": 120.0, "noise_scale_groups_se": 30.0, "noise_scale_groups_lower": 60.0,
             "half_batch_cosine": 0.05,
             "half_batch_sign_agreement": 0.503, "by_parameter": {"head.bias": 40.0, "head.weight": math.inf}}
    wm = {"noise_scale_groups": 80.0, "noise_scale_groups_se": 20.0, "expected_cosine_with_real": 0.4}
    result = {"policy": "bc-s6", "episodes": 128, "silent_share_real": 0.5, "real": stats,
              "world_model": {"std": wm, "mean": wm},
              "adam_first_step": {subset: [{"learning_rate": lr, "loss_change": -1e-4, "loss_change_other_half": 2e-4,
                                            "kl_old_new": 1e-3} for lr in noise.PROBE_LEARNING_RATES]
                                  for subset in noise.TRAINED}}
    md = noise.report([result, {**result, "policy": "bc-s3"}])
    assert "| bc-s6 | 128 | 0.50 | 120 ± 30 (lower 60) |" in md and "| bc-s3 |" in md
    assert md.count("| 0.0001 |") == len(noise.TRAINED) and "Trained: biases and norms" in md
    assert md.index("| head.bias | 40 ± 0 | 2/2 |") < md.index("| head.weight | n/a | 0/2 |")


def test_jackknife_matches_refitting_without_each_group(noise):
    _, grads = planted(12, 30, signal_norm=1.5, sigma=0.5, seed=8)
    estimates = []
    for k in range(12):
        s, t = noise.noise_scale_terms(torch.cat([grads[:k], grads[k + 1:]]))
        estimates.append(t / s)
    mean = sum(estimates) / 12
    brute = math.sqrt(11 / 12 * sum((e - mean) ** 2 for e in estimates))
    assert noise.noise_scale(grads)["noise_scale_groups_se"] == pytest.approx(brute, rel=1e-9)
