"""Could a cheaper use of the anchors rank the policy's own scripts well enough (issue 44's prequential point)?

A reading of training runs already made, not a verdict: each run's ``anchors.csv`` holds every
anchor's raw world-model score (as predicted before it ran) and its real score. For the last third
of the run's steps it reports the Spearman of the raw scores against the real ones, and of the raw
scores moved by the mean residual (real minus raw) of the anchors executed at *earlier* steps that
share the anchor's task, its estimator family (``stratum``), or both, shrunk toward 0 as
``n / (n + k)``: per-task, per-family and per-(task, family) corrections that cost no execution. It
also reports the spread of real scores within a group and between groups, which bounds what a
per-task correction can add.

    python -m bench.experience_corrections NAME=RUN_DIR [NAME=RUN_DIR ...] [--name experience_corrections]

Each ``RUN_DIR`` is a ``wmrl train`` output folder (the main job's, for instance). Writes
``bench/results/<--name>.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import write_result
from bench.world_model_metrics import spearman

LEVELS = {"task": ("task_id",), "family": ("stratum",), "task and family": ("task_id", "stratum")}
SHRINKAGE = (1.0, 4.0, 16.0)


def executed_anchors(run: Path) -> pd.DataFrame:
    """A run's executed anchors: step, task, family, raw world-model score and real score."""
    frame = pd.read_csv(run / "anchors.csv", keep_default_na=False)
    frame = frame[frame["executed"].astype(str) == "True"].copy()
    frame["raw"] = frame["wm_score_raw"].astype(float)
    frame["real"] = frame["real_score"].astype(float)
    return frame.reset_index(drop=True)


def corrected(frame: pd.DataFrame, keys: tuple[str, ...], k: float) -> np.ndarray:
    """Each anchor's raw score moved by the shrunk mean residual of the earlier steps' anchors that
    share its ``keys`` (prequential: an anchor never sees its own step)."""
    out = frame["raw"].to_numpy(copy=True)
    residual = (frame["real"] - frame["raw"]).to_numpy()
    for i, row in frame.iterrows():
        earlier = (frame["step"] < row["step"]).to_numpy().copy()
        for key in keys:
            earlier &= (frame[key] == row[key]).to_numpy()
        n = int(earlier.sum())
        if n:
            out[i] += n / (n + k) * residual[earlier].mean()
    return out


def reading(name: str, run: Path) -> dict:
    frame = executed_anchors(run)
    steps = np.arange(frame["step"].min(), frame["step"].max() + 1)
    last = frame["step"].isin(np.array_split(steps, 3)[-1]).to_numpy()
    real = frame["real"].to_numpy()[last]
    groups = frame.groupby(["step", "group_id"])["real"]
    out = {"run": name, "folder": str(run), "anchors": int(len(frame)), "last_third_anchors": int(last.sum()),
           "tasks": int(frame["task_id"].nunique()),
           "real_sd_within_group": float(groups.std().mean()), "real_sd_between_groups": float(groups.mean().std()),
           "raw": spearman(frame["raw"].to_numpy()[last], real), "corrected": {}}
    for level, keys in LEVELS.items():
        out["corrected"][level] = {f"k={k:g}": spearman(corrected(frame, keys, k)[last], real) for k in SHRINKAGE}
    return out


def markdown(rows: list[dict]) -> str:
    columns = [(level, k) for level in LEVELS for k in (f"k={k:g}" for k in SHRINKAGE)]
    lines = ["### Corrections from earlier anchors, no execution (issue 44's prequential point; a reading, not a verdict)",
             "", "Last third of each run's steps: Spearman of the anchors' world-model score against their real "
             "score, raw and moved by the shrunk mean residual of earlier steps' anchors of the same task, "
             "estimator family, or both. In-sample as to tasks (the runs' training tasks); the scripts are the "
             "policy's own.", "",
             "| run | anchors (last third) | tasks | real SD within / between groups | raw | "
             + " | ".join(f"{level}, {k}" for level, k in columns) + " |",
             "|---|---:|---:|---|---:|" + "---:|" * len(columns)]
    for r in rows:
        lines.append(f"| {r['run']} | {r['anchors']} ({r['last_third_anchors']}) | {r['tasks']} | "
                     f"{r['real_sd_within_group']:.2f} / {r['real_sd_between_groups']:.2f} | {r['raw']:.2f} | "
                     + " | ".join(f"{r['corrected'][level][k]:.2f}" for level, k in columns) + " |")
    lines += ["", "The run folders are not committed: make them with the main job's command for each seed "
              "(`scripts/main.sh --seed S --output-dir DIR`), then run the command below on them."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR: a wmrl train output folder with anchors.csv")
    parser.add_argument("--name", default="experience_corrections", help="the report's name under bench/results")
    args = parser.parse_args(argv)
    pairs = [spec.split("=", 1) for spec in args.runs]
    if any(len(p) != 2 for p in pairs):
        raise SystemExit("each run is NAME=RUN_DIR")
    rows = [reading(name, Path(folder)) for name, folder in pairs]
    md = write_result(args.name, __spec__.name, {"rows": rows}, markdown(rows))
    print(md.read_text())


if __name__ == "__main__":
    sys.exit(main())
