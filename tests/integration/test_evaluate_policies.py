"""Held-out evaluation through one sandbox pool: every task's runs are submitted up front, so a task's
slow run does not hold the next task's runs back, and the scores are those of running each task alone."""

from __future__ import annotations

import re

import pytest

from trainers.evaluate import EvalConfig, evaluate_policies, select_tasks
from trainers.policies import responder_from_spec
from wmrl_envs.scoring import CodeScorer, extract_code

TASKS = ("glass-identification", "concrete-strength")

# The run raises with its start and end on the wall clock, so that its error message says when it ran.
TIMED = """import pathlib, time
started = time.time()
time.sleep({sleep})
if pathlib.Path(".").exists():  # true when it runs; no proof follows the file system
    raise RuntimeError(f"ran from {{started:.3f}} to {{time.time():.3f}}")
"""


def timed_responder(sleep_by_task: dict[str, float]):
    def respond(task, k, seed):
        return [f"```python\n{TIMED.format(sleep=sleep_by_task[task.id])}```"] * k
    return respond


def test_each_policy_scores_as_when_its_tasks_run_one_by_one():
    config = EvalConfig(task_ids=TASKS, k=2, executor="bwrap", workers=2)
    policies = ["reference:constant", "reference:linear"]
    reports = evaluate_policies([(p, responder_from_spec(p, 0)) for p in policies], config, progress=False)

    tasks = select_tasks(config.env_id, config.suite, config.split, TASKS)
    scorer = CodeScorer(executor="bwrap", workers=1)
    try:
        for policy, report in zip(policies, reports):
            assert report.policy == policy and [t.task_id for t in report.tasks] == list(TASKS)
            for task, result in zip(tasks, report.tasks):
                scripts = [extract_code(r) for r in responder_from_spec(policy, 0)(task, 2, 0)]
                alone = scorer.execute([task] * 2, scripts)
                assert result.scores == [s.score for s in alone] and all(result.valid)
    finally:
        scorer.close()
    assert reports[0].summary()["score_mean"] != reports[1].summary()["score_mean"]  # two policies, not one twice
    assert 0 < reports[0].wall_s <= reports[1].wall_s  # each report's clock stops at its policy's last task


def test_a_slow_run_does_not_hold_the_next_tasks_runs_back():
    config = EvalConfig(task_ids=TASKS, k=1, executor="bwrap", workers=2)
    slow, quick = TASKS
    report, = evaluate_policies([("timed", timed_responder({slow: 4.0, quick: 0.0}))], config, progress=False)

    spans = {}
    for result in report.tasks:
        assert result.errors, f"{result.task_id}: the run was not executed (a proof would say nothing of when)"
        start, end = re.search(r"ran from ([\d.]+) to ([\d.]+)", result.errors[0]).groups()
        spans[result.task_id] = float(start), float(end)
    # Task by task, the quick task's run could only start once the slow task's had ended.
    assert spans[quick][0] < spans[slow][1]
    assert spans[quick][1] < spans[slow][1]


def test_an_empty_policy_list_evaluates_nothing():
    assert evaluate_policies([], EvalConfig(task_ids=TASKS[:1], k=1, executor="bwrap"), progress=False) == []


@pytest.mark.parametrize("k", [1, 3])
def test_a_response_without_code_is_scored_without_a_run(k):
    config = EvalConfig(task_ids=TASKS[:1], k=k, executor="bwrap", workers=1)
    report, = evaluate_policies([("silent", lambda task, k, seed: ["no code here"] * k)], config, progress=False)
    assert report.tasks[0].scores == [0.0] * k and report.tasks[0].valid == [False] * k


def test_two_policies_of_one_name_get_a_report_each():
    silent = lambda task, k, seed: ["no code here"] * k  # noqa: E731
    reports = evaluate_policies([("same", silent), ("same", silent)],
                                EvalConfig(task_ids=TASKS, k=1, executor="bwrap", workers=1), progress=False)
    assert [r.policy for r in reports] == ["same", "same"]
    assert [[t.task_id for t in r.tasks] for r in reports] == [list(TASKS)] * 2
