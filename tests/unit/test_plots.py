"""End-of-run plots from a history, a calibrator state and a ledger (needs the ``plots`` extra,
which ``scripts/setup.sh`` installs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainers.ledger import ComputeLedger
from trainers.plots import write_plots
from wmrl_envs.calibration import Calibrator


def test_writes_the_three_plots_from_the_calibrators_own_map(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    wm = rng.uniform(0, 1, 60)
    calibrator = Calibrator()
    calibrator.add_pairs(wm, np.clip(wm**2 + rng.normal(0, 0.05, 60), 0, 1), "task-a")
    history = [{"step": i, "reward/mean": 0.1 * i} for i in range(3)]
    written = write_plots(tmp_path, history, calibrator.state_dict(), ComputeLedger().totals)
    assert sorted(p.name for p in written) == ["calibration.png", "cost.png", "reward.png"]
    assert all(p.stat().st_size > 1000 for p in written)


def test_no_calibration_plot_without_pairs(tmp_path: Path) -> None:
    written = write_plots(tmp_path, [{"step": 0}], None, ComputeLedger().totals)
    assert "calibration.png" not in {p.name for p in written}
