"""What the code families (MLE-Dojo, DSBench) share: the trainer's adapter and the evaluations.

:class:`CodeTaskAdapter` generates a step's responses in one batch and scores every group
through the run's scoring core, whose :class:`~wmrl_envs.scoring.CodeScorer` world-model scores
all of them in one batch and executes the anchors in one parallel fan-out: the same path as
``gym.make(..., reward="fused")``.
"""

from __future__ import annotations

import argparse
from collections.abc import Hashable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from agents.base import Policy, Rollout
from agents.code.diagnostics import choice_task_dependence, dependence_markdown
from trainers.adapters import GroupOutcome, PendingAnchors, by_group
from trainers.evaluate import EvalConfig, evaluate_policies, markdown_table, select_tasks, write_reports
from trainers.families import FamilyProfile
from trainers.ledger import ComputeLedger
from trainers.policies import GRAMMAR_POLICIES, policy_responder, responder_from_spec
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import CodeGroup, CodeScorer, ScoredGroup, ScoringCore, extract_code
from wmrl_envs.tasks import LITE


class CodeTaskAdapter:
    """Code agents on a code family's tasks: generate in one batch, score through the core."""

    def __init__(self, env_id: str, suite: str, split: str = "train", task_ids: Sequence[str] | None = None) -> None:
        self.tasks = {t.id: t for t in select_tasks(env_id, suite, split, task_ids)}
        self.task_ids = sorted(self.tasks)

    def collect(self, policy: Policy, task_ids: Sequence[str], group_ids: Sequence[Hashable], group_size: int,
                generator: torch.Generator, ledger: ComputeLedger, core: ScoringCore) -> list[GroupOutcome]:
        grouped, groups = self._generate(policy, task_ids, group_ids, group_size, generator, ledger)
        scored = core.score(groups)
        charge(ledger, scored)
        return [GroupOutcome(grouped[s.group_id], s) for s in scored]

    def collect_async(self, policy: Policy, task_ids: Sequence[str], group_ids: Sequence[Hashable],
                      group_size: int, generator: torch.Generator, ledger: ComputeLedger, core: ScoringCore, *,
                      step: int, timeout_s: float | None = None) -> tuple[list[GroupOutcome], PendingAnchors | None]:
        """As :meth:`collect`, but the anchor groups' runs are submitted, not awaited: the step's
        other groups, scored and charged, and its anchors in flight (None without any)."""
        grouped, groups = self._generate(policy, task_ids, group_ids, group_size, generator, ledger)
        scored, flight = core.score_async(groups, tag=step, timeout_s=timeout_s)
        charge(ledger, scored)
        pending = None if flight is None else PendingAnchors(
            step, {g.group_id: grouped[g.group_id] for g in flight.scored}, flight)
        return [GroupOutcome(grouped[s.group_id], s) for s in scored], pending

    @staticmethod
    def land(pending: PendingAnchors, ledger: ComputeLedger, core: ScoringCore,
             wait: bool = False) -> list[GroupOutcome] | None:
        """A pending step's anchor groups, fused and charged, once their runs returned (``wait``:
        block until then); None while some are under way."""
        landed = core.land(pending.flight, wait)
        if landed is None:
            return None
        charge(ledger, landed)
        return pending.outcomes()

    def _generate(self, policy: Policy, task_ids: Sequence[str], group_ids: Sequence[Hashable], group_size: int,
                  generator: torch.Generator, ledger: ComputeLedger
                  ) -> tuple[dict[Hashable, list[Rollout]], list[CodeGroup]]:
        """The step's rollouts in one batch, by group, and the groups' scripts."""
        tasks = [self.tasks[t] for t in task_ids]
        with ledger.measure("generation", count=len(tasks) * group_size), torch.no_grad():
            rollouts = policy.generate(tasks, group_size, list(group_ids), generator)
        grouped = by_group(rollouts, group_ids)
        return grouped, [CodeGroup(task, [extract_code(str(r.response)) for r in grouped[g]], g)
                         for task, g in zip(tasks, group_ids)]

    def close(self) -> None:
        pass


def charge(ledger: ComputeLedger, groups: Sequence[ScoredGroup]) -> None:
    """Charge the groups' world-model and execution seconds to the ledger."""
    samples = [s for g in groups for s in g.samples]
    # A proof settles a script without running it, on any stream: world-model time.
    predicted = [s for s in samples if s.wm_score_raw is not None or s.proved
                 or (s.stream != "real" and s.infra_failure)]
    executed = [s for s in samples if s.executed]
    if predicted:
        ledger.add("world_model", sum(s.cost.get("world_model_cpu_s", 0.0) for s in predicted),
                   sum(s.cost.get("world_model_s", 0.0) for s in predicted), count=len(predicted))
    if executed:
        ledger.add("execution", sum(s.cost.get("execution_cpu_s", 0.0) for s in executed),
                   sum(s.cost.get("execution_s", 0.0) for s in executed), count=len(executed))


#: Sampled solutions per task behind the task-dependence diagnostic of a grammar policy.
DEPENDENCE_SAMPLES = 64


def scorer_options(config) -> dict[str, Any]:
    """The :class:`CodeScorer` keyword options of a run (a :class:`~trainers.wmrl_config.WMRLConfig`);
    benchmarks build their own scorer class from them."""
    family = config.family
    return {"world_model": family.world_model, "world_model_kwargs": family.world_model_kwargs(),
            "executor": family.executor, "workers": family.workers, "prove": family.prove}


def make_scorer(config) -> CodeScorer:
    """The code scorer of a training run (a :class:`~trainers.wmrl_config.WMRLConfig`)."""
    return CodeScorer(**scorer_options(config))


def make_adapter(env_id: str, suite: str, config) -> CodeTaskAdapter:
    return CodeTaskAdapter(env_id, suite, config.family.split, config.family.task_ids)


def heldout(env_id: str, suite: str, config, untrained, trained, k: int, task_ids) -> tuple[str, str, list[dict]]:
    """Held-out avg@k of the untrained and trained code policy: (title, Markdown, JSON payload)."""
    family = config.family
    eval_config = EvalConfig(env_id=env_id, suite=suite, split="heldout", k=k, executor=family.executor,
                             workers=family.workers, seed=config.seed, task_ids=tuple(task_ids) if task_ids else None,
                             max_infra_share=config.max_infra_share)
    reports = evaluate_policies([("untrained", policy_responder(untrained, config.seed)),
                                 (f"trained ({config.mode})", policy_responder(trained, config.seed))], eval_config)
    markdown = markdown_table(reports)
    if family.policy in GRAMMAR_POLICIES:  # its choices are slots: say how much they depend on the task
        tasks = select_tasks(env_id, suite, "heldout", eval_config.task_ids)
        bits = {name: choice_task_dependence(policy, tasks, DEPENDENCE_SAMPLES, seed=config.seed)
                for name, policy in (("untrained", untrained), ("trained", trained))}
        markdown += "\n### How much the choices depend on the task\n\n" + dependence_markdown(
            bits, DEPENDENCE_SAMPLES, len(tasks))
    return f"Held-out evaluation (real execution, avg@{k})", markdown, [r.to_dict() for r in reports]


def evaluate_command(env_id: str, suite: str, args: argparse.Namespace) -> int:
    """``wmrl eval`` for a code family: avg@k by sandboxed execution against the leaderboards."""
    config = EvalConfig(env_id=env_id, suite=suite, split=args.split, k=args.k, executor=args.executor,
                        workers=args.workers, seed=args.seed, task_ids=tuple(args.tasks) if args.tasks else None,
                        max_infra_share=args.max_infra_share)
    policies = args.policy or "reference:constant,reference:linear,reference:hist_gb"
    reports = evaluate_policies([(p, responder_from_spec(p, args.seed)) for p in policies.split(",")], config)
    out = Path(args.out)
    split = "lite: the lite selection's held-out tasks" if args.split == LITE else args.split
    md = write_reports(reports, out, f"Held-out evaluation on {env_id} ({split})", provenance())
    print(md.read_text())
    print(f"wrote {md} and {out / 'results.json'}")
    return 0


def code_profile(env_id: str, suite: str, quantity: str) -> FamilyProfile:
    """The profile of a code family whose built-in tasks form ``suite``."""
    return FamilyProfile(env_id=env_id, policies=(*GRAMMAR_POLICIES, "lm"), suite=suite, quantity=quantity,
                         make_adapter=partial(make_adapter, env_id, suite), make_scorer=make_scorer,
                         heldout=partial(heldout, env_id, suite), evaluate=partial(evaluate_command, env_id, suite))
