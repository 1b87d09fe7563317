"""End-of-run PNG plots: reward per step, the calibration curve, and the compute breakdown.

matplotlib is an optional extra (``plots``); without it the run still writes CSV metrics and
says which plots it skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainers.ledger import CATEGORIES
from wmrl_envs.calibration import Calibrator

log = logging.getLogger(__name__)


def write_plots(run_dir: Path, history: Sequence[dict[str, Any]], calibrator_state: dict[str, Any] | None,
                ledger_totals: dict[str, Any]) -> list[Path]:
    """Write the run's plots into ``run_dir``; return the files written."""
    try:
        import matplotlib  # noqa: PLC0415 - matplotlib is the optional [plots] extra

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is the optional [plots] extra
    except ImportError:
        log.warning("matplotlib is not installed (pip install 'wmrl[plots]'): skipping plots")
        return []
    written = []

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [h["step"] for h in history]
    for key, label in (("reward/mean", "all"), ("reward/anchor/mean", "anchor (real)"),
                       ("reward/world_model/mean", "world model"), ("reward/real/mean", "real")):
        values = [h.get(key, np.nan) for h in history]
        if np.isfinite(values).any():
            ax.plot(steps, values, marker=".", label=label)
    ax.set(xlabel="step", ylabel="training reward", title="Reward per step")
    if ax.lines:  # a run stopped before its first step has nothing to label
        ax.legend()
    written.append(_save(fig, run_dir / "reward.png"))

    pairs = _pairs(calibrator_state)
    if pairs is not None:
        wm, real = pairs
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        ax.scatter(wm, real, s=12, alpha=0.6, label="anchor pairs")
        # The run's own global map, rebuilt from its state, not a refit that could differ.
        calibrator = Calibrator()
        calibrator.load_state_dict(calibrator_state)
        grid = np.linspace(wm.min(), wm.max(), 400)
        ax.plot(grid, calibrator.calibrate(grid), color="C3", label="calibration map (global)")
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="identity")
        ax.set(xlabel="world-model score", ylabel="real score", title="Calibration")
        ax.legend()
        written.append(_save(fig, run_dir / "calibration.png"))

    fig, ax = plt.subplots(figsize=(6, 3.5))
    cpu = [ledger_totals[c].cpu_s for c in CATEGORIES]
    ax.bar(CATEGORIES, cpu, color=["C0", "C1", "C2", "C4", "C5"])
    ax.set(ylabel="CPU-seconds", title="Compute by category")
    written.append(_save(fig, run_dir / "cost.png"))
    return written


def _pairs(state: dict[str, Any] | None) -> tuple[np.ndarray, np.ndarray] | None:
    if not state:
        return None
    wm = np.asarray(state.get("wm_scores", []), dtype=float)
    real = np.asarray(state.get("real_scores", []), dtype=float)
    return (wm, real) if len(wm) >= 2 else None


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is the optional [plots] extra

    plt.close(fig)
    return path
