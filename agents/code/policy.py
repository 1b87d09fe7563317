"""The grammar policy: the CPU default code agent, a tiny network over the solution grammar.

Instead of writing code token by token, the policy picks one option per slot of
:data:`~agents.code.grammar.SLOTS` (model family, capacity, preprocessing, validation, ...) and
the grammar renders the complete script. A rollout is therefore ``T = len(SLOTS)`` decisions,
and the policy trains in minutes on two cores while facing the same rewards (execution, world
model, fusion) as an LLM policy would.

Network. A small MLP trunk embeds the task features (:func:`~agents.code.features.task_features`)
into the initial state of a GRU cell. The slots are decided in :data:`SLOTS` order; before each
decision the embedding of the previous choice is fed into the cell, so later slots depend on
earlier ones (capacity on the model family, scaling on the model, ...). Each slot has its own
linear head, initialised with tiny weights so the untrained policy is near uniform and explores.

Irrelevant slots (``config.mask_irrelevant``). Two slots cannot change what the rendered script
does on some tasks; they are forced instead of sampled, with log-prob 0 and mask 0, so no
gradient or noise comes from them (:func:`forced_choices`):

* ``target_transform`` on classification tasks: the renderer only applies it to regression
  targets. Forced to ``"none"``.
* ``text`` on non-text task types. Forced to ``"tfidf_word"``: it does nothing when the data
  has no free-text column, and still uses one if a tabular table happens to carry one.

Temperature. Logits are divided by ``config.temperature`` both when sampling and when
recomputing log-probs, so the ratio in the GRPO loss compares like with like: the log-probs are
always those of the distribution the choices were actually drawn from.

Bugs (``config.bug_operators``, opt-in). A CPU stand-in for an agent that writes failing code:
after the grammar slots, one more decision picks ``"none"`` or one of the given mutation
operators (:mod:`wmrl_envs.mutations`), and the rendered script is broken by
``mutate(script, operator, spec, config.script_seed)``. The decision is the last one: its head
reads the GRU state after the last grammar choice, so which bug is chosen may depend on the
solution (an operator only fits some scripts). Its log-prob is the rollout's last entry and
enters the GRPO ratio like any slot's; it is never forced. Where the chosen operator does not
apply to the script or task (:class:`~wmrl_envs.mutations.MutationNotApplicable`,
e.g. ``label_codes`` on a regression task) the script stays as rendered: the choice was made,
it just broke nothing (``meta["bug_applied"]`` is False). The bug head's bias starts at
``P(bug) = config.bug_rate``, shared equally by the operators; its parameters are created after
the grammar's, so a buggy policy's grammar slots start exactly where the plain policy's of the
same seed do, and it is the last layer, whose gradients the trainer's warmup compares. Without
operators the policy is the plain grammar policy, parameter for parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import nn

from agents.base import Rollout
from agents.code.features import FEATURE_DIM, as_spec, meta_count, modality, task_features
from agents.code.grammar import SLOTS, SolutionChoices, format_response, render_script
from wmrl_envs.errors import ConfigError
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.mutations import OPERATORS, MutationNotApplicable, mutate
from wmrl_envs.task_spec import Task, TaskSpec

SLOT_NAMES: tuple[str, ...] = tuple(SLOTS)
N_SLOTS: int = len(SLOT_NAMES)
#: The bug decision's option that injects nothing (options: this, then ``config.bug_operators``).
NO_BUG = "none"
#: The operators of the ``grammar-buggy`` policy: failures the static prover proves (the first
#: five) and failures only a run or a learned model sees (the rest). No timeout operators: each
#: of their runs costs the whole wall limit.
DEFAULT_BUG_OPERATORS: tuple[str, ...] = (
    "kaggle_column_names", "missing_module", "undefined_name", "misspelled_kwarg", "dataframe_append",
    "proba_matrix_column", "unfitted_transformer", "fit_order", "label_codes", "nan_predictions",
    "test_missing_column",
)

# Picks one option per row from the slot's log-probs [B, n_options] (sample, argmax or replay).
Picker = Callable[[torch.Tensor, int], torch.Tensor]


@dataclass
class GrammarPolicyConfig:
    """Configuration of :class:`GrammarPolicy`."""

    hidden_size: int = field(default=64, metadata={"help": "Width of the MLP trunk and of the GRU state."})
    embedding_dim: int = field(default=16, metadata={"help": "Size of the embedding of each previous choice."})
    temperature: float = field(
        default=1.0, metadata={"help": "Sampling temperature; log-probs are those of the tempered distribution."}
    )
    init_scale: float = field(
        default=0.01, metadata={"help": "Std of the slot heads' initial weights; small keeps the start near uniform."}
    )
    mask_irrelevant: bool = field(
        default=True, metadata={"help": "Force slots that cannot matter for a task (logp 0, mask 0)."}
    )
    script_seed: int = field(
        default=0, metadata={"help": "SEED written into every rendered script (fixed: the policy does not choose it)."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of the parameter initialisation."})
    bug_operators: tuple[str, ...] = field(default=(), metadata={
        "help": "Mutation operators the policy may inject after rendering: one extra decision, 'none' or one "
                "of these (empty: no bug decision, the plain grammar policy)."})
    bug_rate: float = field(default=0.5, metadata={
        "help": "Initial probability of choosing a bug, shared equally by the operators (with bug_operators)."})

    def __post_init__(self) -> None:
        self.bug_operators = tuple(self.bug_operators)  # a list from a JSON config
        unknown = [name for name in self.bug_operators if name not in OPERATORS]
        if unknown:
            raise ConfigError(f"unknown bug operator(s) {unknown}; known: {sorted(OPERATORS)}")
        if len(set(self.bug_operators)) != len(self.bug_operators):
            raise ConfigError(f"bug_operators has duplicates: {self.bug_operators}")
        if not 0.0 < self.bug_rate < 1.0:
            raise ConfigError(f"bug_rate must be in (0, 1), got {self.bug_rate}")
        if self.hidden_size < 1 or self.embedding_dim < 1:
            raise ConfigError(
                f"hidden_size and embedding_dim must be >= 1, got {self.hidden_size}, {self.embedding_dim}"
            )
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if self.init_scale < 0:
            raise ConfigError(f"init_scale must be >= 0, got {self.init_scale}")


def forced_choices(spec: TaskSpec) -> dict[str, str]:
    """Slots that cannot change the rendered script's behaviour on ``spec``, and their fixed value."""
    forced = {}
    if get_metric(spec.metric).prediction != "value":
        forced["target_transform"] = "none"
    if modality(spec) != "text":
        forced["text"] = "tfidf_word"
    return forced


# --------------------------------------------------------------------------- response text

_KINDS = {"binary": "binary classification", "multiclass": "multiclass classification", "regression": "regression"}
_MODELS = {
    "constant": "a constant baseline",
    "linear": "a regularised linear model",
    "knn": "k-nearest neighbours",
    "tree": "a decision tree",
    "random_forest": "a random forest",
    "extra_trees": "extra trees",
    "hist_gb": "histogram gradient boosting",
    "mlp": "a small neural network (MLP)",
}
_CATEGORICAL = {"drop": "categorical columns dropped", "onehot": "one-hot categoricals",
                "ordinal": "ordinal-encoded categoricals"}
_TEXT = {"drop": "text columns dropped", "tfidf_word": "word TF-IDF on text", "tfidf_char": "character TF-IDF on text"}
_VALIDATION = {"none": "no validation run", "holdout": "a 20% holdout", "cv3": "3-fold cross-validation"}


def describe_task(spec: TaskSpec) -> str:
    """One clause stating the task's facts, e.g. ``Tabular binary classification task with 4000 rows``."""
    kind = _KINDS.get(spec.task_type.split("-")[-1], spec.task_type)
    text = f"{modality(spec).capitalize()} {kind} task"
    counts = {noun: meta_count(spec.meta, key) for key, noun in (("n_train", "rows"), ("n_features", "features"))}
    sizes = [f"{int(n)} {noun}" for noun, n in counts.items() if n is not None]
    if sizes:
        text += " with " + " and ".join(sizes)
    metric = get_metric(spec.metric)
    return f"{text}, scored by {metric.name} ({'higher' if metric.higher_is_better else 'lower'} is better)"


def explain(spec: TaskSpec, choices: SolutionChoices) -> str:
    """The one-sentence analysis that opens the policy's response for ``choices``."""
    steps = [_CATEGORICAL[choices.categorical], f"{choices.impute} imputation"]
    if modality(spec) == "text":
        steps.append(_TEXT[choices.text])
    if choices.scale == "standard":
        steps.append("standardised numeric columns")
    if choices.target_transform == "log1p" and get_metric(spec.metric).prediction == "value":
        steps.append("a log1p-transformed target")
    return (
        f"{describe_task(spec)}; using {_MODELS[choices.model]} ({choices.capacity} capacity) with "
        f"{', '.join(steps)}, checked by {_VALIDATION[choices.validation]}."
    )


# --------------------------------------------------------------------------- policy


class _Decoded(NamedTuple):
    choices: torch.Tensor  # [B, D] option index per decision (the slots, then the bug if any)
    logp: torch.Tensor  # [B, D] log-prob of each choice (0 on forced slots)
    mask: torch.Tensor  # [B, D] 1 on decided slots, 0 on forced ones
    slot_logps: list[torch.Tensor]  # per decision, [B, n_options]: the full distribution


class GrammarPolicy(nn.Module):
    """Autoregressive policy over the grammar slots (see the module docstring).

    Implements :class:`agents.base.Policy`. Prompts are :class:`~wmrl_envs.task_spec.Task` or
    :class:`~wmrl_envs.task_spec.TaskSpec` objects. Each :class:`~agents.base.Rollout` has:

    * ``response``: the agent response (:func:`explain` then the script, see
      :func:`~agents.code.grammar.render_response`), the script broken by the chosen bug if the
      policy has bug operators;
    * ``tokens``: LongTensor ``[D]`` of option indices, in :data:`SLOT_NAMES` order, then the
      index of the bug decision in :attr:`bug_options` (``D = T + 1``) if the policy has bug operators;
    * ``logp``: ``[D]``, 0 on forced slots;
    * ``meta``: ``choices`` (slot -> option, for logging), plus ``features`` (the task
      feature vector) and ``slot_mask`` (``[D]``, 0 on forced slots), which :meth:`log_probs`
      needs to rescore the rollout; with bug operators also ``bug`` (the chosen option) and
      ``bug_applied`` (whether it changed the script).
    """

    offsets: torch.Tensor  # first embedding row of each slot's options (a buffer: follows .to(device))

    def __init__(self, config: GrammarPolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or GrammarPolicyConfig()
        hidden, emb = self.config.hidden_size, self.config.embedding_dim
        sizes = [len(options) for options in SLOTS.values()]
        #: Options of the bug decision (empty: the policy has none).
        self.bug_options: tuple[str, ...] = (NO_BUG, *self.config.bug_operators) if self.config.bug_operators else ()
        # Row 0 of the embedding is the start symbol; slot s's options follow at offsets[s].
        offsets = torch.tensor([1 + sum(sizes[:s]) for s in range(N_SLOTS)])
        with torch.random.fork_rng(devices=[]):  # seeded init without touching the global RNG
            torch.manual_seed(self.config.seed)
            self.trunk = nn.Sequential(nn.Linear(FEATURE_DIM, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
            self.choice_embedding = nn.Embedding(1 + sum(sizes), emb)
            self.cell = nn.GRUCell(emb, hidden)
            heads = [nn.Linear(hidden, n) for n in sizes]
            for head in heads:
                nn.init.normal_(head.weight, std=self.config.init_scale)
                nn.init.zeros_(head.bias)
            self.heads = nn.ModuleList(heads)
            # Created last, so the grammar's parameters are those of the plain policy of this seed.
            # No embedding for its options: nothing is decided after it.
            self.bug_head = nn.Linear(hidden, len(self.bug_options)) if self.bug_options else None
            if self.bug_head is not None:
                nn.init.normal_(self.bug_head.weight, std=self.config.init_scale)
                with torch.no_grad():  # log-probs times the temperature: P(bug) = bug_rate at the start
                    rate, n_ops = self.config.bug_rate, len(self.config.bug_operators)
                    prior = torch.tensor([1.0 - rate] + [rate / n_ops] * n_ops)
                    self.bug_head.bias.copy_(prior.log() * self.config.temperature)
        self.register_buffer("offsets", offsets, persistent=False)

    @property
    def device(self) -> torch.device:
        return self.offsets.device

    @property
    def n_decisions(self) -> int:
        """``D``: the grammar slots, plus the bug decision if the policy has bug operators."""
        return N_SLOTS + (self.bug_head is not None)

    # ------------------------------------------------------------------ core
    def _forced_indices(self, spec: TaskSpec) -> torch.Tensor:
        """``[D]`` option index of each forced slot, -1 where the policy decides (the bug always)."""
        forced = forced_choices(spec) if self.config.mask_irrelevant else {}
        slots = [SLOTS[s].index(forced[s]) if s in forced else -1 for s in SLOT_NAMES]
        return torch.tensor(slots + [-1] * (self.n_decisions - N_SLOTS))

    def _decode(self, features: torch.Tensor, forced: torch.Tensor, pick: Picker) -> _Decoded:
        """Run the decisions in order; ``pick`` chooses each free one's option from its log-probs."""
        features, forced = features.to(self.device), forced.to(self.device)
        state = self.trunk(features)
        previous = torch.zeros(features.shape[0], dtype=torch.long, device=self.device)  # start symbol
        heads = [*self.heads, *([self.bug_head] if self.bug_head is not None else [])]
        choices, logps, slot_logps = [], [], []
        for s, head in enumerate(heads):
            state = self.cell(self.choice_embedding(previous), state)
            logp_all = torch.log_softmax(head(state) / self.config.temperature, dim=-1)
            free = forced[:, s] < 0
            choice = torch.where(free, pick(logp_all, s), forced[:, s])
            chosen = logp_all.gather(1, choice[:, None]).squeeze(1)
            logps.append(torch.where(free, chosen, torch.zeros_like(chosen)))
            choices.append(choice)
            slot_logps.append(logp_all)
            if s < N_SLOTS:
                previous = choice + self.offsets[s]
        mask = (forced < 0).float()
        return _Decoded(torch.stack(choices, 1), torch.stack(logps, 1), mask, slot_logps)

    def _inputs(self, specs: Sequence[TaskSpec]) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.stack([task_features(s) for s in specs]),
                torch.stack([self._forced_indices(s) for s in specs]))

    def _respond(self, spec: TaskSpec, choices: SolutionChoices, bug: str) -> tuple[str, bool]:
        """The response for ``choices`` with ``bug`` injected, and whether the bug changed the script."""
        seed = self.config.script_seed
        script = render_script(spec, choices, seed)
        try:
            broken = mutate(script, bug, spec, seed)
        except MutationNotApplicable:  # nothing to break here: the script stays as rendered
            broken = script
        return format_response(explain(spec, choices), broken), broken != script

    # ------------------------------------------------------------------ Policy protocol
    def generate(self, prompts: Sequence[Task | TaskSpec], group_size: int, group_ids: Sequence[Hashable],
                 generator: torch.Generator) -> list[Rollout]:
        """Sample ``group_size`` solutions per task in one batch; rollouts of a prompt are contiguous."""
        if len(group_ids) != len(prompts):
            raise ConfigError(f"{len(prompts)} prompts but {len(group_ids)} group ids")
        if group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        specs = [as_spec(p) for p in prompts]
        features, forced = (x.repeat_interleave(group_size, dim=0) for x in self._inputs(specs))

        def sample(logp: torch.Tensor, slot: int) -> torch.Tensor:
            # Sampling on the CPU keeps draws reproducible from a CPU generator whatever the device.
            return torch.multinomial(logp.exp().cpu(), 1, generator=generator).squeeze(1).to(logp.device)

        with torch.no_grad():
            out = self._decode(features, forced, sample)
        rollouts = []
        for row in range(len(specs) * group_size):
            spec = specs[row // group_size]
            tokens = out.choices[row].cpu()
            choices = SolutionChoices.from_indices(tokens[:N_SLOTS].tolist())
            meta = {"choices": choices.to_dict(), "features": features[row], "slot_mask": out.mask[row].cpu()}
            bug = self.bug_options[int(tokens[N_SLOTS])] if self.bug_options else NO_BUG
            response, applied = self._respond(spec, choices, bug)
            if self.bug_options:
                meta.update(bug=bug, bug_applied=applied)
            rollouts.append(Rollout(task_id=spec.id, group_id=group_ids[row // group_size], response=response,
                                    tokens=tokens, logp=out.logp[row].cpu(), meta=meta))
        return rollouts

    def log_probs(self, rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable ``[B, D]`` log-probs of the rollouts' choices and their mask (0 on forced slots)."""
        tokens = torch.stack([r.tokens for r in rollouts]).to(self.device)
        features = torch.stack([r.meta["features"] for r in rollouts])
        slot_mask = torch.stack([r.meta["slot_mask"] for r in rollouts]).to(self.device)
        forced = torch.where(slot_mask > 0, torch.full_like(tokens, -1), tokens)
        out = self._decode(features, forced, lambda logp, s: tokens[:, s])
        return out.logp, out.mask

    # ------------------------------------------------------------------ evaluation helpers
    def greedy(self, task: Task | TaskSpec) -> SolutionChoices:
        """The most likely option of each slot in turn (deterministic; for evaluation)."""
        features, forced = self._inputs([as_spec(task)])
        with torch.no_grad():
            out = self._decode(features, forced, lambda logp, s: logp.argmax(dim=-1))
        return SolutionChoices.from_indices(out.choices[0, :N_SLOTS].tolist())

    def slot_probs(self, task: Task | TaskSpec, choices: SolutionChoices | None = None) -> dict[str, dict[str, float]]:
        """Each slot's option probabilities given the earlier slots of ``choices`` (default: greedy).

        Forced slots report probability 1 for their fixed option. With bug operators, ``"bug"``
        holds the bug decision's probabilities after ``choices``.
        """
        spec = as_spec(task)
        path = choices or self.greedy(spec)
        indices = torch.tensor([[SLOTS[s].index(getattr(path, s)) for s in SLOT_NAMES]], device=self.device)
        features, forced = self._inputs([spec])
        with torch.no_grad():  # the bug decision is last: its own pick changes no probability
            out = self._decode(features, forced, lambda logp, s: indices[:, s] if s < N_SLOTS else logp.argmax(-1))
        probs: dict[str, dict[str, float]] = {}
        for s, slot in enumerate(SLOT_NAMES):
            if out.mask[0, s]:
                dist = out.slot_logps[s][0].exp()
            else:
                dist = nn.functional.one_hot(out.choices[0, s], len(SLOTS[slot])).float()
            probs[slot] = dict(zip(SLOTS[slot], dist.tolist()))
        if self.bug_options:
            probs["bug"] = dict(zip(self.bug_options, out.slot_logps[N_SLOTS][0].exp().tolist()))
        return probs

    def extra_repr(self) -> str:
        bugs = f", bug_operators={len(self.config.bug_operators)}" if self.bug_options else ""
        return f"slots={N_SLOTS}, features={FEATURE_DIM}, temperature={self.config.temperature}{bugs}"
