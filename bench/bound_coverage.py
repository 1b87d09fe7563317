"""How precisely a stress grid measures its reward-error bound's coverage (issue 46, point 4).

Issue 46 asks the bound's coverage to lie within 3 points of nominal on every row, and its
registered screen judged each row's pooled coverage against [0.87, 0.93] (`stress_anchors.md`).
That reading has no sampling error beside it. The fresh pairs of a run come one audited group a
step, and the members of a group share their task, their step's calibrator and mostly their
error, so they are covered or not together: the unit of evidence is the group, not the sample.

This reads the committed runs of a stress archive and gives, per row and schedule (**post hoc**:
it changes no registered verdict): the pooled coverage, a 90% interval from bootstrapping groups
(``(seed, step)`` clusters, 10,000 resamples, seed 0), the design effect (the variance over
groups against the variance were every pair independent), the groups behind it, and the groups a
row would need for the interval's half-width to be 0.03, at the design effect observed.

    python -m bench.bound_coverage                              # issue 46's registered runs
    python -m bench.bound_coverage --runs bench/results/stress_runs/anchors --name bound_coverage_anchors
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.archive import read_runs
from bench.common import RESULTS, rerun_command

NOMINAL, HALF_WIDTH, LEVEL, RESAMPLES = 0.9, 0.03, 0.90, 10_000


def clusters_of(record: dict) -> list[tuple[int, int]]:
    """``(bounded, covered)`` of each audited group of a run: its fresh pairs of one step that carried
    a finite bound (a record's ``fresh_pairs`` rows are ``[step, reward, real, bound]``)."""
    by_step: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for step, reward, real, bound in record.get("fresh_pairs") or []:
        if bound is None or not math.isfinite(bound) or reward is None or real is None:
            continue
        by_step[int(step)][0] += 1
        by_step[int(step)][1] += abs(reward - real) <= bound
    return [tuple(v) for _, v in sorted(by_step.items())]


def coverage_precision(clusters: list[tuple[int, int]], seed: int = 0) -> dict:
    """Pooled coverage of ``clusters`` with its cluster-bootstrap interval and design effect."""
    n = np.array([c[0] for c in clusters], dtype=float)
    k = np.array([c[1] for c in clusters], dtype=float)
    coverage = float(k.sum() / n.sum())
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(clusters), size=(RESAMPLES, len(clusters)))
    boot = k[draws].sum(axis=1) / n[draws].sum(axis=1)
    lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    independent = coverage * (1 - coverage) / n.sum()
    design_effect = float(boot.var() / independent) if independent > 0 else math.nan
    half = (hi - lo) / 2
    needed = math.ceil(len(clusters) * (half / HALF_WIDTH) ** 2) if half > 0 else None
    return {"coverage": coverage, "interval": [float(lo), float(hi)], "pairs": int(n.sum()), "groups": len(clusters),
            "design_effect": design_effect, "groups_for_half_width": needed,
            "contains_nominal": bool(lo <= NOMINAL <= hi)}


def rows_of(runs: dict[str, dict]) -> dict[str, dict]:
    """Per row (corruption and schedule) of the wmrl runs: the clusters of every seed, pooled."""
    pooled: dict[str, list] = defaultdict(list)
    for record in runs.values():
        key = record.get("key", {})
        if key.get("mode") != "wmrl" or not record.get("fresh_pairs"):
            continue
        strength = "" if key.get("strength") is None else f" {key['strength']:g}"
        name = f"{key['corruption']}{strength}, {'hash' if not key.get('variant') else key['variant']}"
        pooled[name] += clusters_of(record)
    return {name: coverage_precision(clusters) for name, clusters in sorted(pooled.items()) if clusters}


def markdown(rows: dict[str, dict], runs_path: Path, argv: list[str]) -> str:
    lines = ["### The reward-error bound's coverage and how precisely a grid measures it (issue 46, point 4)", "",
             f"**Post hoc.** Runs: `{runs_path}`. Each row's fresh pairs pooled over its seeds; nominal "
             f"{NOMINAL:g}. Interval: {LEVEL:.0%} from bootstrapping audited groups (a run's pairs of one step; "
             f"{RESAMPLES:,} resamples, seed 0). Design effect: the bootstrap variance over the variance were "
             f"every pair independent. Groups for ±{HALF_WIDTH:g}: the audited groups a row would need for the "
             f"interval's half-width to be {HALF_WIDTH:g} at that design effect. This reading changes no "
             "registered verdict.", "",
             "| row | pairs (groups) | coverage | 90% interval | contains nominal | design effect "
             f"| groups for ±{HALF_WIDTH:g} |", "|---|---:|---:|---|---|---:|---:|"]
    for name, r in rows.items():
        lo, hi = r["interval"]
        lines.append(f"| {name} | {r['pairs']} ({r['groups']}) | {r['coverage']:.3f} | [{lo:.3f}, {hi:.3f}] | "
                     f"{'yes' if r['contains_nominal'] else 'no'} | {r['design_effect']:.1f} | "
                     f"{r['groups_for_half_width'] or '—'} |")
    lines += ["", f"Rerun: `{rerun_command(__spec__.name, argv)}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=RESULTS / "stress_runs" / "anchors",
                        help="a stress run folder (read from its .jsonl.xz archive)")
    parser.add_argument("--name", default="bound_coverage", help="the report's name under bench/results")
    args = parser.parse_args(argv)
    rows = rows_of(read_runs(args.runs))
    shown = sys.argv[1:] if argv is None else list(argv)
    report = markdown(rows, args.runs.relative_to(RESULTS.parent.parent) if args.runs.is_absolute() else args.runs,
                      shown)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    (RESULTS / f"{args.name}.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
