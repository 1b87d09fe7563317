"""The grammar policy's bug decision: exact log-probs, gradient, rendering through the real mutations."""

from __future__ import annotations

import pytest
import torch

from agents.base import pad_logps
from agents.code.grammar import SLOTS, SolutionChoices, render_script
from agents.code.policy import DEFAULT_BUG_OPERATORS, NO_BUG, GrammarPolicy, GrammarPolicyConfig
from trainers.grpo import clipped_surrogate_loss, group_advantages
from trainers.policies import make_policy
from wmrl_envs.errors import ConfigError
from wmrl_envs.mutations import OPERATORS, mutate
from wmrl_envs.scoring import extract_code
from wmrl_envs.tasks import get_task

torch.set_num_threads(1)

# A label task, a probability task and a regression task (label_codes applies to the first only).
TASKS = ("titanic-survival", "breast-cancer-diagnosis", "used-car-prices")
T = len(SLOTS)


@pytest.fixture(scope="module")
def tasks():
    return [get_task(t) for t in TASKS]


def buggy(seed: int = 0, **kwargs) -> GrammarPolicy:
    return GrammarPolicy(GrammarPolicyConfig(seed=seed, bug_operators=DEFAULT_BUG_OPERATORS, **kwargs))


def test_config_is_validated() -> None:
    for bad in ({"bug_operators": ("no_such_bug",)}, {"bug_operators": ("missing_module", "missing_module")},
                {"bug_operators": (NO_BUG,)}, {"bug_operators": ("missing_module",), "bug_rate": 0.0},
                {"bug_rate": 1.0}):
        with pytest.raises(ConfigError):
            GrammarPolicyConfig(**bad)
    assert GrammarPolicyConfig(bug_operators=["missing_module"]).bug_operators == ("missing_module",)
    assert set(DEFAULT_BUG_OPERATORS) <= set(OPERATORS)
    assert not any(OPERATORS[name].status == "timeout" for name in DEFAULT_BUG_OPERATORS)


def test_without_operators_the_policy_is_the_plain_one(tasks) -> None:
    plain = GrammarPolicy(GrammarPolicyConfig(seed=3))
    empty = GrammarPolicy(GrammarPolicyConfig(seed=3, bug_operators=()))
    assert empty.bug_head is None and empty.n_decisions == T
    state, other = plain.state_dict(), empty.state_dict()
    assert state.keys() == other.keys() and all(torch.equal(state[k], other[k]) for k in state)
    a, b = (p.generate(tasks, 3, [0, 1, 2], torch.Generator().manual_seed(5)) for p in (plain, empty))
    assert [r.response for r in a] == [r.response for r in b]
    assert all(r.tokens.shape == (T,) and "bug" not in r.meta for r in b)
    # The buggy policy's grammar parameters are the plain policy's of the same seed.
    bug_state = buggy(seed=3).state_dict()
    assert set(bug_state) - set(state) == {"bug_head.weight", "bug_head.bias"}
    assert all(torch.equal(state[k], bug_state[k]) for k in state)
    assert make_policy("grammar-buggy", seed=3).config.bug_operators == DEFAULT_BUG_OPERATORS


def test_recomputed_logps_equal_the_sampled_ones(tasks) -> None:
    policy = buggy(seed=1, temperature=0.7)
    rollouts = policy.generate(tasks, 8, ["a", "b", "c"], torch.Generator().manual_seed(0))
    for r in rollouts:
        assert r.tokens.shape == r.logp.shape == (T + 1,)
        assert r.meta["bug"] == policy.bug_options[int(r.tokens[-1])]
        assert r.meta["slot_mask"][-1] == 1 and r.logp[-1] < 0  # the bug decision is never forced
    logp, mask = policy.log_probs(rollouts)
    assert logp.shape == mask.shape == (24, T + 1) and logp.requires_grad
    torch.testing.assert_close(logp.detach(), torch.stack([r.logp for r in rollouts]), atol=1e-5, rtol=0)
    # As the trainer builds the old log-probs: same shape and mask as the recomputed ones.
    logp_old, mask_old = pad_logps([r.logp for r in rollouts])
    assert torch.equal(mask_old, torch.ones_like(mask_old))
    torch.testing.assert_close(logp.detach(), logp_old, atol=1e-5, rtol=0)


def test_the_bug_head_starts_at_the_bug_rate_and_gets_gradient(tasks) -> None:
    for temperature in (1.0, 0.5):
        probs = buggy(bug_rate=0.3, temperature=temperature).slot_probs(tasks[0])["bug"]
        assert probs[NO_BUG] == pytest.approx(0.7, abs=0.01)
        assert all(probs[op] == pytest.approx(0.3 / len(DEFAULT_BUG_OPERATORS), abs=0.01)
                   for op in DEFAULT_BUG_OPERATORS)
    policy = buggy(seed=0)
    rollouts = policy.generate(tasks, 8, [0, 1, 2], torch.Generator().manual_seed(1))
    rewards = torch.tensor([float(r.meta["bug"] == NO_BUG) for r in rollouts])
    logp, mask = policy.log_probs(rollouts)
    loss, _ = clipped_surrogate_loss(logp, torch.stack([r.logp for r in rollouts]),
                                     group_advantages(rewards, [r.group_id for r in rollouts]), mask)
    loss.backward()
    assert policy.bug_head.weight.grad.abs().sum() > 0 and policy.bug_head.bias.grad.abs().sum() > 0


def test_grpo_steps_learn_to_avoid_bugs(tasks) -> None:
    """Failing is a choice: rewarding clean scripts drives P(bug) down on every task."""
    policy = buggy(seed=0)
    before = [policy.slot_probs(t)["bug"][NO_BUG] for t in tasks]
    optimizer = torch.optim.Adam(policy.parameters(), lr=0.03)
    generator = torch.Generator().manual_seed(0)
    for step in range(10):
        rollouts = policy.generate(tasks, 8, [(step, i) for i in range(3)], generator)
        rewards = torch.tensor([float(not r.meta["bug_applied"]) for r in rollouts])
        logp, mask = policy.log_probs(rollouts)
        loss, _ = clipped_surrogate_loss(logp, torch.stack([r.logp for r in rollouts]),
                                         group_advantages(rewards, [r.group_id for r in rollouts]), mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = [policy.slot_probs(t)["bug"][NO_BUG] for t in tasks]
    assert all(a > max(0.8, b) for a, b in zip(after, before))


def test_sampling_is_deterministic(tasks) -> None:
    policy = buggy(seed=2)
    first, second = (policy.generate(tasks, 6, [0, 1, 2], torch.Generator().manual_seed(9)) for _ in range(2))
    assert [(r.tokens.tolist(), r.response) for r in first] == [(r.tokens.tolist(), r.response) for r in second]


def test_rendering_applies_the_chosen_mutation(tasks) -> None:
    policy = buggy(seed=0, script_seed=4)
    rollouts = policy.generate(tasks, 16, [0, 1, 2], torch.Generator().manual_seed(2))
    seen = set()
    for r in rollouts:
        task = next(t for t in tasks if t.id == r.task_id)
        clean = render_script(task.spec, SolutionChoices(**r.meta["choices"]), seed=4)
        script = extract_code(r.response)
        if r.meta["bug_applied"]:
            assert script == mutate(clean, r.meta["bug"], task.spec, 4) != clean
            seen.add(r.meta["bug"])
        else:
            assert script == clean
    assert len(seen) >= 5


def test_an_operator_that_does_not_apply_leaves_the_script_as_rendered(tasks) -> None:
    """label_codes breaks class labels; a regression task has none, so the script stays valid."""
    policy = GrammarPolicy(GrammarPolicyConfig(bug_operators=("label_codes",), bug_rate=0.999))
    rollouts = policy.generate(tasks, 4, [0, 1, 2], torch.Generator().manual_seed(0))
    by_task = {t: [r for r in rollouts if r.task_id == t] for t in TASKS}
    assert all(r.meta["bug"] == "label_codes" for r in rollouts)
    assert all(r.meta["bug_applied"] for r in by_task["titanic-survival"])
    regression = tasks[2].spec
    for r in by_task["used-car-prices"]:
        assert not r.meta["bug_applied"]
        assert extract_code(r.response) == render_script(regression, SolutionChoices(**r.meta["choices"]))


# --------------------------------------------------------------------------- the run's world model


def test_a_run_chooses_its_surrogate_artefact_and_can_turn_every_proof_off() -> None:
    from trainers.cli import build_parser
    from trainers.families.code import make_scorer
    from trainers.wmrl_config import WMRLConfig
    from wmrl_envs.world_models.surrogate import default_path

    config = WMRLConfig.from_flat(policy="grammar-buggy", world_model_path=str(default_path()), prove=False)
    scorer = make_scorer(config)
    assert scorer.prove is False and scorer.world_model.prover is None  # the scorer's proofs and the model's
    assert make_scorer(WMRLConfig.from_flat()).world_model.prover is not None  # default: proofs on
    with pytest.raises(ConfigError, match="world_model_path"):
        WMRLConfig.from_flat(world_model="llm", world_model_path="x.joblib")
    # A config written before these fields loads with their defaults.
    data = config.to_dict()
    del data["family"]["world_model_path"], data["family"]["prove"]
    assert WMRLConfig.from_dict(data).family.prove is True
    args = build_parser().parse_args(["train", "--policy", "grammar-buggy", "--no-prove", "--world-model-path", "a"])
    assert (args.policy, args.prove, args.world_model_path) == ("grammar-buggy", False, "a")
