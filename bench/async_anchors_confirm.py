"""The registered reading of issue 47's confirmation (``bench/results/async_anchors_confirm_registration.md``).

Reads the confirmation's archived runs (``bench/results/async_anchors_confirm.jsonl.xz``, written by
``python -m bench.async_anchors --name async_anchors_confirm ...``) and applies the rule the
registration fixed before the runs, with its one-sided 95% Student-t bounds over seeds:

1. speed: the lower bound of the mean per-seed speedup (K = 0 training wall over K = 8-skip) is at
   least 1.30, or the upper bound of the mean K = 8-skip wall over its CPU bound is at most 1.10;
2. score: the mean trained held-out score at K = 8-skip is at least K = 0's mean minus the standard
   deviation of the K = 0 scores; the paired difference's 90% interval is reported beside it.

Writes ``async_anchors_confirm_reading.md``; reproduces from the committed archive alone:

    python -m bench.async_anchors_confirm
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from bench.archive import read_runs
from bench.common import RESULTS, rerun_command, t_bound

NAME = "async_anchors_confirm"
SEEDS = (53, 54, 55, 56, 57, 58)
BOUND = 8
MIN_SPEEDUP, MAX_WALL_OVER_BOUND = 1.30, 1.10


def one_sided(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, lower, upper)``: the mean and its one-sided Student-t bounds at ``confidence`` (the
    two-sided interval at ``2 * confidence - 1``)."""
    bound = t_bound(np.asarray(values, dtype=float), 2 * confidence - 1, "two")
    return bound["mean"], bound["lo"], bound["hi"]


def reading(runs: Sequence[dict]) -> dict:
    """The registered rule applied to the runs: per seed figures, the bounds and each verdict."""
    by = {(r["seed"], r["max_staleness"]): r for r in runs}
    missing = [(s, k) for s in SEEDS for k in (0, BOUND) if (s, k) not in by]
    if missing:
        raise SystemExit(f"the confirmation is incomplete: no run for (seed, bound) {missing}")
    synchronous, skipping = [by[s, 0] for s in SEEDS], [by[s, BOUND] for s in SEEDS]
    if any("unanchored" not in r["landing"] for r in skipping):
        raise SystemExit("a K = 8 run of the archive did not skip the final anchors")
    speedups = [a["train_wall_s"] / b["train_wall_s"] for a, b in zip(synchronous, skipping)]
    over_bound = [b["train_wall_s"] / b["cpu_bound_wall_s"] for b in skipping]
    held_0 = [a["heldout_trained"] for a in synchronous]
    held_8 = [b["heldout_trained"] for b in skipping]
    speed, wall = one_sided(speedups), one_sided(over_bound)
    spread = float(np.std(held_0, ddof=1))
    difference = one_sided(np.subtract(held_8, held_0))  # one-sided 95% bounds = a two-sided 90% interval
    speed_holds = speed[1] >= MIN_SPEEDUP or wall[2] <= MAX_WALL_OVER_BOUND
    score_holds = float(np.mean(held_8)) >= float(np.mean(held_0)) - spread
    return {"seeds": list(SEEDS), "speedups": speedups, "wall_over_bound": over_bound,
            "heldout_k0": held_0, "heldout_k8": held_8, "speedup": speed, "wall_over_bound_mean": wall,
            "heldout_k0_sd": spread, "heldout_difference": difference,
            "dirty": [r["machine"].get("dirty") for r in [*synchronous, *skipping]],
            "speed_holds": speed_holds, "score_holds": score_holds, "holds": speed_holds and score_holds}


def markdown(read: dict) -> str:
    s, w, d = read["speedup"], read["wall_over_bound_mean"], read["heldout_difference"]
    lines = ["# Issue 47's confirmation, read by its registered rule", "",
             "Rule and runs: [async_anchors_confirm_registration.md](async_anchors_confirm_registration.md); "
             "every run: [async_anchors_confirm.md](async_anchors_confirm.md). In-sample as to the tasks (the main "
             "job's), new as to the seeds.", "",
             "| seed | speedup (K = 0 wall / K = 8-skip wall) | K = 8-skip wall / CPU bound | held-out K = 0 | "
             "held-out K = 8-skip |", "|---|---:|---:|---:|---:|"]
    for i, seed in enumerate(read["seeds"]):
        lines.append(f"| {seed} | {read['speedups'][i]:.2f}x | {read['wall_over_bound'][i]:.2f} | "
                     f"{read['heldout_k0'][i]:.3f} | {read['heldout_k8'][i]:.3f} |")
    mean_0, mean_8 = float(np.mean(read["heldout_k0"])), float(np.mean(read["heldout_k8"]))
    lines += ["",
              f"1. **Speed**: mean speedup {s[0]:.2f}x, one-sided 95% lower bound {s[1]:.2f} (rule: >= "
              f"{MIN_SPEEDUP:.2f}); or mean wall / CPU bound {w[0]:.2f}, upper bound {w[2]:.2f} (rule: <= "
              f"{MAX_WALL_OVER_BOUND:.2f}). **{'Holds' if read['speed_holds'] else 'Missed'}.**",
              f"2. **Score**: mean held-out {mean_8:.3f} at K = 8-skip against {mean_0:.3f} at K = 0 minus the K = 0 "
              f"scores' standard deviation {read['heldout_k0_sd']:.3f} = {mean_0 - read['heldout_k0_sd']:.3f}. "
              f"**{'Holds' if read['score_holds'] else 'Missed'}.** Beside it (no rule): paired difference "
              f"{d[0]:+.3f}, 90% interval [{d[1]:+.3f}, {d[2]:+.3f}].", "",
              f"**Verdict: {'both hold' if read['holds'] else 'missed'}.** "
              + ("As registered, the main job runs with `--max-staleness 8 --final-anchors skip` by default."
                 if read["holds"] else "As registered, the main job stays synchronous."), "",
              f"Provenance: {sum(bool(x) for x in read['dirty'])} of {len(read['dirty'])} runs dirty.", "",
              f"Reproduce: `{rerun_command(__spec__.name)}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    read = reading(list(read_runs(RESULTS / NAME).values()))
    report = markdown(read)
    (RESULTS / f"{NAME}_reading.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
