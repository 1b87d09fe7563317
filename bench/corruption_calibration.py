"""The calibrator against a corrupted world model, on executed solutions (issue 13, objections 1 and 4).

No training and no execution: the corpus's rows were executed when it was built, so each row
is a (script, real score) pair, and the shipped surrogate, corrupted by
:class:`~wmrl_envs.world_models.corrupted.CorruptedWorldModel`, predicts it. Only rows the
surrogate was not fitted on are used (MLE-Dojo's held-out rows; every DSBench row, since the
surrogate saw no DSBench task). For each corruption and strength, and each of ``--draws``
draws, anchor pairs arrive as training makes them, whole groups of ``--group-size`` rows of one
task, into a calibrator with the trainer's settings, and the rows not drawn score it:

* **MAE** of raw and of calibrated scores at 40, 100 and 200 pairs (the ``≥ 30 % at 100
  pairs`` check on saturate and task offsets); on the clean surrogate, the gap to the in-sample
  isotonic floor (one monotone map fitted to every row, the best any global map can do);
* **objection 4**, does the map expand noise: the variance of the residual (error minus its
  mean) of calibrated against raw scores;
* **objection 1**, the audit: the share of draws whose audit flags (``monotone_ok`` is
  False) at 40, 60, 80, 100, 150 and 200 pairs, its power on the swap and its false-alarm rate
  elsewhere, and the median pair count of the first flag;
* **drift and forgetting**: pairs arrive over 20 steps while a drift corruption grows; the map
  at the end, fitted on every pair or on the last ``pair_window``, scores the final step's
  predictions.

    python -m bench.corruption_calibration            # about 10 min on 2 cores

Writes ``bench/results/corruption_calibration.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from sklearn.isotonic import IsotonicRegression

from bench.common import RESULTS, finite_mean_se, median_flag, rerun_command
from bench.corpus_rows import (
    STRENGTHS,
    SUITES,
    CachedWorldModel,
    Rows,
    draw_groups,
    load_rows,
    predictions,
    trainer_calibrator,
)
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.provenance import provenance
from wmrl_envs.world_models import make_world_model
from wmrl_envs.world_models.corrupted import CorruptedWorldModel, Corruption

# MLE-Dojo has 210 out-of-sample rows: 100 drawn still leaves 110 to score the map on.
MAE_PAIRS = (40, 100)
AUDIT_PAIRS = (40, 60, 80, 100, 150, 200)
DRIFT_STEPS, DRIFT_PAIRS_PER_STEP = 20, 8
WINDOWS = (None, 40, 80)


#: ``--calibration NAME=VALUE`` overrides of the trainer's calibrator settings (a sensitivity run).
OVERRIDES: dict[str, Any] = {}


def setting_value(text: str) -> Any:
    """A ``--calibration`` value: an int, else a float, else ``true``/``false``, else the text."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def one_draw(pred: np.ndarray, rows: Rows, draw: int, group_size: int) -> dict[str, dict]:
    """MAE, residual variances and audit verdicts of one draw of anchor groups."""
    rng = np.random.default_rng(draw)
    order = draw_groups(rows.task_ids, max(MAE_PAIRS + AUDIT_PAIRS), group_size, rng)
    calibrator = trainer_calibrator(**OVERRIDES)
    out: dict[str, dict] = {"mae": {}, "audit": {}}
    added = 0
    for n in sorted(set(MAE_PAIRS) | set(AUDIT_PAIRS)):
        idx = order[added:n]
        calibrator.add_pairs(pred[idx], rows.real[idx], list(rows.task_ids[idx]), list(rows.strata[idx]))
        added = n
        if n in AUDIT_PAIRS:
            out["audit"][n] = not calibrator.audit().monotone_ok
        if n in MAE_PAIRS:
            rest = np.setdiff1d(np.arange(rows.real.size), order[:n])
            raw_err = pred[rest] - rows.real[rest]
            cal_err = calibrator.calibrate(pred[rest], list(rows.task_ids[rest])) - rows.real[rest]
            out["mae"][n] = {"raw": float(np.abs(raw_err).mean()), "calibrated": float(np.abs(cal_err).mean()),
                             "var_raw": float(raw_err.var()), "var_calibrated": float(cal_err.var())}
    return out


def corruption_rows(suite: str, rows: Rows, base, draws: int, group_size: int, kinds) -> list[dict]:
    out = []
    for kind, strengths in STRENGTHS.items():
        if kind not in kinds:
            continue
        for strength in strengths:
            per_seed = []
            for draw in range(draws):
                model = base if kind == "none" else CorruptedWorldModel(base, Corruption(kind, strength), seed=draw)
                per_seed.append(one_draw(predictions(model, rows), rows, draw, group_size))
            row = {"suite": suite, "corruption": kind, "strength": strength, "draws": draws, "mae": {}, "audit": {}}
            for n in MAE_PAIRS:
                raw = [d["mae"][n]["raw"] for d in per_seed]
                cal = [d["mae"][n]["calibrated"] for d in per_seed]
                row["mae"][n] = {
                    "raw": finite_mean_se(raw), "calibrated": finite_mean_se(cal),
                    "reduction": finite_mean_se([1 - c / r for c, r in zip(cal, raw)]),
                    "var_ratio": finite_mean_se([d["mae"][n]["var_calibrated"] / d["mae"][n]["var_raw"] for d in per_seed])}
            firsts = []
            for d in per_seed:
                flagged = [n for n in AUDIT_PAIRS if d["audit"][n]]
                firsts.append(flagged[0] if flagged else None)
            row["audit"] = {"flag_rate": {n: float(np.mean([d["audit"][n] for d in per_seed])) for n in AUDIT_PAIRS},
                            "first_flag_pairs": firsts,
                            "median_first_flag": median_flag(firsts)}
            if kind == "none":
                floor = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
                    predictions(base, rows), rows.real).predict(predictions(base, rows))
                row["isotonic_floor_mae"] = float(np.abs(floor - rows.real).mean())
            out.append(row)
            print(f"{suite} {kind} {strength}: MAE@100 raw {row['mae'][100]['raw']['mean']:.3f} "
                  f"calibrated {row['mae'][100]['calibrated']['mean']:.3f}; audit flags by 100 pairs "
                  f"{row['audit']['flag_rate'][100]:.2f}", flush=True)
    return out


def drift_rows(suite: str, rows: Rows, base, draws: int, group_size: int, strength: float) -> list[dict]:
    """Pairs over ``DRIFT_STEPS`` steps of a growing drift; the final map, with each forgetting window."""
    maes: dict[str | None, list[float]] = {w: [] for w in WINDOWS}
    raw = []
    for draw in range(draws):
        model = CorruptedWorldModel(base, Corruption("drift", strength, drift_steps=DRIFT_STEPS), seed=draw)
        rng = np.random.default_rng(draw)
        per_step = []
        for step in range(DRIFT_STEPS + 1):
            model.step = step
            per_step.append(predictions(model, rows))
        order = draw_groups(rows.task_ids, DRIFT_STEPS * DRIFT_PAIRS_PER_STEP, group_size, rng)
        rest = np.setdiff1d(np.arange(rows.real.size), order)
        final = per_step[DRIFT_STEPS]
        raw.append(float(np.abs(final[rest] - rows.real[rest]).mean()))
        for window in WINDOWS:
            calibrator = trainer_calibrator(**{**OVERRIDES, "pair_window": window})
            for step in range(DRIFT_STEPS):
                idx = order[step * DRIFT_PAIRS_PER_STEP:(step + 1) * DRIFT_PAIRS_PER_STEP]
                calibrator.add_pairs(per_step[step + 1][idx], rows.real[idx], list(rows.task_ids[idx]),
                                     list(rows.strata[idx]))
            cal = calibrator.calibrate(final[rest], list(rows.task_ids[rest]))
            maes[window].append(float(np.abs(cal - rows.real[rest]).mean()))
    return [{"suite": suite, "strength": strength, "draws": draws, "raw": finite_mean_se(raw),
             "by_window": {str(w): finite_mean_se(v) for w, v in maes.items()}}]


def fmt(stat: dict[str, float], digits: int = 3) -> str:
    return "—" if not math.isfinite(stat["mean"]) else f"{stat['mean']:.{digits}f} ± {stat['se']:.{digits}f}"


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = ["### The calibrator against a corrupted world model (no training, executed corpus rows)", "",
             f"Out-of-sample rows of the shipped surrogate: {meta['rows']}. {meta['draws']} draws per setting "
             f"(each its own corruption seed), anchors in groups of {meta['group_size']}, calibrator settings of "
             "the trainer; mean ± SE over draws. *Reduction*: 1 − calibrated/raw MAE on the rows not drawn. "
             "*Var ratio*: variance of the calibrated residual / that of the raw one (objection 4: above 1, "
             "the map expands noise). *Flagged at n*: share of draws whose audit reports `monotone_ok = False` "
             "at n pairs (not cumulative); *median first flag*: over the pair counts checked.", ""]
    for suite in dict.fromkeys(r["suite"] for r in result["rows"]):
        lines += [f"**{suite}**", "",
                  "| corruption | strength | MAE raw @100 | MAE calibrated @40 | @100 | reduction @100 | "
                  "var ratio @100 | flagged at 40 | 60 | 100 | 200 | median first flag |",
                  "|---|---:|---|---|---|---|---|---:|---:|---:|---:|---:|"]
        for r in (r for r in result["rows"] if r["suite"] == suite):
            m, a = r["mae"], r["audit"]["flag_rate"]
            first = r["audit"]["median_first_flag"]
            strength = "" if r["strength"] is None else f"{r['strength']:g}"
            lines.append(
                f"| {r['corruption']} | {strength} | {fmt(m[100]['raw'])} | {fmt(m[40]['calibrated'])} | "
                f"{fmt(m[100]['calibrated'])} | {fmt(m[100]['reduction'], 2)} | "
                f"{fmt(m[100]['var_ratio'], 2)} | {a[40]:.2f} | {a[60]:.2f} | {a[100]:.2f} | {a[200]:.2f} | "
                f"{'never (median)' if first is None else f'{first:.0f}'} |")
        clean = next((r for r in result["rows"] if r["suite"] == suite and r["corruption"] == "none"), None)
        if clean is not None:
            lines += ["", f"Clean surrogate: calibrated MAE at 100 pairs {fmt(clean['mae'][100]['calibrated'])} against "
                      f"the in-sample isotonic floor {clean['isotonic_floor_mae']:.3f} (gap "
                      f"{clean['mae'][100]['calibrated']['mean'] - clean['isotonic_floor_mae']:+.3f}).", ""]
    if result["drift"]:
        lines += [f"**Drift and forgetting** (drift strength {meta['drift_strength']}, {DRIFT_STEPS} steps of "
                  f"{DRIFT_PAIRS_PER_STEP} pairs; MAE of the final map on the final step's predictions)", "",
                  "| suite | raw | all pairs | window 40 | window 80 |", "|---|---|---|---|---|"]
    for d in result["drift"]:
        w = d["by_window"]
        lines.append(f"| {d['suite']} | {fmt(d['raw'])} | {fmt(w['None'])} | {fmt(w['40'])} | {fmt(w['80'])} |")
    lines += ["", f"{meta['cores']} cores, {meta['date'][:10]}, commit `{meta['commit'][:10]}`. "
              f"Rerun: `{rerun_command(__spec__.name, meta['argv'])}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES))
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--drift-strength", type=float, default=4.0)
    parser.add_argument("--calibration", nargs="+", default=[], metavar="NAME=VALUE",
                        help="override a calibrator setting, e.g. stratum_z=3 or global_form=isotonic")
    parser.add_argument("--kinds", nargs="+", default=list(STRENGTHS), choices=list(STRENGTHS),
                        help="corruptions to run (default: all)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    for item in args.calibration:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--calibration takes NAME=VALUE, got {item!r}")
        OVERRIDES[name] = setting_value(value)
    base = CachedWorldModel(make_world_model("surrogate"))
    rows_out, drift_out, counts = [], [], {}
    for suite in args.suites:
        rows = load_rows(suite)
        counts[suite] = f"{rows.real.size} rows of {len(set(rows.task_ids))} tasks"
        rows_out += corruption_rows(suite, rows, base, args.draws, args.group_size, args.kinds)
        if "none" in args.kinds:  # the drift table sits with the full run
            drift_out += drift_rows(suite, rows, base, args.draws, args.group_size, args.drift_strength)
    meta = {**provenance(), "rows": "; ".join(f"{s}: {c}" for s, c in counts.items()), "draws": args.draws,
            "group_size": args.group_size, "drift_strength": args.drift_strength,
            "calibrator": replace(WMRLConfig().calibration, **OVERRIDES).to_dict(), "argv": sys.argv[1:] if argv is None else argv}
    result = {"meta": meta, "rows": rows_out, "drift": drift_out}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "corruption_calibration.json").write_text(json.dumps(result, indent=1, default=str))
    md = markdown(result)
    (args.out / "corruption_calibration.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
