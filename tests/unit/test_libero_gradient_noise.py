"""The gradient-noise estimators of ``bench/libero_gradient_noise.py`` on gradients of known signal and noise.

Tolerances: each estimate is compared with its true value within 4 standard errors of the
estimator at these sizes (computed for Gaussian noise), so a correct estimator fails about once
in 10^4 runs, and the generator is seeded.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch

from agents.base import Rollout
from agents.vla.policy import MiniVLAPolicy, VLAConfig
from wmrl_envs.libero.reward_model import SuccessRewardModel, load_reward_model
from wmrl_envs.libero.tasks import TASK_NAMES
from wmrl_envs.libero.trajectory import Trajectory


@pytest.fixture(scope="module")
def noise():
    return importlib.import_module("bench.libero_gradient_noise")


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
                                  for subset in noise.TRAINED},
              "real_mean_advantage": {**stats, "noise_scale_groups": 90.0, "trace_cov": 0.45},
              "real_state_baseline": {**stats, "noise_scale_groups": 30.0, "noise_scale_groups_lower": 12.0,
                                      "trace_cov": 0.4,
                                      "expected_cosine_with_mean_advantage": 0.97,
                                      "value_auroc_by_step": {"0": 0.6, "100": 0.8}}}
    md = noise.report([result, {**result, "policy": "bc-s3"}])
    # 0.45 / 0.75^2 = 0.8 is the mean-only noise at the baseline's signal; 0.4 / 0.8 = 0.5.
    assert "| bc-s6 | 120 (lower 60) | 90 (lower 60) | 30 (lower 12) | 0.50 | 0.503 / 0.503 | 0.97 | 0.60 / 0.80 |" in md
    assert "state baseline 12 ± 0; noise at equal signal, state baseline / mean-only, 0.5 ± 0." in md
    assert "| bc-s6 | 128 | 0.50 | 120 ± 30 (lower 60) |" in md and "| bc-s3 |" in md
    assert md.count("| 0.0001 |") == len(noise.TRAINED) and "Trained: biases and norms" in md
    assert md.index("| head.bias | 40 ± 0 | 2/2 |") < md.index("| head.weight | n/a | 0/2 |")


def _rollout(states: np.ndarray) -> Rollout:
    steps = len(states)
    return Rollout(task_id=TASK_NAMES[2], group_id=0, response=None, tokens={"state": torch.as_tensor(states)},
                   logp=torch.zeros(7 * steps), meta={"init_state": 3})


def _linear_model(rng: np.random.Generator) -> SuccessRewardModel:
    """A small linear success model of the shipped class (the shipped one saturates on made-up states)."""
    width = load_reward_model().mean.shape[0]
    return SuccessRewardModel([rng.normal(scale=0.05, size=(width, 1)).astype(np.float32), np.zeros(1, np.float32)],
                              np.zeros(width, np.float32), np.ones(width, np.float32))


def test_state_values_see_only_the_states_so_far(noise):
    # A baseline that read a later state would bias the gradient: V at step t must not change
    # when anything after step t does, and it is the model's reading of the prefix up to the last
    # reading point. The shipped model saturates on made-up states, so a small linear success
    # model of the same class reads them here.
    rng = np.random.default_rng(0)
    model = _linear_model(rng)
    states = rng.normal(scale=0.1, size=(60, 96)).astype(np.float32)
    later_changed = states.copy()
    later_changed[21:] += 1.0
    every = 20
    values, changed = (noise.state_values([_rollout(s)], every, model)[0] for s in (states, later_changed))
    assert values.shape == (60,) and 0.01 < values.min() and values.max() < 0.99
    np.testing.assert_array_equal(values[:21], changed[:21])  # read at steps 0 and 20
    assert not np.allclose(values[40:], changed[40:])  # the reading at step 40 sees states 21-40
    episode = Trajectory(2, 3, states[:, :8], states[:, 8:].reshape(60, 8, 11))
    for t in (0, 19, 20, 45):
        read_at = t - t % every
        assert values[t] == pytest.approx(model.predict([episode.prefix(read_at)])[0], rel=1e-6)


def test_state_baseline_advantages_repeat_each_step_over_its_tokens(noise):
    advantages = noise.state_baseline_advantages(np.array([1.0, 0.0]), [np.array([0.25, 0.5]), np.array([0.1])], 3)
    np.testing.assert_allclose(advantages[0], [0.75] * 3 + [0.5] * 3)
    np.testing.assert_allclose(advantages[1], [-0.1] * 3)


def test_auroc_matches_scikit_learn_with_ties(noise):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 200).astype(float)
    scores = np.round(labels * 0.3 + rng.uniform(size=200), 1)  # rounding makes ties
    assert noise.auroc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert math.isnan(noise.auroc(np.ones(200), scores))


def test_value_auroc_uses_the_episodes_still_running(noise):
    values = [np.array([0.9] * 150), np.array([0.1] * 520), np.array([0.2] * 520)]
    by_step = noise.value_auroc_by_step(np.array([1.0, 0.0, 1.0]), values)
    assert by_step["0"] == pytest.approx(1.0)  # 0.9 and 0.2 both above 0.1
    assert math.isnan(by_step["200"]) is False and by_step["200"] == pytest.approx(1.0)  # 0.2 > 0.1
    values[2][:] = 0.05
    assert noise.value_auroc_by_step(np.array([1.0, 0.0, 1.0]), values)["200"] == pytest.approx(0.0)


def test_jackknife_matches_refitting_without_each_group(noise):
    _, grads = planted(12, 30, signal_norm=1.5, sigma=0.5, seed=8)
    estimates = []
    for k in range(12):
        s, t = noise.noise_scale_terms(torch.cat([grads[:k], grads[k + 1:]]))
        estimates.append(t / s)
    mean = sum(estimates) / 12
    brute = math.sqrt(11 / 12 * sum((e - mean) ** 2 for e in estimates))
    assert noise.noise_scale(grads)["noise_scale_groups_se"] == pytest.approx(brute, rel=1e-9)


def test_noise_scale_bounds_bracket_the_estimate(noise):
    _, grads = planted(40, 50, signal_norm=1.0, sigma=1.0, seed=3)
    stats = noise.noise_scale(grads)
    lower, upper = noise.noise_scale_bounds(stats)
    assert lower == pytest.approx(stats["noise_scale_groups_lower"])
    assert lower < stats["noise_scale_groups"] < upper
    _, flat = planted(40, 50, signal_norm=0.0, sigma=1.0, seed=4)
    assert noise.noise_scale_bounds(noise.noise_scale(flat))[1] == math.inf  # no resolvable direction


def _episodes(rng: np.random.Generator, groups: int, size: int = 4, steps: int = 30) -> tuple[list[Rollout], list[int]]:
    from wmrl_envs.libero.embeddings import instruction_embeddings
    from wmrl_envs.libero.tasks import INSTRUCTIONS

    embedding = torch.as_tensor(instruction_embeddings([INSTRUCTIONS[2]])[0])
    rollouts, group_ids = [], []
    for g in range(groups):
        start = rng.normal(scale=0.1, size=96).astype(np.float32)  # a group shares its first state
        for _ in range(size):
            states = np.vstack([start, rng.normal(scale=0.1, size=(steps - 1, 96)).astype(np.float32)])
            rollout = _rollout(states)
            rollout.tokens.update(embedding=embedding, bins=torch.as_tensor(rng.integers(0, 256, (steps, 7))),
                                  image=None)
            rollout.group_id = g
            rollouts.append(rollout)
            group_ids.append(g)
    return rollouts, group_ids


def test_shaped_rewards_add_the_potentials_rise_to_the_success(noise):
    rng = np.random.default_rng(5)
    rollouts, group_ids = _episodes(rng, groups=3)
    real = np.array([1.0, 0.0, 0.0, 1.0] * 3)
    model = _linear_model(rng)
    rewards = noise.shaped_rewards(rollouts, real, model)
    first = MiniVLAPolicy.states_trajectory(rollouts[0])
    assert rewards["potential_start"][0] == pytest.approx(model.predict([first.prefix(0)])[0])
    assert rewards["potential_end"][0] == pytest.approx(model.predict([first])[0])
    assert len(set(rewards["potential_start"][:4])) == 1  # one first state per group
    np.testing.assert_allclose(rewards["shaped_raw"], real + rewards["potential_end"] - rewards["potential_start"])
    assert np.all(np.diff(rewards["shaped"][np.argsort(rewards["potential_end"])] - real[np.argsort(
        rewards["potential_end"])]) >= -1e-12)  # calibrated by a monotone map: the potential's order is kept


def test_measure_shaped_compares_both_rewards_on_the_same_groups(noise):
    rng = np.random.default_rng(6)
    rollouts, group_ids = _episodes(rng, groups=6)
    real = rng.integers(0, 2, len(rollouts)).astype(float)
    torch.manual_seed(0)
    policy = MiniVLAPolicy(VLAConfig(hidden=16, blocks=1))
    result = noise.measure_shaped(policy, "tiny", {"rollouts": rollouts, "group_ids": group_ids, "real": real,
                                                   "seed": 1}, _linear_model(rng))
    assert result["groups"] == 6 and result["episodes"] == 24
    for name in noise.SHAPED_REWARDS:
        stats = result[name]
        assert stats["groups"] == 6 and stats["noise_scale_groups_lower"] <= stats["noise_scale_groups_upper"]
    assert result["sparse"]["expected_cosine_with_sparse"] == pytest.approx(1.0)
    assert result["shaped_raw"]["silent_share"] == 0.0  # the raw potential separates every group's members
    expected_silent = np.mean([np.ptp(real[g * 4:(g + 1) * 4]) == 0 for g in range(6)])
    assert result["sparse"]["silent_share"] == pytest.approx(expected_silent)
    md = noise.shaped_report([result, {**result, "policy": "tiny-2"}])
    assert "| tiny | 24 |" in md and "| tiny-2 |" in md and "B, shaped (calibrated)" in md
