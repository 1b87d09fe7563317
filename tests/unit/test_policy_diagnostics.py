"""Task dependence of a policy's choices: mutual information between task and option, per slot."""

import math

import pytest

from agents.base import Rollout
from agents.code.diagnostics import choice_task_dependence, dependence_markdown
from agents.code.grammar import SolutionChoices


class ChoosesByTask:
    """Task i always gets model option i (and the same everything else): model depends on the task."""

    models = ("constant", "linear", "knn", "tree")

    def generate(self, tasks, group_size, group_ids, generator):
        return [Rollout(t, g, None, None, None, meta={"choices": SolutionChoices(model=self.models[g]).to_dict()})
                for t, g in zip(tasks, group_ids) for _ in range(group_size)]


def test_a_task_conditioned_slot_carries_all_its_entropy_and_a_fixed_slot_none():
    bits = choice_task_dependence(ChoosesByTask(), ["a", "b", "c", "d"], samples=8)
    assert bits["model"] == pytest.approx(math.log2(4))
    assert bits["capacity"] == 0.0 and bits["validation"] == 0.0
    table = dependence_markdown({"fixed": bits}, samples=8, n_tasks=4)
    assert "| fixed | 2.000 |" in table and "most possible" in table


def test_the_untrained_grammar_policy_barely_depends_on_the_task():
    from agents.code.policy import GrammarPolicy, GrammarPolicyConfig
    from wmrl_envs.tasks import list_tasks

    tasks = list_tasks(suite="mle", split="heldout")[:6]
    bits = choice_task_dependence(GrammarPolicy(GrammarPolicyConfig(seed=0)), tasks, samples=64)
    # Near uniform and task-blind: only the plug-in bias, about (8 - 1)(6 - 1) / (2 * 384 * ln 2) = 0.07 bits.
    assert bits["model"] < 0.15 and all(b >= -1e-12 for b in bits.values())
