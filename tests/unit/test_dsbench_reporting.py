"""How DSBench results are reported (mean RPG, completion rate) and which calibrator they feed."""

from __future__ import annotations

import pytest

from trainers.evaluate import EvalConfig, EvalReport, TaskResult, markdown_table, write_reports
from wmrl_envs.dsbench import DSBenchEnv
from wmrl_envs.mle import MLEDojoEnv
from wmrl_envs.world_models import Prediction


class FixedWorldModel:
    name = "fixed"

    def predict(self, tasks, scripts):
        return [Prediction(score=0.5, uncertainty=0.1) for _ in scripts]


def result(task_id: str, scores: list[float], valid: list[bool], quantity: str) -> TaskResult:
    return TaskResult(task_id=task_id, metric="accuracy", scores=scores, raw_scores=[None] * len(scores),
                      valid=valid, medals=[None] * len(scores), above_median=[False] * len(scores),
                      quantity=quantity)


def report(env_id: str) -> EvalReport:
    # Task a: both samples valid; task b: one of two valid; task c: none valid (RPG 0).
    quantity = "rpg" if env_id == "wmrl/DSBench-v0" else "position"
    tasks = [result("a", [0.8, 0.6], [True, True], quantity), result("b", [0.4, 0.0], [True, False], quantity),
             result("c", [0.0, 0.0], [False, False], quantity)]
    return EvalReport("grammar", EvalConfig(env_id=env_id, k=2), tasks)


def test_dsbench_summary_has_mean_rpg_and_completion_rate():
    summary = report("wmrl/DSBench-v0").summary()
    assert summary["rpg_mean"] == pytest.approx((0.7 + 0.2 + 0.0) / 3) == summary["score_mean"]
    assert summary["completion_rate"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert "rpg_mean" not in report("wmrl/MLEDojo-v0").summary()


def test_markdown_names_the_quantity_of_each_env(tmp_path):
    dsbench = markdown_table([report("wmrl/DSBench-v0")])
    assert "mean RPG" in dsbench and "completion rate" in dsbench and "| 50% |" in dsbench
    assert "medal" not in dsbench and "position score" not in dsbench
    mle = markdown_table([report("wmrl/MLEDojo-v0")])
    assert "position score" in mle and "any medal" in mle and "RPG" not in mle
    md = write_reports([report("wmrl/DSBench-v0")], tmp_path, "DSBench", {}).read_text()
    assert "relative performance gap" in md and "leaderboard" not in md


def test_each_suite_gets_its_own_shared_calibrator():
    model = FixedWorldModel()
    mle = MLEDojoEnv(reward="world_model", world_model=model).core.calibrator
    dsbench = DSBenchEnv(reward="fused", world_model=model).core.calibrator
    assert mle.shared_key == "mle/fixed" and dsbench.shared_key == "dsbench/fixed" and mle is not dsbench
    assert DSBenchEnv(reward="world_model", world_model=model).core.calibrator is dsbench
