"""What the main-job bench keeps of a run's anchors (bench/main_job.py): their measured cost, and how
well the informed schedule's prices ranked it."""

from __future__ import annotations

import csv

import pytest

from bench.main_job import anchor_costs, anchor_rows


def test_anchor_costs_read_measured_and_predicted_cpu(tmp_path):
    path = tmp_path / "anchors.csv"
    rows = [{"step": 0, "predicted_cpu_s": p, "execution_cpu_s": m}
            for p, m in [(0.2, 0.25), (0.4, 0.5), (1.0, 1.5), ("", ""), (3.0, 2.0)]]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    anchors = anchor_rows(path)
    costs = anchor_costs(anchors)
    assert len(anchors) == 5 and costs["anchor_runs_measured"] == 4 and costs["anchor_runs_priced"] == 4
    assert costs["anchor_cpu_s_mean"] == pytest.approx((0.25 + 0.5 + 1.5 + 2.0) / 4)
    assert costs["anchor_price_spearman"] == pytest.approx(1.0)
    # A run before prices (hash anchors, or a log written before the columns existed) has no correlation.
    assert anchor_costs([{"step": "0"}])["anchor_price_spearman"] is None
    assert anchor_rows(tmp_path / "none.csv") == [] and anchor_costs([])["anchor_cpu_s_mean"] is None
