"""The evaluation-timing bench runs both ways on each seed, in an order that alternates, and checks
that they score alike."""

from __future__ import annotations

import json

from bench.heldout_evaluation import main


def test_both_ways_run_in_alternating_order_and_score_alike(tmp_path):
    name = tmp_path / "timing"  # an absolute name: the files go here, not into bench/results
    assert main(["--seeds", "0", "1", "--k", "1", "--tasks", "glass-identification", "concrete-strength",
                 "--workers", "2", "--name", str(name)]) == 0
    rows = json.loads(name.with_suffix(".json").read_text())["rows"]
    assert [r["order"][0] for r in rows] == ["up_front", "task_by_task"]
    assert all(r["same_scores"] and r["runs"] == 4 and min(r["wall_s"].values()) > 0 for r in rows)
    md = name.with_suffix(".md").read_text()
    assert "| 0 | 4 | up front |" in md and "| 1 | 4 | task by task |" in md and "mean ± SE over 2 seeds" in md
