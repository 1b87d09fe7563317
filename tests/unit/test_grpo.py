"""GRPO advantages and clipped surrogate loss against hand-computed values."""

import math

import numpy as np
import pytest
import torch

from trainers.grpo import clipped_surrogate_loss, group_advantages

torch.set_num_threads(1)

# Group "a" = rows 0, 2, 4 with rewards 1, 2, 6: mean 3, deviations -2, -1, 3, sum of squares 14.
# Group "b" = rows 1, 3 with rewards 0, 4: mean 2, deviations -2, 2, sum of squares 8.
REWARDS = [1.0, 0.0, 2.0, 4.0, 6.0]
IDS = ["a", "b", "a", "b", "a"]
DEV = [-2.0, -2.0, -1.0, 2.0, 3.0]


def _expected(std_a: float, std_b: float, eps: float) -> torch.Tensor:
    stds = [std_a, std_b, std_a, std_b, std_a]
    return torch.tensor([d / (s + eps) for d, s in zip(DEV, stds)])


# --------------------------------------------------------------------------- advantages


def test_std_mode_unbiased_matches_hand_values() -> None:
    adv = group_advantages(REWARDS, IDS)
    torch.testing.assert_close(adv, _expected(math.sqrt(14 / 2), math.sqrt(8 / 1), 1e-4))


def test_std_mode_biased_matches_hand_values() -> None:
    adv = group_advantages(REWARDS, IDS, std="biased", eps=1e-6)
    torch.testing.assert_close(adv, _expected(math.sqrt(14 / 3), math.sqrt(8 / 2), 1e-6))


def test_mean_mode_is_dr_grpo() -> None:
    adv = group_advantages(REWARDS, IDS, mode="mean")
    torch.testing.assert_close(adv, torch.tensor(DEV))


def test_interleaved_ids_follow_rows_not_positions() -> None:
    perm = [4, 1, 0, 3, 2]
    shuffled = group_advantages([REWARDS[i] for i in perm], [IDS[i] for i in perm])
    torch.testing.assert_close(shuffled, group_advantages(REWARDS, IDS)[perm])


def test_id_types_are_interchangeable() -> None:
    as_ints = group_advantages(torch.tensor(REWARDS), torch.tensor([7, 3, 7, 3, 7]))
    as_numpy = group_advantages(np.array(REWARDS), np.array([7, 3, 7, 3, 7]))
    as_tuples = group_advantages(REWARDS, [("t", 1), ("t", 2), ("t", 1), ("t", 2), ("t", 1)])
    expected = group_advantages(REWARDS, IDS)
    torch.testing.assert_close(as_ints, expected)
    torch.testing.assert_close(as_numpy.float(), expected)
    torch.testing.assert_close(as_tuples, expected)


@pytest.mark.parametrize("mode", ["std", "mean"])
@pytest.mark.parametrize("std", ["unbiased", "biased"])
def test_single_element_group_gets_zero(mode: str, std: str) -> None:
    # verl would give r / (1 + 1e-6) = 5.0 here; we give no signal without a baseline.
    adv = group_advantages([5.0, 1.0, 3.0], ["solo", "g", "g"], mode=mode, std=std)
    assert adv[0].item() == 0.0
    assert torch.isfinite(adv).all()


@pytest.mark.parametrize("mode", ["std", "mean"])
def test_zero_variance_group_is_exactly_zero(mode: str) -> None:
    # Seven float32 copies of 0.1 have a mean off by ~7e-9; verl's eps=1e-6 would turn it into ~0.007.
    rewards = torch.tensor([0.1] * 7 + [0.0, 1.0])
    adv = group_advantages(rewards, [0] * 7 + [1, 1], mode=mode, eps=1e-6)
    assert torch.equal(adv[:7], torch.zeros(7))
    assert adv[7] < 0 < adv[8]


def test_integer_rewards_give_float32_and_float64_is_kept() -> None:
    assert group_advantages(torch.tensor([0, 1, 1]), [0, 0, 0]).dtype == torch.float32
    assert group_advantages(torch.tensor([0.0, 1.0], dtype=torch.float64), [0, 0]).dtype == torch.float64


@pytest.mark.parametrize(
    ("rewards", "ids", "kwargs"),
    [
        ([1.0, 2.0], [0], {}),
        ([1.0, float("nan")], [0, 0], {}),
        ([[1.0, 2.0]], [0], {}),
        ([1.0, 2.0], [0, 0], {"mode": "rank"}),
        ([1.0, 2.0], [0, 0], {"std": "population"}),
        ([1.0, 2.0], [0, 0], {"eps": -1.0}),
    ],
)
def test_invalid_advantage_inputs_raise(rewards, ids, kwargs) -> None:
    with pytest.raises(ValueError):
        group_advantages(rewards, ids, **kwargs)


# --------------------------------------------------------------------------- clipped loss


def _logps(ratios: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """logp_new (requires grad) and logp_old whose exp-difference is ``ratios``."""
    old = torch.full((len(ratios), len(ratios[0])), -1.0)
    new = (old + torch.tensor(ratios).log()).requires_grad_()
    return new, old


@pytest.mark.parametrize(
    ("ratio", "advantage", "epsilon_high", "expected_loss", "clipped"),
    [
        (1.5, 1.0, None, -1.2, True),  # above 1 + eps with A > 0: clipped to 1.2
        (0.5, 1.0, None, -0.5, False),  # below 1 - eps with A > 0: unclipped (pessimistic min)
        (0.5, -1.0, None, 0.8, True),  # below 1 - eps with A < 0: clipped to 0.8
        (1.5, -1.0, None, 1.5, False),  # above 1 + eps with A < 0: unclipped
        (1.1, 2.0, None, -2.2, False),  # inside the range
        (1.5, 1.0, 0.28, -1.28, True),  # DAPO clip-higher moves the upper bound only
        (0.5, -1.0, 0.28, 0.8, True),
    ],
)
def test_single_token_surrogate(ratio, advantage, epsilon_high, expected_loss, clipped) -> None:
    new, old = _logps([[ratio]])
    loss, stats = clipped_surrogate_loss(new, old, torch.tensor([advantage]), epsilon_high=epsilon_high)
    assert loss.item() == pytest.approx(expected_loss, rel=1e-5)
    assert stats["policy/clip_fraction"] == float(clipped)
    loss.backward()
    # A clipped token contributes no gradient; an unclipped one d(-rho*A)/dlogp = -rho*A.
    expected_grad = 0.0 if clipped else -ratio * advantage
    assert new.grad.item() == pytest.approx(expected_grad, rel=1e-5)


def test_mixed_batch_values_and_stats() -> None:
    new, old = _logps([[1.5, 0.5], [0.5, 1.0]])
    adv = torch.tensor([1.0, -1.0])
    loss, stats = clipped_surrogate_loss(new, old, adv, aggregation="token")
    # Per-token: -1.2 (high clip), -0.5, 0.8 (low clip), 1.0.
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 1.0) / 4, rel=1e-5)
    assert stats["policy/clip_fraction"] == pytest.approx(0.5)
    assert stats["policy/clip_fraction_high"] == pytest.approx(0.25)
    assert stats["policy/clip_fraction_low"] == pytest.approx(0.25)
    assert stats["policy/ratio_mean"] == pytest.approx((1.5 + 0.5 + 0.5 + 1.0) / 4, rel=1e-5)
    k3 = [r - 1 - math.log(r) for r in (1.5, 0.5, 0.5, 1.0)]
    assert stats["policy/approx_kl"] == pytest.approx(sum(k3) / 4, rel=1e-5)
    assert "policy/kl_ref" not in stats


# Ratio 1 everywhere and per-token advantage -l makes the per-token loss exactly l.
PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
RAGGED = torch.tensor([[1, 1, 1], [1, 0, 0]])


@pytest.mark.parametrize(
    ("aggregation", "unweighted", "weighted"),
    [
        # weights (1, 3); row sums 6 and 4, row lengths 3 and 1, padded length 3.
        ("token", (6 + 4) / 4, (1 * 6 + 3 * 4) / (1 * 3 + 3 * 1)),
        ("sequence", (2 + 4) / 2, (1 * 2 + 3 * 4) / 4),
        ("seq-mean-token-sum", (6 + 4) / 2, (1 * 6 + 3 * 4) / 4),
        ("dr-grpo", (6 + 4) / (2 * 3), (1 * 6 + 3 * 4) / (4 * 3)),
    ],
)
def test_aggregation_on_ragged_mask(aggregation, unweighted, weighted) -> None:
    logp = torch.zeros(2, 3)
    loss, _ = clipped_surrogate_loss(logp, logp, -PER_TOKEN, mask=RAGGED, aggregation=aggregation)
    assert loss.item() == pytest.approx(unweighted)
    loss_w, _ = clipped_surrogate_loss(
        logp, logp, -PER_TOKEN, mask=RAGGED, aggregation=aggregation, sample_weights=torch.tensor([1.0, 3.0])
    )
    assert loss_w.item() == pytest.approx(weighted)


@pytest.mark.parametrize("aggregation", ["token", "sequence", "seq-mean-token-sum", "dr-grpo"])
def test_weights_are_scale_free_and_uniform_weights_change_nothing(aggregation) -> None:
    logp = torch.zeros(2, 3)
    plain, _ = clipped_surrogate_loss(logp, logp, -PER_TOKEN, mask=RAGGED, aggregation=aggregation)
    ones, _ = clipped_surrogate_loss(
        logp, logp, -PER_TOKEN, mask=RAGGED, aggregation=aggregation, sample_weights=torch.full((2,), 7.0)
    )
    a, _ = clipped_surrogate_loss(
        logp, logp, -PER_TOKEN, mask=RAGGED, aggregation=aggregation, sample_weights=torch.tensor([1.0, 3.0])
    )
    b, _ = clipped_surrogate_loss(
        logp, logp, -PER_TOKEN, mask=RAGGED, aggregation=aggregation,
        sample_weights=torch.tensor([10.0, 30.0]),
    )
    assert ones.item() == pytest.approx(plain.item())
    assert a.item() == pytest.approx(b.item())


def test_sample_weights_scale_each_rows_gradient() -> None:
    new = torch.zeros(2, 1, requires_grad=True)
    loss, _ = clipped_surrogate_loss(
        new, torch.zeros(2, 1), torch.tensor([1.0, 1.0]),
        aggregation="sequence", sample_weights=torch.tensor([1.0, 3.0]),
    )
    loss.backward()
    # d/dlogp of -(w_i * rho_i * A_i) / sum(w) at rho = 1.
    torch.testing.assert_close(new.grad, torch.tensor([[-0.25], [-0.75]]))


def test_kl_term_k3_value() -> None:
    logp = torch.zeros(1, 2)
    ref = torch.tensor([[math.log(2.0), 0.0]])  # d = ref - new = ln 2 and 0
    k3 = 2.0 - math.log(2.0) - 1.0  # e^d - d - 1 at d = ln 2; 0 at d = 0
    loss, stats = clipped_surrogate_loss(logp, logp, torch.zeros(1), ref_logp=ref, kl_coef=0.1)
    assert loss.item() == pytest.approx(0.1 * k3 / 2, rel=1e-6)
    assert stats["policy/kl_ref"] == pytest.approx(k3 / 2, rel=1e-6)
    assert stats["policy/pg_loss"] == 0.0


def test_kl_term_ignores_sample_weights_and_gives_gradient() -> None:
    new = torch.zeros(2, 1, requires_grad=True)
    ref = torch.tensor([[math.log(2.0)], [0.0]])
    loss, _ = clipped_surrogate_loss(
        new, torch.zeros(2, 1), torch.zeros(2), ref_logp=ref, kl_coef=1.0,
        sample_weights=torch.tensor([1.0, 9.0]),
    )
    assert loss.item() == pytest.approx((1 - math.log(2.0)) / 2, rel=1e-6)
    loss.backward()
    # d k3 / d logp_new = 1 - e^d: -1 for d = ln 2 (pull towards the reference), 0 where equal.
    torch.testing.assert_close(new.grad, torch.tensor([[-0.5], [0.0]]))


def test_gradient_flows_only_through_valid_unclipped_tokens() -> None:
    new, old = _logps([[1.0, 1.5, 1.0], [0.9, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    loss, _ = clipped_surrogate_loss(new, old, torch.tensor([1.0, -2.0]), mask=mask)
    loss.backward()
    grad = new.grad
    assert grad[0, 0] != 0 and grad[1].ne(0).all()
    assert grad[0, 1] == 0  # clipped (ratio 1.5 > 1.2, A > 0)
    assert grad[0, 2] == 0  # masked


def test_garbage_in_masked_positions_never_reaches_loss_or_grad() -> None:
    new = torch.tensor([[-0.5, float("-inf")], [-1.0, float("nan")]], requires_grad=True)
    old = torch.tensor([[-0.7, float("-inf")], [-1.0, 3.0]])
    ref = torch.tensor([[-0.6, float("nan")], [-1.2, float("inf")]])
    mask = torch.tensor([[1, 0], [1, 0]])
    adv = torch.tensor([[1.0, float("nan")], [-1.0, float("inf")]])
    loss, stats = clipped_surrogate_loss(new, old, adv, mask=mask, ref_logp=ref, kl_coef=0.05)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(new.grad).all() and new.grad[:, 1].eq(0).all()
    assert all(math.isfinite(v) for v in stats.values())


def test_long_trajectory_is_one_masked_row() -> None:
    # A 3-step episode with 4 action tokens per step is one row of 12 tokens sharing advantage.
    steps, tokens_per_step = 3, 4
    new = torch.zeros(1, steps * tokens_per_step, requires_grad=True)
    loss, _ = clipped_surrogate_loss(new, torch.zeros_like(new), torch.tensor([2.0]))
    loss.backward()
    torch.testing.assert_close(new.grad, torch.full_like(new, -2.0 / 12))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 1.0},
        {"epsilon_high": -0.1},
        {"aggregation": "batch"},
        {"kl_coef": 0.1},
        {"kl_coef": -1.0, "ref_logp": torch.zeros(1, 2)},
        {"mask": torch.zeros(1, 2)},
        {"mask": torch.ones(2, 2)},
        {"sample_weights": torch.tensor([-1.0])},
        {"sample_weights": torch.tensor([1.0, 1.0])},
    ],
)
def test_invalid_loss_inputs_raise(kwargs) -> None:
    logp = torch.zeros(1, 2)
    with pytest.raises(ValueError):
        clipped_surrogate_loss(logp, logp, torch.ones(1), **kwargs)
