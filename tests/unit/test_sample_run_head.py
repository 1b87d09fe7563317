"""The sample-run head's measurement (wmrl_envs/world_models/build/sample_head.py) on pairs whose
answer is known, and the head's own rules (wmrl_envs/world_models/sample_run.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wmrl_envs.errors import ConfigError
from wmrl_envs.world_models.build.sample_head import MIN_SUPPORT, fit_head
from wmrl_envs.world_models.sample_run import SampleRunHead


def _row(task, split, sample_status, sample_exception, full_outcome, full_exception, real, sample_score, model):
    return {"task_id": task, "split": split, "proved": False, "sample_status": sample_status,
            "sample_exception": sample_exception, "full_outcome": full_outcome, "full_exception": full_exception,
            "real_score": real, "sample_score": sample_score, "model_valid": model, "sample_cpu_s": 0.1}


@pytest.fixture()
def memo():
    rng = np.random.default_rng(0)
    rows = []
    for t in range(6):  # valid on both runs: real = 0.1 + 0.6 sample + 0.2 model, exactly
        for _ in range(10):
            sample, model = rng.uniform(), rng.uniform()
            rows.append(_row(f"t{t}", "heldout", "valid", "", "valid", "", 0.1 + 0.6 * sample + 0.2 * model,
                             sample, model))
    rows += [_row("t0", "train", "runtime_error", "NameError", "runtime_error", "NameError", 0, np.nan, 0.5)] * MIN_SUPPORT
    # KeyError reproduced every time, yet a sample's few rows can cause one: never exact.
    rows += [_row("t1", "train", "runtime_error", "KeyError", "runtime_error", "KeyError", 0, np.nan, 0.5)] * 9
    # AttributeError with one full run that was valid: a false failure, not exact.
    rows += [_row("t2", "train", "runtime_error", "AttributeError", "runtime_error", "AttributeError", 0, np.nan, .5)] * 6
    rows += [_row("t2", "train", "runtime_error", "AttributeError", "valid", "", 0.7, np.nan, 0.5)]
    # Too few to call exact.
    rows += [_row("t3", "train", "runtime_error", "TypeError", "runtime_error", "TypeError", 0, np.nan, .5)] * 2
    rows.append({**_row("t4", "train", "", "", "syntax_error", "", 0, np.nan, np.nan), "proved": True})
    return pd.DataFrame(rows)


def test_exact_classes_are_size_independent_frequent_and_never_contradicted(memo):
    head = fit_head(memo)
    assert head.exact == ("runtime_error/NameError",)
    assert head.is_exact("runtime_error", "NameError") and not head.is_exact("runtime_error", "KeyError")
    assert head.measured["false_failures"] == 1 and head.measured["rows_run"] == len(memo) - 1


def test_failure_rates_are_smoothed_by_class_with_a_default(memo):
    head = fit_head(memo)
    assert head.failure_p_valid("runtime_error", "AttributeError") == pytest.approx(1.5 / 8, abs=1e-4)
    assert head.failure_p_valid("runtime_error", "KeyError") == pytest.approx(0.5 / 10, abs=1e-4)
    assert head.failure_p_valid("timeout", None) == head.p_valid_if_failed["*"]
    assert head.p_valid_if_valid == pytest.approx(60.5 / 61, abs=1e-4)


def test_the_score_blend_recovers_a_linear_learning_curve(memo):
    head = fit_head(memo)
    assert head.weights == pytest.approx({"intercept": 0.1, "sample": 0.6, "model": 0.2}, abs=1e-4)
    assert head.residual_sd == pytest.approx(0, abs=1e-4)
    assert head.measured["leave_task_out_spearman"]["blend"] == pytest.approx(1.0)
    assert head.valid_score(0.5, float("nan")) == pytest.approx(0.1 + 0.8 * 0.5)  # no model estimate: the sample's


def test_a_head_round_trips_and_refuses_what_it_cannot_read(memo, tmp_path):
    head = fit_head(memo)
    assert SampleRunHead.load(head.save(tmp_path / "head.json")) == head
    (tmp_path / "old.json").write_text('{"format": 0}')
    with pytest.raises(ConfigError, match="format"):
        SampleRunHead.load(tmp_path / "old.json")
    with pytest.raises(ConfigError, match="build it"):
        SampleRunHead.load(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="'\\*'"):
        SampleRunHead(p_valid_if_failed={"runtime_error": 0.1})


def test_run_rules_are_measured_from_the_base_models_answers(memo):
    assert "run_rules" not in fit_head(memo).measured  # no base predictions in the memo: nothing to compare
    ran = ~memo["proved"]
    memo = memo.assign(model_score=np.where(ran, 0.5, np.nan), model_uncertainty=np.linspace(0, 1, len(memo)),
                       model_p_valid=np.where(memo["sample_status"] == "valid", 0.99, 0.5))
    rules = fit_head(memo).measured["run_rules"]
    assert rules["always"]["share_run"] == 1 and rules["never"]["share_run"] == 0
    # The held-out rows are all valid with P(valid) 0.99: the band runs none, the uncertainty test the top half.
    assert rules["uncertain (0.05, 0.95)"]["share_run"] == 0
    assert rules["uncertain (0.05, 0.95) or top half of uncertainty"]["share_run"] == pytest.approx(0.5, abs=0.02)
    assert rules["always"]["spearman"] == pytest.approx(1.0) and np.isnan(rules["never"]["spearman"])
