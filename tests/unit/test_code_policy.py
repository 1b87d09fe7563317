"""Task features and the grammar policy: rollouts, exact log-probs, masking and a few GRPO steps."""

from pathlib import Path

import numpy as np
import pytest
import torch

from agents.code.features import FEATURE_DIM, FEATURE_NAMES, task_features
from agents.code.grammar import SLOTS, SolutionChoices, render_script
from agents.code.policy import SLOT_NAMES, GrammarPolicy, GrammarPolicyConfig, forced_choices
from trainers.grpo import clipped_surrogate_loss, group_advantages
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import extract_code
from wmrl_envs.task_spec import Task, TaskSpec

torch.set_num_threads(1)


def make_spec(task_id: str, metric: str, task_type: str, **kwargs) -> TaskSpec:
    return TaskSpec(id=task_id, name=task_id, suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                    metric=metric, task_type=task_type, **kwargs)


BINARY = make_spec("churn", "roc_auc", "binary", classes=("no", "yes"), target_columns=("p_yes",),
                   answer_columns=("label",), meta={"n_train": 4000, "n_features": 12, "n_categorical": 3})
REGRESSION = make_spec("houses", "rmse", "regression", meta={"n_train": 1460})
TEXT = make_spec("reviews", "accuracy", "text-multiclass", classes=("neg", "neu", "pos"))


def as_task(spec: TaskSpec) -> Task:
    root = Path("/nonexistent") / spec.id  # the grammar policy never reads task files
    return Task(spec=spec, root=root, description_path=root / "description.md", public_dir=root / "public",
                answers_path=root / "private" / "answers.csv")


# --------------------------------------------------------------------------- features


def test_features_encode_type_metric_and_known_statistics() -> None:
    x = dict(zip(FEATURE_NAMES, task_features(BINARY).tolist()))
    assert len(x) == FEATURE_DIM
    assert sum(v for k, v in x.items() if k.startswith("task_type/")) == 1 and x["task_type/binary"] == 1
    assert sum(v for k, v in x.items() if k.startswith("prediction/")) == 1 and x["prediction/probability"] == 1
    assert x["metric/higher_is_better"] == 1
    assert x["data/log_n_train"] == pytest.approx(np.log10(4001) / 6) and x["data/has_n_train"] == 1
    assert x["data/log_n_classes"] == pytest.approx(np.log10(2) / 2)
    assert x["data/categorical_fraction"] == pytest.approx(0.25) and x["data/has_categorical_fraction"] == 1
    assert x["modality/text"] == x["modality/image"] == 0


def test_missing_or_unusable_statistics_are_flagged_not_zeroed() -> None:
    x = dict(zip(FEATURE_NAMES, task_features(TEXT).tolist()))
    assert x["data/has_n_train"] == x["data/has_n_features"] == x["data/has_categorical_fraction"] == 0
    assert x["modality/text"] == 1 and x["prediction/label"] == 1
    assert x["data/log_n_classes"] == pytest.approx(np.log10(3) / 2)
    odd = make_spec("odd", "rmse", "regression", meta={"n_train": "many", "n_features": np.int64(7)})
    y = dict(zip(FEATURE_NAMES, task_features(as_task(odd)).tolist()))
    assert y["data/has_n_train"] == 0 and y["data/has_n_features"] == 1
    assert y["metric/higher_is_better"] == 0 and y["data/log_n_classes"] == 0


# --------------------------------------------------------------------------- policy


def test_config_is_validated() -> None:
    for bad in ({"temperature": 0.0}, {"hidden_size": 0}, {"init_scale": -1.0}):
        with pytest.raises(ConfigError):
            GrammarPolicyConfig(**bad)


def test_generate_returns_grouped_rollouts_with_exact_logps() -> None:
    policy = GrammarPolicy(GrammarPolicyConfig(seed=1))
    rollouts = policy.generate([as_task(BINARY), REGRESSION], group_size=3, group_ids=["g0", ("g", 1)],
                               generator=torch.Generator().manual_seed(0))
    assert [r.group_id for r in rollouts] == ["g0"] * 3 + [("g", 1)] * 3
    assert [r.task_id for r in rollouts] == ["churn"] * 3 + ["houses"] * 3
    for r in rollouts:
        assert r.tokens.dtype == torch.long and r.tokens.shape == (len(SLOTS),)
        assert r.logp.shape == (len(SLOTS),) and not r.logp.requires_grad and (r.logp <= 0).all()
        assert SolutionChoices.from_indices(r.tokens.tolist()).to_dict() == r.meta["choices"]

    logp, mask = policy.log_probs(rollouts)
    assert logp.shape == mask.shape == (6, len(SLOTS)) and logp.requires_grad
    torch.testing.assert_close(logp.detach(), torch.stack([r.logp for r in rollouts]), atol=1e-5, rtol=0)
    # Classification: target_transform and text are forced; regression: only text.
    target_transform, text = SLOT_NAMES.index("target_transform"), SLOT_NAMES.index("text")
    assert mask[0, target_transform] == mask[0, text] == 0 and mask[0].sum() == len(SLOTS) - 2
    assert mask[3, target_transform] == 1 and mask[3, text] == 0
    assert (logp.detach()[mask == 0] == 0).all()
    assert all(r.meta["choices"]["target_transform"] == "none" for r in rollouts[:3])


def test_sampling_is_reproducible_from_the_generator() -> None:
    policy = GrammarPolicy()
    first, second = (policy.generate([BINARY], 8, [0], torch.Generator().manual_seed(7)) for _ in range(2))
    assert [r.tokens.tolist() for r in first] == [r.tokens.tolist() for r in second]
    other = policy.generate([BINARY], 8, [0], torch.Generator().manual_seed(8))
    assert [r.tokens.tolist() for r in first] != [r.tokens.tolist() for r in other]


def test_untrained_policy_is_near_uniform() -> None:
    probs = GrammarPolicy().slot_probs(BINARY)
    for slot, options in SLOTS.items():
        if slot not in forced_choices(BINARY):
            assert max(abs(p - 1 / len(options)) for p in probs[slot].values()) < 0.02


def test_temperature_and_disabled_masking_keep_logps_exact() -> None:
    policy = GrammarPolicy(GrammarPolicyConfig(temperature=0.5, mask_irrelevant=False))
    rollouts = policy.generate([TEXT], 4, ["t"], torch.Generator().manual_seed(3))
    logp, mask = policy.log_probs(rollouts)
    assert (mask == 1).all() and (logp < 0).all()
    torch.testing.assert_close(logp.detach(), torch.stack([r.logp for r in rollouts]), atol=1e-5, rtol=0)


def test_response_holds_one_analysis_sentence_and_the_rendered_script() -> None:
    policy = GrammarPolicy(GrammarPolicyConfig(script_seed=5))
    rollout = policy.generate([BINARY], 1, [0], torch.Generator().manual_seed(0))[0]
    choices = SolutionChoices(**rollout.meta["choices"])
    analysis = rollout.response.split("```")[0]
    assert analysis.startswith("Tabular binary classification task with 4000 rows and 12 features")
    assert rollout.response.count("```python") == 1 and rollout.response.count("```") == 2
    script = extract_code(rollout.response)
    assert script == render_script(BINARY, choices, seed=5)
    compile(script, "<response>", "exec")


def test_greedy_is_deterministic_and_respects_forced_slots() -> None:
    policy = GrammarPolicy()
    choices = policy.greedy(BINARY)
    assert choices == policy.greedy(as_task(BINARY))
    assert choices.target_transform == "none" and choices.text == "tfidf_word"


def test_grpo_steps_raise_the_probability_of_the_rewarded_model() -> None:
    policy = GrammarPolicy(GrammarPolicyConfig(seed=0))
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    p_before = policy.slot_probs(BINARY)["model"]["hist_gb"]
    optimizer = torch.optim.Adam(policy.parameters(), lr=0.03)
    generator = torch.Generator().manual_seed(0)
    tasks = [BINARY, REGRESSION, TEXT]
    for step in range(15):
        rollouts = policy.generate(tasks, group_size=8, group_ids=[(step, i) for i in range(3)], generator=generator)
        rewards = torch.tensor([float(r.meta["choices"]["model"] == "hist_gb") for r in rollouts])
        advantages = group_advantages(rewards, [r.group_id for r in rollouts])
        logp, mask = policy.log_probs(rollouts)
        loss, _ = clipped_surrogate_loss(logp, torch.stack([r.logp for r in rollouts]), advantages, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    assert all(not torch.equal(before[name], p) for name, p in policy.named_parameters())
    for spec in tasks:
        assert policy.slot_probs(spec)["model"]["hist_gb"] > max(0.5, p_before)
    assert policy.greedy(BINARY).model == "hist_gb"


def test_state_dict_round_trip_reproduces_the_policy() -> None:
    trained, fresh = GrammarPolicy(GrammarPolicyConfig(seed=1)), GrammarPolicy(GrammarPolicyConfig(seed=2))
    assert fresh.slot_probs(BINARY) != trained.slot_probs(BINARY)
    fresh.load_state_dict(trained.state_dict())
    assert fresh.slot_probs(BINARY) == trained.slot_probs(BINARY)
