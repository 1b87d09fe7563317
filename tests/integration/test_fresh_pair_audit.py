"""bench/stress.py's anchors grid on two steps: the fresh-pair audit measures a run without changing it.

Real sandbox, the shipped surrogate: the audit executes world-model groups apart, and the run it
audits trains, calibrates and scores the same with it as without it.
"""

from __future__ import annotations

import importlib

import pytest

from bench.training import audit_summary


@pytest.fixture(scope="module")
def stress():
    return importlib.import_module("bench.stress")


def tiny_args(stress, tmp_path, audit_groups: int):
    return stress.parse_args(["--anchors", "--corruptions", "none", "--seeds", "0", "--steps", "2",
                              "--tasks-per-step", "4", "--group-size", "2", "--eval-every", "2",
                              "--eval-tasks", "diabetes-progression", "--eval-k", "1", "--workers", "2",
                              "--audit-groups", str(audit_groups), "--runs", str(tmp_path / f"runs{audit_groups}"),
                              "--memo-dir", str(tmp_path / f"memo{audit_groups}")])


def test_the_audit_executes_world_model_groups_apart_and_leaves_the_run_as_it_was(stress, tmp_path):
    base = stress.make_world_model("surrogate")
    results = {}
    for audit_groups in (0, 1):
        args = tiny_args(stress, tmp_path, audit_groups)
        args.memo_dir.mkdir(parents=True)
        memo = stress.ExecutionMemo(args.memo_dir / "memo.jsonl")
        tasks = stress.select_tasks(stress.ENV_ID, stress.SUITE, "heldout", args.eval_tasks)
        key = stress.RunKey("none", None, "wmrl", "std", False, 0)
        results[audit_groups] = stress.train_run(key, args, base, memo, tasks)
    plain, audited = results[0], results[1]

    assert "fresh_pairs" not in plain
    pairs = audited["fresh_pairs"]
    # Two steps of 4 groups, 0.4 anchor groups a step: at least one world-model group a step, of 2 samples.
    assert [step for step, *_ in pairs] == [0, 0, 1, 1]
    assert all(0.0 <= real <= 1.0 for _, _, real, _ in pairs)
    summary = audit_summary(pairs)
    assert summary["pairs"] == 4 and summary["mae"] == pytest.approx(
        sum(abs(reward - real) for _, reward, real, _ in pairs) / 4)
    # The audited run is the run: what it trained on, calibrated and executed is unchanged.
    for field in ("calibrator_state", "pairs_per_step", "executed_scripts", "training_scripts", "executions_run"):
        assert audited[field] == plain[field], field
    assert [p["heldout_mean"] for p in audited["curve"]] == [p["heldout_mean"] for p in plain["curve"]]
    assert plain["training_scripts"] == 2 * 4 * 2 and plain["executed_scripts"] in (0, 2)
