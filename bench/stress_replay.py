"""Replay a stress run's calibrator step by step, from its record alone (issue 28).

A stress run (``bench/stress.py``) records its calibrator's state at the end (every anchor pair,
with its task and stratum, in the order they came) and how many pairs it held after each step.
That is enough to rebuild the calibrator as the run saw it after every step, without executing
anything: the pairs of each step are added in turn, and the audit is read. This answers what the
record's one number a step (``stratum_z_max``) cannot: which stratum the check read, from how
many distinct pairs, with what bias, and which strata the correction set aside.

    python -m bench.stress_replay bench/results/stress_runs/t_check/swap0.3-wmrl-std-seed8.json
    python -m bench.stress_replay RUN.json --min-abs-z 2.5      # only the strata near the alarm

A record is named by its path in its run folder, and read from the folder's archive
(:func:`bench.archive.read_record`: the run above is in ``stress_runs/t_check.jsonl.xz``).

Every step's largest |z| is checked against the one the run logged; a difference beyond
``Z_TOLERANCE`` is reported, and the command then exits 1 (the replay is not the run).
Records written before the state was recorded (issue 28, December 2026) cannot be replayed.

The check reads a monotone map's residuals, also where the reward's global map is a line
(``calibration.maps.cross_fitted``). Records made before that (they lack ``stratum_check``) logged
the line's residuals on such steps: the replay shows those steps' logged |z| but does not
compare it, and marks them.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.archive import read_record
from bench.stress_records import STRATUM_CHECK
from wmrl_envs.calibration import Calibrator, CalibratorConfig

#: Largest difference allowed between a replayed step's largest |z| and the logged one. The
#: replay adds the same pairs in the same order, so the two agree to the last bits; the slack is
#: for a JSON round trip of the scores (shortest round-trip form, so in practice exact).
Z_TOLERANCE = 1e-9


class ReplayError(ValueError):
    """A run record that cannot be replayed."""


@dataclass(frozen=True)
class StratumReading:
    """One stratum as the check read it after one step. Once the correction sets a stratum aside,
    the audit reads its residuals after the correction, and ``offset`` is what was subtracted."""

    name: str
    distinct_pairs: int
    bias: float
    z: float
    offset: float | None

    @property
    def set_aside(self) -> bool:
        return self.offset is not None


@dataclass(frozen=True)
class StepReading:
    """The calibrator after one training step."""

    step: int
    pairs: int
    strata: list[StratumReading]
    z_max: float | None
    logged_z_max: float | None
    comparable: bool = True  # False: the run logged the line's residuals, the replay reads a monotone map's

    @property
    def agrees(self) -> bool:
        """Whether the replay gives the logged |z| (a step that is not comparable agrees with nothing)."""
        if not self.comparable:
            return False
        if self.z_max is None or self.logged_z_max is None:
            return self.z_max is None and self.logged_z_max is None
        return math.isclose(self.z_max, self.logged_z_max, rel_tol=0.0, abs_tol=Z_TOLERANCE)


def replay(record: dict[str, Any]) -> list[StepReading]:
    """The calibrator of the run ``record`` after each of its steps."""
    state = record.get("calibrator_state")
    per_step = record.get("pairs_per_step")
    if state is None or per_step is None:
        raise ReplayError("the record holds no calibrator state (it predates issue 28's replay); "
                          "rerun the run with bench/stress.py to record one")
    wm, real = np.asarray(state["wm_scores"], float), np.asarray(state["real_scores"], float)
    tasks = np.asarray(state["task_ids"], dtype=object)
    strata = np.asarray(state.get("strata") or [None] * wm.size, dtype=object)
    counts = [0 if n is None else int(n) for n in per_step]
    if counts != sorted(counts) or (counts and counts[-1] != wm.size):
        raise ReplayError(f"pairs_per_step {counts} does not end at the state's {wm.size} pairs in order")
    config = CalibratorConfig.from_dict(state["config"])
    calibrator = Calibrator(config)
    logged = record.get("stratum_z_max") or [None] * len(counts)
    line = record.get("global_affine") or [None] * len(counts)
    logged_the_line = record.get("stratum_check") != STRATUM_CHECK
    readings, done = [], 0
    for step, upto in enumerate(counts):
        if upto > done:
            calibrator.add_pairs(wm[done:upto], real[done:upto], tasks[done:upto].tolist(), strata[done:upto].tolist())
            done = upto
        report = calibrator.audit()
        aside = calibrator.debiased_strata
        readings.append(StepReading(
            step=step + 1, pairs=done,
            strata=[StratumReading(name, report.stratum_distinct_pairs[name], report.stratum_bias[name],
                                   z, aside.get(name))
                    for name, z in report.stratum_z.items()],
            z_max=max((abs(z) for z in report.stratum_z.values()), default=None),
            logged_z_max=logged[step],
            comparable=not (logged_the_line and (config.global_form == "affine" or line[step] == 1.0))))
    return readings


def render(name: str, readings: list[StepReading], min_abs_z: float) -> str:
    lines = [f"{name}", "step  pairs  max|z| (logged)   strata with |z| >= "
             f"{min_abs_z:g} or set aside: name (distinct pairs) bias z [offset subtracted, when set aside]"]
    for r in readings:
        shown = [f"{s.name} ({s.distinct_pairs}) {s.bias:+.3f} {s.z:+.2f}{f' [{s.offset:+.3f}]' if s.set_aside else ''}"
                 for s in sorted(r.strata, key=lambda s: -abs(s.z)) if abs(s.z) >= min_abs_z or s.set_aside]
        z = "-" if r.z_max is None else f"{r.z_max:.2f}"
        logged = "-" if r.logged_z_max is None else f"{r.logged_z_max:.2f}"
        flag = ("" if r.agrees else "  REPLAY DIFFERS FROM THE RUN") if r.comparable else "  (logged: the line's)"
        lines.append(f"{r.step:>4} {r.pairs:>6}  {z:>6} ({logged:>5})   " + "; ".join(shown) + flag)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path,
                        help="stress run records, each by its path in its run folder (RUNS/NAME.json)")
    parser.add_argument("--min-abs-z", type=float, default=0.0, help="show only strata with |z| at least this")
    args = parser.parse_args(argv)
    disagreements = 0
    for path in args.records:
        try:
            readings = replay(read_record(path))
        except (OSError, lzma.LZMAError, json.JSONDecodeError, ReplayError) as error:
            print(f"{path}: cannot replay: {error}", file=sys.stderr)
            disagreements += 1
            continue
        print(render(path.name, readings, args.min_abs_z), end="\n\n")
        disagreements += sum(r.comparable and not r.agrees for r in readings)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
