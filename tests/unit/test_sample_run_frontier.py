"""The sample-run frontier bench's arithmetic: configurations parse, the blend is refitted per
configuration and left out by task, a failed sample gets the head's failure reward, the CPU share
is against the full run, and the second frozen set is refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.sample_run_frontier import Sizing, figures, leave_task_out, predict, projection, set_scripts
from wmrl_envs.errors import ConfigError
from wmrl_envs.world_models.build.sample_head import fit_blend


def test_configurations_parse_and_bad_ones_are_refused():
    sizing = Sizing.parse("0.08:1000")
    assert (sizing.fraction, sizing.min_rows, sizing.label) == (0.08, 1000, "0.08:1000")
    assert Sizing.parse("1:1").sample_config(2).wall_share == 1.0  # the full run keeps the task's caps
    assert Sizing.parse("0.08:200").sample_config(2).wall_share < 1.0
    for bad in ("0.08", "a:b", "0:200", "1.5:10", "0.1:0"):
        with pytest.raises(ConfigError):
            Sizing.parse(bad)


def synthetic(rng: np.random.Generator, tasks: int = 5, per_task: int = 12) -> pd.DataFrame:
    real = rng.uniform(0, 1, tasks * per_task)
    sample = 0.1 + 0.8 * real + rng.normal(0, 0.01, real.size)
    return pd.DataFrame({"task_id": np.repeat([f"t{i}" for i in range(tasks)], per_task), "real": real,
                         "sample": sample, "model_valid": rng.uniform(0, 1, real.size),
                         "failed_p_valid": 0.01, "cpu_s": 0.2})


def test_the_blend_recovers_a_linear_map_leaving_each_task_out():
    frame = synthetic(np.random.default_rng(0))
    coef = fit_blend(frame["sample"].to_numpy(), frame["model_valid"].to_numpy(), frame["real"].to_numpy())
    assert coef == pytest.approx([-0.125, 1.25, 0.0], abs=0.03)
    held = leave_task_out(frame)
    assert np.abs(held - frame["real"].to_numpy()).max() < 0.05
    # A task's rows never inform their own prediction: corrupting one task's truth leaves its predictions.
    corrupted = frame.assign(real=np.where(frame["task_id"] == "t0", 1 - frame["real"], frame["real"]))
    mine = (frame["task_id"] == "t0").to_numpy()
    assert np.abs(leave_task_out(corrupted)[mine] - held[mine]).max() < 0.05


def test_a_failed_sample_gets_the_failure_reward_and_the_share_is_against_the_full_run():
    coef = np.array([0.0, 1.0, 0.0])
    out = predict(coef, np.array([0.4, np.nan, 1.7]), np.array([0.9, 0.8, 0.1]), np.array([0.0, 0.25, 0.0]))
    assert out == pytest.approx([0.4, 0.2, 1.0])  # clipped to [0, 1]
    frame = synthetic(np.random.default_rng(1), tasks=3, per_task=6)
    frame.loc[0, "sample"] = np.nan
    result = figures(frame, frame["real"].to_numpy(), np.full(len(frame), 0.8), resamples=50, seed=0)
    assert result["sample_failed"] == 1 and result["scripts"] == 18 and result["tasks"] == 3
    assert result["cpu_share"] == pytest.approx(0.25) and result["median_cpu_ratio"] == pytest.approx(0.25)
    assert result["spearman_pooled"]["value"] == pytest.approx(1.0) and result["mae"]["value"] == 0.0


def test_the_projection_is_linear_in_the_rows_and_read_only_where_the_task_outgrows_its_sample():
    frame = synthetic(np.random.default_rng(2), tasks=3, per_task=4)
    shares = np.repeat([0.1, 0.2, 0.5], 4)  # the last task holds only twice its sample: not read
    full = frame["cpu_s"].to_numpy() / shares * np.exp(np.tile([-0.2, 0.0, 0.2, 0.4], 3))
    frame.loc[1, "sample"] = np.nan  # a failed sample projects nothing
    result = projection(frame, full, shares)
    assert (result["scripts"], result["tasks"]) == (7, 2)
    expected = np.array([-0.2, 0.2, 0.4, -0.2, 0.0, 0.2, 0.4])
    assert result["mean_log"] == pytest.approx(expected.mean()) and result["sd_log"] == pytest.approx(expected.std(ddof=1))
    assert projection(frame, full, np.full(len(frame), 0.5)) == {"scripts": 0}


def test_the_second_frozen_set_is_refused():
    with pytest.raises(ConfigError, match="registration"):
        set_scripts("v2", workers=1)
