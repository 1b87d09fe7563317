"""The stratum alarm when a policy repeats its scripts (issue 28), on executed solutions.

A training policy samples some scripts many times, and each copy is an anchor pair with the same
task, world-model score and real score. In the stress grid's runs, 112 anchor pairs held 64-88
distinct ones, a script up to 12 times. The audit's stratum check (``calibration/strata.py``)
counts a stratum's distinct pairs and clusters its standard error over the copies. This bench
measures what that buys: the share of draws whose check flags a family, on the shipped surrogate
and its corruptions, for three kinds of draw of 112 anchor pairs from held-out corpus rows:

* ``distinct``: 112 different rows (what ``bench/corruption_calibration.py`` draws);
* ``repeated``: ``--distinct`` different rows, then 112 pairs drawn from them with heavy-tailed
  weights (a few scripts many times), checked as shipped;
* ``repeated, copies counted``: the same draws, each copy made its own pair by a world-model
  score moved inward by less than 1e-6 (the maps do not notice, and the check, which finds
  copies to 9 decimals, then counts every copy as an independent pair).

A flag on ``none``, ``noise`` or ``saturate`` is a false alarm (their error does not depend on
the family); on ``family_bias`` and ``swap`` it is the check's power.

    python -m bench.stratum_repeats          # about 10 min on 2 cores

Writes ``bench/results/<--name>.{json,md}`` (default ``stratum_repeats``).
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.common import write_result
from bench.corpus_rows import load_rows, predictions, trainer_calibrator
from wmrl_envs.world_models import make_world_model
from wmrl_envs.world_models.corrupted import CorruptedWorldModel, Corruption

PAIRS = 112  # the stress grid's anchor pairs a run (12 steps, at least 2 anchor groups a step)
KINDS = {"none": 0.0, "noise": 0.1, "saturate": 4.0, "family_bias": 0.5, "swap": 0.3}
DRAWS = ("distinct", "repeated", "repeated, copies counted")


def draw_pairs(n_rows: int, distinct: int, tail: float, rng: np.random.Generator) -> np.ndarray:
    """Row indices of ``PAIRS`` pairs over ``distinct`` rows, weighted by a Pareto(``tail``) draw + 1."""
    rows = rng.choice(n_rows, distinct, replace=False)
    weights = rng.pareto(tail, distinct) + 1
    return rng.choice(rows, PAIRS, p=weights / weights.sum())


def stratum_alarm(wm: np.ndarray, real: np.ndarray, tasks: np.ndarray, strata: np.ndarray) -> bool:
    calibrator = trainer_calibrator()
    calibrator.add_pairs(wm, real, tasks.tolist(), strata.tolist())
    return any(reason.startswith("stratum ") for reason in calibrator.audit().reasons)


def one_kind(kind: str, rows, base, draws: int, distinct: int, tail: float) -> dict:
    strength = KINDS[kind]
    alarms: dict[str, list[bool]] = {name: [] for name in DRAWS}
    shape = {"distinct_pairs": [], "most_copies": []}
    for draw in range(draws):
        model = base if kind == "none" else CorruptedWorldModel(base, Corruption(kind, strength), seed=draw)
        pred = predictions(model, rows)
        rng = np.random.default_rng(draw)
        fresh = rng.choice(rows.real.size, PAIRS, replace=False)
        repeated = draw_pairs(rows.real.size, distinct, tail, rng)
        counts = np.unique(repeated, return_counts=True)[1]
        shape["distinct_pairs"].append(int(counts.size))
        shape["most_copies"].append(int(counts.max()))
        copy_index = np.array([np.sum(repeated[:i] == row) for i, row in enumerate(repeated)])
        for name, idx, wm in (("distinct", fresh, pred[fresh]),
                              ("repeated", repeated, pred[repeated]),
                              ("repeated, copies counted", repeated, pred[repeated] + np.where(pred[repeated] > 0.5, -1e-6, 1e-6) * copy_index / PAIRS)):
            alarms[name].append(stratum_alarm(wm, rows.real[idx], rows.task_ids[idx], rows.strata[idx]))
    row = {"corruption": kind, "strength": strength, "draws": draws,
           "flag_rate": {name: float(np.mean(values)) for name, values in alarms.items()},
           "distinct_pairs_mean": float(np.mean(shape["distinct_pairs"])),
           "most_copies_mean": float(np.mean(shape["most_copies"]))}
    print(f"{kind} {strength}: " + ", ".join(f"{k} {v:.2f}" for k, v in row["flag_rate"].items()), flush=True)
    return row


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = ["### The stratum alarm when a policy repeats its scripts", "",
             f"{meta['rows']}; {meta['draws']} draws of {PAIRS} anchor pairs each; repeated draws hold "
             f"{meta['distinct']} rows weighted by Pareto({meta['tail']}) + 1. Share of draws whose "
             "stratum check flags a family (a false alarm on `none`, `noise` and `saturate`; power on "
             "`family_bias` and `swap`).", "",
             "| corruption | " + " | ".join(DRAWS) + " | distinct pairs (mean) | most copies (mean) |",
             "|---|" + "---|" * (len(DRAWS) + 2)]
    for r in result["rows"]:
        lines.append(f"| {r['corruption']} {r['strength']:g} | "
                     + " | ".join(f"{r['flag_rate'][name]:.2f}" for name in DRAWS)
                     + f" | {r['distinct_pairs_mean']:.1f} | {r['most_copies_mean']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--distinct", type=int, default=70, help="rows a repeated draw holds")
    parser.add_argument("--tail", type=float, default=1.5, help="Pareto shape of the copies' weights")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--name", default="stratum_repeats", help="result file stem under bench/results/")
    args = parser.parse_args(argv)
    rows = load_rows("mle")
    base = make_world_model("surrogate")
    result = {"meta": {"rows": f"MLE-Dojo held-out corpus rows: {rows.real.size}",
                       "draws": args.draws, "distinct": args.distinct, "tail": args.tail},
              "rows": [one_kind(kind, rows, base, args.draws, args.distinct, args.tail) for kind in args.kinds]}
    print(write_result(args.name, __spec__.name, result, markdown(result)).read_text())


if __name__ == "__main__":
    main()
