"""How often issue 28's acceptance passes a method that is exactly as good as its baselines.

The issue accepts a default when, over 5 seeds, on each of five stress rows, ``wmrl`` ends no
lower than ``real`` minus 1 SE of the difference, and no lower than ``world_model`` minus 1 SE:
ten clauses. A method whose final score has the same distribution as a baseline's falls more
than 1 SE below it with probability about 16 % (P(Z < -1)), at any number of seeds, so a rule
without a margin fails an equal method often, and ten such clauses fail it most of the time.

This bench measures that on the grid's own runs instead of assuming normality. The runs end on
a few discrete held-out scores (the grammar policy collapses onto one script within 12 steps),
so it resamples the committed per-seed finals (``bench/results/stress_runs/*.jsonl.xz``): for each draw,
``--n`` seeds of ``real``, of each row's ``world_model`` and of a *stand-in* for ``wmrl``, and
the ten clauses read as the issue reads them. The stand-ins:

* ``as the better baseline``: on each row, ``wmrl``'s finals drawn from whichever of ``real``
  and ``world_model`` ends higher there: a method as good as the best one could ask for;
* the same, shifted up by ``shift``: how much better than the better baseline a method must be
  for the ten clauses to pass in 80 % of confirmations;
* ``wmrl as measured``: the finals of ``wmrl`` with ``--variant`` on these seeds (default: the
  isotonic map, the default these seeds ran with).

A second rule is read beside the issue's: non-inferiority with a margin, the one-sided lower
confidence bound of the difference (``--z`` standard errors, 1.28 for 90 %) above ``-margin``,
whose pass rate for an equal method rises to 1 as seeds grow instead of staying near 84 %.

    python -m bench.acceptance_power     # seconds; reads the committed runs, executes nothing

Writes ``bench/results/<--name>.{json,md}`` (default ``acceptance_power``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.archive import archive_of, read_runs
from bench.common import RESULTS, write_result
from bench.stress_records import as_recorded

ROWS = {"none": "clean", "saturate4": "(a) saturate 4", "family_bias0.5": "(c) family bias 0.5",
        "swap0.3": "(d) swap 0.3", "noise0.1": "(f) noise 0.1"}
DEFAULT_FOLDERS = ("machine_control", "t_check")  # one machine and one execution memo
SHIFTS = (0.0, 0.025, 0.05, 0.075, 0.1)
ISOTONIC = "calibration_global_form=isotonic"  # the default of the runs of seeds 3-12
Rule = Callable[[np.ndarray, np.ndarray], np.ndarray]


def row_name(key: dict) -> str:
    strength = "" if key["strength"] is None else f"{key['strength']:g}"
    return f"{key['corruption']}{strength}"


def load_finals(folders: list[Path], seeds: list[int], variant: str = ISOTONIC) -> dict[tuple[str, str], dict[int, float]]:
    """Final held-out score by seed of ``real`` (row ``any``) and of each row's ``world_model`` and
    ``wmrl`` with ``variant`` as recorded (:func:`bench.stress.as_recorded`: a run of a former
    default is named by what it ran with), std advantages, non-adaptive; a seed met twice must
    agree (one memo)."""
    finals: dict[tuple[str, str], dict[int, float]] = {}
    for folder in folders:
        for name, run in read_runs(folder).items():
            record = as_recorded(run)
            key = record["key"]
            wanted = variant if key["mode"] == "wmrl" else ""
            if (key["seed"] not in seeds or key["advantage"] != "std" or key["adaptive"]
                    or key.get("variant", "") != wanted or key["mode"] not in ("real", "world_model", "wmrl")):
                continue
            final = record["curve"][-1]["heldout_mean"]
            seen = finals.setdefault((row_name(key), key["mode"]), {})
            if key["seed"] in seen and abs(seen[key["seed"]] - final) > 1e-9:
                raise ValueError(f"{archive_of(folder)}: {name}: seed {key['seed']} ends at {final}, "
                                 f"elsewhere at {seen[key['seed']]}")
            seen[key["seed"]] = final
    return finals


def one_se_rule(x: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """The issue's clause, per draw (rows of ``x`` and ``baseline`` are draws, columns seeds)."""
    return x.mean(1) - baseline.mean(1) >= -np.hypot(_se(x), _se(baseline))


def margin_rule(margin: float, z: float) -> Rule:
    def rule(x: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        return x.mean(1) - baseline.mean(1) - z * np.hypot(_se(x), _se(baseline)) >= -margin
    return rule


def _se(values: np.ndarray) -> np.ndarray:
    return values.std(1, ddof=1) / np.sqrt(values.shape[1])


def pass_rate(stand_in: dict[str, np.ndarray], real: np.ndarray, world_model: dict[str, np.ndarray], n: int,
              draws: int, rule: Rule, rng: np.random.Generator, shift: float = 0.0) -> dict[str, float]:
    """Share of simulated confirmations passing each clause, and all of them."""
    real_draw = rng.choice(real, (draws, n))  # one set of real runs serves every row, as in the grid
    passed = np.ones(draws, dtype=bool)
    out = {}
    for row, finals in stand_in.items():
        x = rng.choice(finals, (draws, n)) + shift
        vs_real, vs_wm = rule(x, real_draw), rule(x, rng.choice(world_model[row], (draws, n)))
        out[f"{row} vs real"], out[f"{row} vs world_model"] = float(vs_real.mean()), float(vs_wm.mean())
        passed &= vs_real & vs_wm
    out["all"] = float(passed.mean())
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", type=Path,
                        default=[RESULTS / "stress_runs" / name for name in DEFAULT_FOLDERS],
                        help="run folders (each kept as RUNS.jsonl.xz), all from one machine and memo")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(3, 13)))
    parser.add_argument("--n", nargs="+", type=int, default=[5, 10, 20], help="seeds per arm of a confirmation")
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--z", type=float, default=1.2816, help="one-sided bound of the margin rule (90 %%)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", default=ISOTONIC,
                        help="the wmrl runs read, as recorded ('' for today's default)")
    parser.add_argument("--name", default="acceptance_power")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    finals = load_finals(args.runs, args.seeds, args.variant)
    as_array = {key: np.array([by_seed[s] for s in sorted(by_seed)]) for key, by_seed in finals.items()}
    rows = [row for row in ROWS if (row, "world_model") in as_array and (row, "wmrl") in as_array]
    if ("any", "real") not in as_array or not rows:
        raise SystemExit(f"no real runs, or no row with both world_model and wmrl runs, for seeds {args.seeds}")
    real = as_array[("any", "real")]
    world_model = {row: as_array[(row, "world_model")] for row in rows}
    better = {row: world_model[row] if world_model[row].mean() >= real.mean() else real for row in rows}
    measured = {row: as_array[(row, "wmrl")] for row in rows}
    rules = {"1 SE (the issue's)": one_se_rule,
             f"margin {args.margin:g} at z {args.z:g}": margin_rule(args.margin, args.z)}
    rng = np.random.default_rng(args.seed)
    results = {}
    for rule_name, rule in rules.items():
        for n in args.n:
            results[f"{rule_name}, n={n}"] = {
                **{f"better baseline +{shift:g}": pass_rate(better, real, world_model, n, args.draws, rule, rng, shift)
                   for shift in SHIFTS},
                "wmrl as measured": pass_rate(measured, real, world_model, n, args.draws, rule, rng)}
    equal = {row: pass_rate({row: world_model[row]}, real, world_model, 5, args.draws, one_se_rule, rng)
             [f"{row} vs world_model"] for row in rows}
    values = Counter(round(float(v), 3) for array in as_array.values() for v in array)
    payload = {"config": {**vars(args), "runs": [str(path) for path in args.runs]},
               "finals": {f"{row}/{mode}": dict(sorted(by_seed.items())) for (row, mode), by_seed in finals.items()},
               "equal_method_one_clause_pass": equal, "pass_rates": results,
               "most_common_finals": values.most_common(6)}
    write_result(args.name, __spec__.name, payload, markdown(payload, rows, args))


def markdown(payload: dict, rows: list[str], args: argparse.Namespace) -> str:
    runs = sum(len(v) for v in payload["finals"].values())
    common = ", ".join(f"{value:.3f} ({count})" for value, count in payload["most_common_finals"])
    lines = [
        "# Issue 28's acceptance: how often it passes an equal method",
        "",
        f"From {runs} committed runs (seeds {args.seeds[0]}-{args.seeds[-1]}, one machine): `real`, and each row's "
        f"`world_model` and `wmrl` ({args.variant or 'the default'}), resampled {args.draws} times. The finals are discrete: the most common "
        f"are {common} (value, runs).",
        "",
        f"| row | `real` | `world_model` | `wmrl` ({args.variant or 'the default'}) |",
        "|---|---|---|---|",
        *(f"| {ROWS[row]} | {_mean_se(payload['finals']['any/real'])} | "
          f"{_mean_se(payload['finals'][f'{row}/world_model'])} | {_mean_se(payload['finals'][f'{row}/wmrl'])} |"
          for row in rows),
        "",
        "**One clause, an equal method** (`wmrl` drawn from `world_model`'s own finals, 5 seeds each): "
        + ", ".join(f"{ROWS[row]} {rate:.2f}" for row, rate in payload["equal_method_one_clause_pass"].items()) + ".",
        "",
        "**All ten clauses**, pass rate of a simulated confirmation. Columns are the stand-ins for `wmrl`: on "
        "each row the finals of whichever baseline ends higher there, shifted up by the amount shown, and the "
        "`wmrl`'s own finals. The margin rule asks the one-sided lower confidence bound of each difference to "
        "stay above minus the margin.",
        "",
        "| rule, seeds per arm | " + " | ".join(next(iter(payload["pass_rates"].values())).keys()) + " |",
        "|---|" + "---|" * len(next(iter(payload["pass_rates"].values()))),
    ]
    for name, by_stand_in in payload["pass_rates"].items():
        lines.append(f"| {name} | " + " | ".join(f"{rates['all']:.2f}" for rates in by_stand_in.values()) + " |")
    lines += ["", f"Per clause, `wmrl` as measured, {args.n[0]} seeds, the issue's rule:", ""]
    default = payload["pass_rates"][f"1 SE (the issue's), n={args.n[0]}"]["wmrl as measured"]
    lines += [f"- {ROWS[row]}: vs `real` {default[f'{row} vs real']:.2f}, vs `world_model` "
              f"{default[f'{row} vs world_model']:.2f}" for row in rows]
    return "\n".join(lines)


def _mean_se(by_seed: dict[int, float]) -> str:
    values = np.array(list(by_seed.values()))
    return f"{values.mean():.3f} ± {values.std(ddof=1) / np.sqrt(values.size):.3f} ({values.size})"


if __name__ == "__main__":
    main()
