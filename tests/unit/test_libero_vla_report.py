"""The LIBERO benchmark's report: paired gains over BC and the compute-to-reach comparison.

Its report functions (``bench/libero_vla.py``) are pure: rows and curves in, a summary out.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def report():
    return importlib.import_module("bench.libero_vla")  # imported here: it loads torch


TASKS = [0, 2]


def _row(policy: str, seed: int, success: float, sim: float = 0.0) -> dict:
    return {"policy": policy, "seed": seed, "trials": 20, "success": success, "tasks": TASKS,
            "sim_cpu_s": sim, "total_cpu_s": sim, "sim_steps": 0}


def _curve(seed: int, points: list[tuple[int, float, float]]) -> dict:
    return {"seed": seed, "tasks": TASKS, "curve": [
        {"step": s, "compute_cpu_s": c, "heldout_mean": v, "heldout_se": float("nan")} for s, c, v in points]}


def test_real_counterpart_pairs_variants(report):
    assert report.real_counterpart("wmrl") == "real"
    assert report.real_counterpart("wmrl-kl0.5") == "real-kl0.5"
    assert report.real_counterpart("other") == "real"


def test_paired_gain_and_speedup_when_real_improves(report):
    bc = {0: 0.2, 1: 0.4}
    rows = [_row("bc", s, v) for s, v in bc.items()]
    rows += [_row("real-x", 0, 0.4, 400), _row("real-x", 1, 0.6, 400)]
    rows += [_row("wmrl-x", 0, 0.5, 200), _row("wmrl-x", 1, 0.7, 200)]
    rows[2]["success"] += 0.02  # real's paired gains 0.2 and 0.22: above their SE
    curves = {"real-x": [_curve(s, [(0, 0, bc[s]), (4, 200, bc[s] + 0.1), (8, 400, bc[s] + 0.2)]) for s in bc],
              "wmrl-x": [_curve(s, [(0, 0, bc[s]), (4, 100, bc[s] + 0.2), (8, 200, bc[s] + 0.3)]) for s in bc]}
    summary = report.summarise(rows, curves)
    wmrl = summary["policies"]["wmrl-x"]
    assert wmrl["gain_over_bc"] == pytest.approx(0.3)
    assert wmrl["gain_over_bc_se"] == pytest.approx(0.0, abs=1e-12)
    assert [g for g, _ in wmrl["curve_gain_over_bc"]] == pytest.approx([0.0, 0.2, 0.3])
    comparison = summary["comparisons"]["wmrl-x"]
    assert comparison["real"] == "real-x" and comparison["real_improves_on_start"]
    # Real's mean final is 0.5; WMRL's mean curve (0.3, 0.5, 0.6) reaches it at its step 4.
    assert comparison["target_real_final"] == pytest.approx(0.5)
    assert comparison["sim_cpu_s_to_real_final"] == pytest.approx(100)
    assert comparison["real_sim_cpu_s_to_real_final"] == pytest.approx(400)
    assert comparison["speedup_vs_real"] == pytest.approx(4.0)
    assert "4.0x" in report.report_markdown(rows, summary)


@pytest.mark.parametrize("real_gains", [(-0.1, -0.1), (0.04, -0.02)], ids=["below-start", "within-one-se"])
def test_no_speedup_unless_real_improves_beyond_its_se(report, real_gains):
    bc = {0: 0.3, 1: 0.3}
    rows = [_row("bc", s, v) for s, v in bc.items()]
    rows += [_row("real", s, bc[s] + g, 400) for s, g in zip(bc, real_gains)]
    rows += [_row("wmrl", s, bc[s] + 0.1, 200) for s in bc]
    curves = {"real": [_curve(s, [(0, 0, bc[s]), (8, 400, bc[s] + g)]) for s, g in zip(bc, real_gains)],
              "wmrl": [_curve(s, [(0, 0, bc[s]), (8, 200, bc[s] + 0.1)]) for s in bc]}
    summary = report.summarise(rows, curves)
    assert set(summary["comparisons"]) == {"wmrl"}  # real runs are not compared with themselves
    comparison = summary["comparisons"]["wmrl"]
    assert not comparison["real_improves_on_start"]
    assert comparison["sim_cpu_s_to_real_final"] is None and comparison["speedup_vs_real"] is None
    assert "no improvement to reach" in report.report_markdown(rows, summary)
    # Curves over other seeds (other BC policies) are not compared.
    summary = report.summarise(rows[:-1], {**curves, "wmrl": curves["wmrl"][:1]})
    assert summary["comparisons"] == {}


def test_protocol_evaluations_are_listed(report, tmp_path):
    folder = tmp_path / "wmrl-s0"
    folder.mkdir()
    tasks = [{"task_index": t, "successes": [t % 2 == 0] * 50} for t in range(10)]
    (folder / "eval-protocol.json").write_text(json.dumps({"tasks": tasks}))
    (protocol,) = report.collect_protocol(tmp_path)
    assert protocol["policy"] == "wmrl-s0" and protocol["trials"] == 500
    assert protocol["success"] == pytest.approx(0.5)
    assert protocol["by_task"]["0"] == 1.0 and protocol["by_task"]["1"] == 0.0
    assert "| `wmrl-s0` | 500 | 0.500 |" in report.report_markdown([], {"policies": {}, "comparisons": {}}, [protocol])


def _write_eval(path: Path, successes: list[bool]) -> None:
    path.write_text(json.dumps({"tasks": [{"task_index": 0, "successes": successes}]}))


def test_snapshots_are_rows_and_fresh_evaluations_are_read_apart(report, tmp_path):
    bc, run = tmp_path / "bc-s0", tmp_path / "wmrl-s0"
    bc.mkdir(), run.mkdir()
    _write_eval(bc / "eval.json", [True, False, False, False])
    _write_eval(bc / f"{report.FRESH_PREFIX}.json", [False, False])
    (run / "finetune.json").write_text(json.dumps({"init": str(bc / "policy.pt"), "steps": 4}))
    (run / "ledger.json").write_text(json.dumps({"cost/simulation_cpu_s": 200.0}))
    (run / "ledger-step2.json").write_text(json.dumps({"cost/simulation_cpu_s": 90.0}))
    _write_eval(run / "eval.json", [True, True, False, False])
    _write_eval(run / "eval-step2.json", [True, True, True, False])
    # On the sampled placements only the step-2 snapshot was evaluated: a row, but no curve.
    _write_eval(run / f"{report.FRESH_PREFIX}-step2.json", [True, False])

    rows, curves = report.collect_rows(tmp_path)
    by_policy = {r["policy"]: r for r in rows}
    assert set(by_policy) == {"bc", "wmrl", "wmrl@2"}
    assert by_policy["wmrl@2"]["success"] == 0.75 and by_policy["wmrl@2"]["sim_cpu_s"] == 90.0
    assert by_policy["wmrl@2"]["snapshot_of"] == "wmrl" and by_policy["wmrl@2"]["step"] == 2
    assert [(p["step"], p["compute_cpu_s"], p["heldout_mean"]) for p in curves["wmrl"][0]["curve"]] == [
        (0, 0.0, 0.25), (2, 90.0, 0.75), (4, 200.0, 0.5)]
    summary = report.summarise(rows, curves)
    assert summary["policies"]["wmrl@2"]["gain_over_bc"] == pytest.approx(0.5)
    assert "`wmrl@2`" in report.report_markdown(rows, summary).split("Per seed")[0]

    fresh_rows, fresh_curves = report.collect_rows(tmp_path, report.FRESH_PREFIX)
    assert {r["policy"]: r["success"] for r in fresh_rows} == {"bc": 0.0, "wmrl@2": 0.5}
    assert fresh_curves == {}
    assert report.summarise(fresh_rows, fresh_curves)["policies"]["wmrl@2"]["gain_over_bc"] == pytest.approx(0.5)


def test_a_view_of_some_seeds_keeps_only_their_rows_and_curves(report):
    rows = [_row("bc", 0, 0.2), _row("bc", 1, 0.3), _row("wmrl", 1, 0.4)]
    curves = {"wmrl": [_curve(1, [(0, 0, 0.3), (4, 100, 0.4)])]}
    kept_rows, kept_curves = report._of_seeds(rows, curves, [0])
    assert [(r["policy"], r["seed"]) for r in kept_rows] == [("bc", 0)] and kept_curves == {}
    assert report._of_seeds(rows, curves, None) == (rows, curves)


def test_pooled_rows_weight_both_sets_by_their_episodes(report):
    rows = [_row("bc", 0, 0.2), _row("wmrl", 0, 0.4), _row("wmrl", 1, 0.5)]
    fresh = [{**_row("bc", 0, 0.5), "trials": 60}, {**_row("wmrl", 0, 0.4), "tasks": [0]}]
    pooled = report.pool_rows(rows, fresh)
    # Only pairs evaluated on both sets, on the same tasks, are pooled.
    assert [(r["policy"], r["seed"], r["trials"]) for r in pooled] == [("bc", 0, 80)]
    assert pooled[0]["success"] == pytest.approx((0.2 * 20 + 0.5 * 60) / 80)


def test_training_success_reads_the_executed_episodes_of_each_update(report, tmp_path):
    header = "step,reward/mean,reward/real/mean,reward/anchor/mean\n"
    for name, lines in {"real-b64-s0": ["1,0.25,0.25,", "2,0.5,0.5,"],
                        "wmrl-b64-s0": ["1,0.3,,0.125", "2,0.2,,"],
                        "bc-s0": []}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.csv").write_text(header + "\n".join(lines) + "\n")
        if name != "bc-s0":
            (tmp_path / name / "finetune.json").write_text("{}")
    found = report.collect_training_success(tmp_path)
    assert found["real-b64"] == {0: [0.25, 0.5]}
    anchors = found["wmrl-b64"][0]
    assert anchors[0] == 0.125 and anchors[1] != anchors[1]  # an update without anchors is NaN
    assert "bc" not in found
    text = report.report_markdown([], {"policies": {}, "comparisons": {}}, training=found)
    assert "`real-b64` (seeds 0): 1: 0.250, 2: 0.500" in text and "`wmrl-b64` (seeds 0): 1: 0.125" in text


def test_greedy_drift_counts_changed_actions_and_kl(report):
    import torch

    start = torch.log_softmax(torch.tensor([[[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]],
                                            [[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]]]), -1)  # [2 states, 2 dims, 3 bins]
    assert report.greedy_drift(start, start) == {"token_flip_rate": 0.0, "step_flip_rate": 0.0,
                                                 "bin_shift_when_flipped": 0.0, "kl_start_to_policy": 0.0}
    moved = start.clone()
    moved[0, 0] = start[0, 0].flip(-1)  # state 0, dim 0: greedy bin 0 -> 2
    drift = report.greedy_drift(start, moved)
    assert drift["token_flip_rate"] == 0.25 and drift["step_flip_rate"] == 0.5
    assert drift["bin_shift_when_flipped"] == 2.0
    p = start[0, 0].exp()
    assert drift["kl_start_to_policy"] == pytest.approx(float((p * (start[0, 0] - moved[0, 0])).sum()) / 4)


def test_drift_results_are_read_by_policy_snapshot_and_seed(report, tmp_path):
    for name, seed_values in {"wmrl-u4-s3": 0.1, "wmrl-u4-s4": 0.3}.items():
        (tmp_path / name).mkdir()
        for stem, scale in (("drift", 1.0), ("drift-step2", 0.5)):
            (tmp_path / name / f"{stem}.json").write_text(json.dumps({
                "token_flip_rate": seed_values * scale, "step_flip_rate": 0.5, "bin_shift_when_flipped": 9.0,
                "kl_start_to_policy": 0.05}))
    (tmp_path / "bc-s4").mkdir()
    (tmp_path / "bc-s4" / "drift-from-bc-s3.json").write_text(json.dumps({"token_flip_rate": 0.2}))
    drift = report.collect_drift(tmp_path)
    assert set(drift) == {"wmrl-u4", "wmrl-u4@2", "bc from bc"} and set(drift["wmrl-u4"]) == {3, 4}
    assert drift["bc from bc"] == {4: {"token_flip_rate": 0.2}}
    drift.pop("bc from bc")
    assert drift["wmrl-u4@2"][4]["token_flip_rate"] == pytest.approx(0.15)
    assert report._keep_seeds(drift, [3])["wmrl-u4"].keys() == {3}
    text = report.report_markdown([], {"policies": {}, "comparisons": {}}, drift=drift)
    assert "| `wmrl-u4` | 3,4 | 0.200 ± 0.100 | 0.500 ± 0.000 | 9.000 ± 0.000 | 0.050 ± 0.000 |" in text


def test_anchor_group_stats_separate_ranking_within_groups_from_silent_spread(report):
    import numpy as np

    # Group 1 mixed and ranked right, group 2 mixed and ranked wrong, group 3 all-fail with a spread.
    wm = np.array([0.9, 0.1, 0.2, 0.3, 0.6, 0.05])
    real = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    calibrated = np.array([0.8, 0.1, 0.2, 0.3, 0.4, 0.0])
    stats = report.anchor_group_stats(wm, real, calibrated, group_size=2)
    assert stats["groups"] == 3 and stats["silent_share"] == pytest.approx(1 / 3)
    assert stats["auroc_within_groups"] == 0.5  # one pair right, one wrong
    # Over all anchors: 0.9 beats all 4 failures, 0.2 beats 0.1 and 0.05 only.
    assert stats["auroc"] == pytest.approx((4 + 2) / 8)
    assert stats["silent_calibrated_std_median"] == pytest.approx(0.2)
    assert stats["silent_share_spread_over_0.01"] == 1.0
    alike = report.anchor_group_stats(wm[:2], real[:2], calibrated[:2], group_size=2)
    assert alike["silent_share"] == 0.0 and alike["silent_calibrated_std_median"] != alike["silent_calibrated_std_median"]
