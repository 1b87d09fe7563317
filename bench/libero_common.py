"""Helpers shared by the LIBERO benchmark scripts: result files and their provenance."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def setup_threads() -> None:
    """One thread per process: on 2 shared cores more threads only add contention."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (``ddof=1``; NaN for a single value) of per-seed or per-policy figures."""
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")
    return float(np.mean(values)), se


def concordance(labels: np.ndarray, scores: np.ndarray) -> tuple[float, int]:
    """Concordant (success, failure) score pairs, ties counted half, and the number of pairs."""
    pos, neg = scores[labels > 0.5], scores[labels <= 0.5]
    wins = (pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()
    return float(wins), len(pos) * len(neg)


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """P(a success scores above a failure), ties counted half; NaN without both outcomes."""
    wins, pairs = concordance(labels, scores)
    return wins / pairs if pairs else float("nan")


def write_result(name: str, payload: dict[str, Any], markdown: str) -> Path:
    """Write ``bench/results/<name>.json`` (with commit, date and machine) and ``<name>.md``, whose
    footer names the command that reruns it (this script, with the arguments it was given)."""
    from wmrl_envs.provenance import provenance

    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"machine": provenance(), **payload}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, default=float))
    md = RESULTS / f"{name}.md"
    info = payload["machine"]
    footer = (f"\n\n{info['cores']} cores, {info['ram_gib']} GiB RAM, {info['date'][:10]}, "
              f"commit `{info['commit'][:10]}`. Rerun: `python {' '.join(['bench/' + Path(sys.argv[0]).name, *info['argv']])}`\n")
    md.write_text(markdown.rstrip() + footer)
    return md
