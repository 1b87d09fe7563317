"""The registered confirmation's analysis (``bench/confirmation.py``), tested on synthetic runs before
any real run: the endpoints, which seeds and runs count, and a report that lists every run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bench.confirmation import (
    ARMS,
    FIXED_SCORE_ABOVE_UNTRAINED,
    endpoints,
    markdown,
    planned_runs,
    run_config,
    summarise,
    t_bound,
)
from bench.registration import failed_name

ANALYSIS = {"margin": 0.05, "ni_level_one_sided": 0.95, "difference_level": 0.90,
            "fixed_score_above_untrained": FIXED_SCORE_ABOVE_UNTRAINED, "bootstrap_draws": 4000,
            "bootstrap_level": 0.9, "bootstrap_seed": 0}
SETTINGS = {"arms": list(ARMS), "seeds": list(range(201, 221)), "steps": 4, "tasks_per_step": 8, "group_size": 4,
            "eval_k": 4, "eval_every": 2, "tasks": {"train": ["a", "b"], "heldout": ["c", "d"]}, "analysis": ANALYSIS}


def run(arm: str, seed: int, final: float, compute: float, executed: int = 0, untrained: float = 0.5,
        settings: dict | None = None) -> dict:
    """A synthetic run: a straight curve from the untrained score at no compute to ``final`` at ``compute``."""
    steps = [0, 2, 4]
    curve = [{"step": s, "compute_cpu_s": compute * s / 4, "heldout_mean": untrained + (final - untrained) * s / 4,
              "heldout_se": 0.01, "per_task": {}, "infra_failures": 0} for s in steps]
    return {"arm": arm, "seed": seed, "settings": settings or SETTINGS, "curve": curve, "final_heldout": final,
            "compute_cpu_s": compute, "cpu_s": {"execution": compute * 0.9, "world_model": compute * 0.01},
            "executed_scripts": executed, "training_scripts": 128, "training_infra_failures": 0, "wall_s": 60.0,
            "loadavg_1m_at_start": 0.3, "loadavg_1m_at_end": 1.9, "provenance": {"commit": "0123456789abcdef", "dirty": False}}


def by_arm(runs: list[dict]) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {arm: {} for arm in ARMS}
    for r in runs:
        out[r["arm"]][r["seed"]] = r
    return out


def synthetic(shift: float, seeds=range(201, 221), noise: float = 0.02, ratio: float = 4.0) -> list[dict]:
    """`real` ends near 0.7 at 800 CPU-s; `wmrl` ``shift`` from it at a ``ratio``-th of the compute;
    `world_model` 0.05 below `real` at 10 CPU-s."""
    rng = np.random.default_rng(7)
    runs = []
    for seed in seeds:
        real = 0.7 + rng.normal(0, 0.03)
        runs += [run("real", seed, real, 800.0, executed=128),
                 run("wmrl", seed, real + shift + rng.normal(0, noise), 800.0 / ratio, executed=20),
                 run("world_model", seed, real - 0.05, 10.0)]
    return runs


# ------------------------------------------------------------------ the bounds
def test_the_one_sided_bound_is_the_student_t_bound_of_the_paired_differences():
    d = np.array([0.01, -0.03, 0.02, 0.00, -0.01, 0.04])
    bound = t_bound(d, 0.95, "lower")
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert bound["mean"] == pytest.approx(d.mean())
    assert bound["lo"] == pytest.approx(d.mean() - stats.t.ppf(0.95, 5) * se)
    assert math.isinf(bound["hi"]) and bound["n"] == 6
    two = t_bound(d, 0.90, "two")
    assert two["lo"] == pytest.approx(bound["lo"])  # a two-sided 90% interval's lower end is the one-sided 95% bound
    assert two["hi"] == pytest.approx(d.mean() + stats.t.ppf(0.95, 5) * se)
    assert math.isnan(t_bound(np.array([0.1]), 0.95, "lower")["lo"])


# ------------------------------------------------------------------ the endpoints
def test_a_wmrl_as_good_as_real_passes_non_inferiority_and_one_far_worse_fails_it():
    good = endpoints(by_arm(synthetic(shift=0.0)), ANALYSIS)
    assert good["seeds"] == list(range(201, 221))
    assert good["non_inferiority"]["holds"] and good["non_inferiority"]["lo"] > -0.05
    bad = endpoints(by_arm(synthetic(shift=-0.10)), ANALYSIS)
    assert not bad["non_inferiority"]["holds"]
    assert bad["non_inferiority"]["mean"] == pytest.approx(-0.10, abs=0.01)
    # Equal on average but too noisy to bound: the registered bound, not the mean, decides.
    noisy = endpoints(by_arm(synthetic(shift=0.0, noise=0.25, seeds=range(201, 206))), ANALYSIS)
    assert not noisy["non_inferiority"]["holds"]


def test_the_compute_endpoints_read_the_ledgers_and_the_curves():
    ends = endpoints(by_arm(synthetic(shift=0.0, noise=0.0, ratio=4.0)), ANALYSIS)
    assert ends["compute_ratio"]["point"] == pytest.approx(4.0)
    assert ends["compute_ratio"]["lo"] == pytest.approx(4.0) and ends["compute_ratio"]["hi"] == pytest.approx(4.0)
    assert ends["world_model_compute_ratio"]["point"] == pytest.approx(80.0)
    # Every curve is a straight line from 0.5 at no compute, and wmrl's ends where real's does on a
    # quarter of the compute: it reaches any score on a quarter of real's compute.
    assert ends["untrained_heldout"] == pytest.approx(0.5)
    assert ends["fixed_score"] == pytest.approx(0.5 + FIXED_SCORE_ABOVE_UNTRAINED)
    assert ends["compute_to_fixed_score"]["point"] == pytest.approx(4.0)
    assert ends["executed_share"] == {"real": 1.0, "wmrl": pytest.approx(20 / 128), "world_model": 0.0}
    assert ends["wmrl_minus_world_model"]["mean"] == pytest.approx(0.05)
    assert ends["real_minus_world_model"]["lo"] == pytest.approx(0.05)


def test_only_seeds_every_arm_finished_count_and_none_before_the_first():
    runs = synthetic(shift=0.0, seeds=[201, 202, 203])
    runs = [r for r in runs if not (r["seed"] == 203 and r["arm"] == "world_model")]
    assert endpoints(by_arm(runs), ANALYSIS)["seeds"] == [201, 202]
    assert endpoints(by_arm([r for r in runs if r["arm"] != "wmrl"]), ANALYSIS) is None


# ------------------------------------------------------------------ the report
def test_the_report_lists_every_registered_run_and_sets_aside_other_settings():
    runs = synthetic(shift=-0.01, seeds=[201, 202])
    records = {f"{r['arm']}-s{r['seed']}.json": r for r in runs}
    records["wmrl-s203.json"] = run("wmrl", 203, 0.9, 100.0, settings={**SETTINGS, "steps": 2})
    summary = summarise(records, SETTINGS)
    assert summary["runs"] == 6 and summary["planned"] == 60
    assert summary["set_aside"] == ["wmrl-s203.json"]
    assert [r["name"] for r in summary["per_run"]] == planned_runs([201, 202])
    text = markdown(summary, SETTINGS)
    for name in planned_runs([201, 202]):
        assert f"| {name.removesuffix('.json')} |" in text
    assert "Non-inferiority" in text and "Set aside" in text and "wmrl-s203.json" in text
    records[failed_name("real-s203.json", records)] = {"failed": True, "run": "real-s203.json", "settings": SETTINGS,
                                                        "error": "InfrastructureError: the sandbox stopped"}
    assert failed_name("real-s203.json", records) == "failed/real-s203-2.json"
    summary = summarise(records, SETTINGS)
    assert summary["runs"] == 6 and summary["set_aside"] == ["wmrl-s203.json"]
    assert summary["failed_attempts"] == [{"name": "failed/real-s203-1.json", "run": "real-s203.json",
                                           "error": "InfrastructureError: the sandbox stopped"}]
    assert "`real-s203.json` (failed/real-s203-1.json): InfrastructureError" in markdown(summary, SETTINGS)
    empty = markdown(summarise({}, SETTINGS), SETTINGS)
    assert "0 of 60 registered runs finished" in empty and "no endpoint is read" in empty
    assert "(dirty)" not in text and "Notes added after the runs" not in text


def test_a_dirty_run_is_flagged_and_explained_and_post_run_notes_end_the_report():
    runs = synthetic(shift=0.0, seeds=[201])
    runs[2]["provenance"] = {**runs[2]["provenance"], "dirty": True}
    summary = summarise({f"{r['arm']}-s{r['seed']}.json": r for r in runs}, SETTINGS)
    text = markdown(summary, SETTINGS, notes="The archive was the only change.\n")
    assert "| world_model-s201 |" in text and text.count("(dirty)") == 2  # the run's row and the legend
    assert text.rstrip().endswith("The archive was the only change.")
    assert text.index("Notes added after the runs") > text.index("| world_model-s201 |")


def test_the_plan_goes_seed_by_seed_and_the_arms_differ_in_their_mode_only():
    assert planned_runs([201, 202]) == ["real-s201.json", "wmrl-s201.json", "world_model-s201.json",
                                        "real-s202.json", "wmrl-s202.json", "world_model-s202.json"]
    configs = {arm: run_config(arm, 201, 4, "").to_dict() for arm in ARMS}
    for arm in ARMS:
        assert configs[arm].pop("mode") == arm
    assert configs["real"] == configs["wmrl"] == configs["world_model"]
