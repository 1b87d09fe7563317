"""Helpers shared by the benchmark scripts: result files, their provenance, small statistics."""

from __future__ import annotations

import io
import json
import math
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from scipy import stats

from wmrl_envs.provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"


def rerun_command(module: str, argv: Sequence[str] = ()) -> str:
    """The command that reruns the bench script ``module`` (its ``__spec__.name``, ``bench.<name>``)
    with ``argv``, from the repository root."""
    return " ".join(["python", "-m", module, *map(shlex.quote, argv)])


def setup_threads() -> None:
    """One thread per process: on 2 shared cores more threads only add contention."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (``ddof=1``) of per-seed or per-policy figures; the SE is NaN for a
    single value, and both are NaN for none."""
    if not len(values):
        return math.nan, math.nan
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
    return float(np.mean(values)), se


def t_bound(differences: np.ndarray, level: float, side: str) -> dict[str, float]:
    """Mean of paired differences with its Student t bound: ``lower`` (one-sided at ``level``) or
    ``two`` (a two-sided ``level`` interval); NaN bounds with fewer than 2 seeds."""
    d = np.asarray(differences, dtype=float)
    mean = float(d.mean()) if d.size else math.nan
    if d.size < 2:
        return {"mean": mean, "lo": math.nan, "hi": math.nan, "n": int(d.size)}
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    if side == "lower":
        return {"mean": mean, "lo": mean - float(stats.t.ppf(level, d.size - 1)) * se, "hi": math.inf, "n": int(d.size)}
    half = float(stats.t.ppf(0.5 + level / 2, d.size - 1)) * se
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": int(d.size)}


def stat(values: Sequence[float]) -> dict[str, float | int]:
    """``{"mean", "se", "n"}`` over seeds (:func:`mean_se`), as a report's tables read them."""
    mean, se = mean_se(values)
    return {"mean": mean, "se": se, "n": len(values)}


def stat_text(figure: dict[str, Any], digits: int = 3) -> str:
    """A :func:`stat` as ``mean ± SE`` (the mean alone for one value, a dash for none)."""
    if not figure["n"]:
        return "–"
    return f"{figure['mean']:.{digits}f}" + ("" if math.isnan(figure["se"]) else f" ± {figure['se']:.{digits}f}")


def finite_mean_se(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "se"}`` of the finite values (SE 0 for one value; both NaN for none)."""
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"mean": math.nan, "se": math.nan}
    return {"mean": float(a.mean()), "se": float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else 0.0}


def median_flag(flags: list[float | None]) -> float | None:
    """The median anchor-pair count at which the audit first flagged, a seed that never flagged
    counting as never (so None when at least half never flagged)."""
    values = sorted(math.inf if f is None else f for f in flags)
    middle = float(np.median(values)) if values else math.inf
    return None if not math.isfinite(middle) else middle


def concordance(labels: np.ndarray, scores: np.ndarray) -> tuple[float, int]:
    """Concordant (success, failure) score pairs, ties counted half, and the number of pairs."""
    pos, neg = scores[labels > 0.5], scores[labels <= 0.5]
    wins = (pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()
    return float(wins), len(pos) * len(neg)


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """P(a success scores above a failure), ties counted half; NaN without both outcomes."""
    wins, pairs = concordance(labels, scores)
    return wins / pairs if pairs else float("nan")


def write_result(name: str, module: str, payload: dict[str, Any], markdown: str) -> Path:
    """Write ``bench/results/<name>.json`` (with :func:`~wmrl_envs.provenance.provenance` as
    ``machine``) and ``<name>.md``, whose footer names the command that reruns it: the bench
    script ``module`` with the arguments this process was given."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"machine": provenance(), **payload}
    # Compact: the .md is the human reading; the JSON is data, and bench/results has a size budget.
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, separators=(",", ":"), default=float) + "\n")
    md = RESULTS / f"{name}.md"
    info = payload["machine"]
    footer = (f"\n\n{info['cores']} cores, {info['ram_gib']} GiB RAM, {info['date'][:10]}, "
              f"commit `{info['commit'][:10]}`. Rerun: `{rerun_command(module, info['argv'])}`\n")
    md.write_text(markdown.rstrip() + footer)
    return md


def save_figure(fig: Any, path: Path, dpi: int) -> Path:
    """Save the matplotlib figure ``fig`` as the PNG ``path`` in 256 colours
    (:func:`write_palette_png`); returns ``path``."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    write_palette_png(buffer, path)
    return path


def write_palette_png(source: Path | IO[bytes], path: Path) -> None:
    """Write the opaque PNG ``source`` to ``path`` with its colours reduced to a 256-colour palette:
    a plot's lines, bands and text look the same in a quarter of the bytes of its RGBA file (the
    committed plots went from 4.3 to 1.1 MB), and the same pixels give the same bytes."""
    from PIL import Image  # Pillow comes with matplotlib, which only the plots need (the `plots` extra)

    with Image.open(source) as image:
        palette = image.convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE)
    palette.save(path, format="PNG", optimize=True)
