#!/usr/bin/env python
"""Execute the hand-written out-of-sample scripts in the sandbox: their ground truth.

    python -m bench.oos.execute_scripts                    # run all, compare with the frozen outcomes.csv
    python -m bench.oos.execute_scripts --out runs/oos.csv # also keep this run's outcomes
    python -m bench.oos.execute_scripts --freeze           # once, at the freeze: write outcomes.csv
    python -m bench.oos.execute_scripts --set v2 [--freeze]   # the second set's scripts (bench/oos_v2)

Every ``scripts/<task_id>/<name>.py`` of the set runs on its task, through the same executor pool
and grader as the anchors (:class:`wmrl_envs.scoring.CodeScorer`, real execution only, the static
prover off so that every script really runs). Tasks of the set come from
:meth:`~bench.oos.FrozenSet.materialise`; any other id is a held-out task of a built-in suite. The first line
of each script is a comment naming its idiom and what its author intended (``valid``, ``crash``,
``invalid submission`` or ``wrong``); the outcome is what the run gave, whatever was intended.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path

import pandas as pd

from bench.oos import SETS, FrozenSet
from wmrl_envs.errors import ConfigError
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.scoring import CodeScorer

_HEADER = re.compile(r"^# idiom: (?P<idiom>.+); intended: (?P<intended>valid|crash|invalid submission|wrong)\b")
# What a later run must reproduce exactly, and how close its raw score must come.
_EXACT = ("status", "exception", "valid")
_SCORE_RTOL = 1e-6
MESSAGE_CHARS = 160


def read_header(path: Path) -> tuple[str, str]:
    """The idiom and the intended outcome a script's first line declares."""
    first = path.read_text(encoding="utf-8").splitlines()[0]
    match = _HEADER.match(first)
    if match is None:
        raise ConfigError(f"{path}: the first line must read '# idiom: ...; intended: valid|crash|"
                          f"invalid submission|wrong ...', got {first[:80]!r}")
    return match["idiom"], match["intended"]


def execute(frozen: FrozenSet, executor: str, workers: int) -> pd.DataFrame:
    """Run every script of the set once; one row per script."""
    paths = frozen.script_paths()
    tasks = frozen.script_tasks(paths)
    scorer = CodeScorer(executor=executor, workers=workers, prove=False)
    try:
        results = scorer.execute([tasks[p.parent.name] for p in paths], [p.read_text(encoding="utf-8") for p in paths])
    finally:
        scorer.close()
    rows = []
    for path, result in zip(paths, results):
        task = tasks[path.parent.name]
        idiom, intended = read_header(path)
        rows.append({
            "task_id": task.id, "script": path.stem, "suite": task.spec.suite, "metric": task.spec.metric,
            "intended": intended, "status": result.status, "exception": result.exception or "",
            "valid": bool(result.valid), "raw_score": result.raw_score, "reward": result.real_score,
            "infra_failure": result.infra_failure,
            "cpu_s": round(result.cost.get("execution_cpu_s", math.nan), 3),
            "wall_s": round(result.cost.get("execution_s", math.nan), 3),
            "message": (result.error or "")[:MESSAGE_CHARS], "idiom": idiom,
        })
    return pd.DataFrame(rows)


def differences(fresh: pd.DataFrame, frozen: pd.DataFrame) -> list[str]:
    """Where a fresh run disagrees with the frozen outcomes (status, exception, validity, raw score)."""
    merged = frozen.merge(fresh, on=["task_id", "script"], how="outer", suffixes=("_frozen", "_fresh"),
                          indicator="side")
    problems = [f"{r.task_id}/{r.script}: only in the {'frozen' if r.side == 'left_only' else 'fresh'} run"
                for r in merged.itertuples() if r.side != "both"]
    for r in merged[merged["side"] == "both"].to_dict("records"):
        for key in _EXACT:
            a, b = r[f"{key}_frozen"], r[f"{key}_fresh"]
            if not (a == b or (pd.isna(a) and pd.isna(b))):
                problems.append(f"{r['task_id']}/{r['script']}: {key} {a!r} frozen, {b!r} now")
        a, b = r["raw_score_frozen"], r["raw_score_fresh"]
        if not (pd.isna(a) and pd.isna(b)) and not (pd.notna(a) and pd.notna(b) and math.isclose(a, b, rel_tol=_SCORE_RTOL)):
            problems.append(f"{r['task_id']}/{r['script']}: raw score {a!r} frozen, {b!r} now")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", dest="frozen_set", choices=sorted(name for name, frozen in SETS.items() if frozen.has_scripts), default="v1",
                        help="which frozen set (default: %(default)s, bench/oos; v2: bench/oos_v2)")
    parser.add_argument("--executor", default=DEFAULT_EXECUTOR, help="sandbox backend (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="parallel executions, at most 2 here (default: 2)")
    parser.add_argument("--out", type=Path, help="also write this run's outcomes to this CSV")
    parser.add_argument("--freeze", action="store_true", help="write the set's outcomes.csv and the manifest (once)")
    args = parser.parse_args(argv)

    frozen_set = SETS[args.frozen_set]
    suite = frozen_set.definition().suite
    started = time.perf_counter()
    fresh = execute(frozen_set, args.executor, args.workers)
    wall_s = time.perf_counter() - started
    summary = fresh.groupby("status").size().to_dict()
    print(f"{len(fresh)} scripts on {fresh.task_id.nunique()} tasks in {wall_s:.0f} s wall, "
          f"{fresh.cpu_s.sum():.1f} CPU-s in the sandbox: {summary}")
    if fresh["infra_failure"].any():
        print("infrastructure failures (no outcome):", fresh[fresh.infra_failure][["task_id", "script"]].to_dict("records"),
              file=sys.stderr)
        return 1
    if args.out:
        fresh.to_csv(args.out, index=False, lineterminator="\n")
    if args.freeze:
        fresh.to_csv(frozen_set.outcomes_file, index=False, lineterminator="\n")
        manifest = frozen_set.read_manifest()
        manifest["execution"] = {
            "executor": args.executor, "workers": args.workers, "wall_s": round(wall_s, 1),
            "sandbox_cpu_s": round(float(fresh.cpu_s.sum()), 1), "scripts": len(fresh),
            "scripts_on_new_tasks": int((fresh.suite == suite).sum()), "statuses": summary,
            "intended": fresh.groupby("intended").size().to_dict(),
        }
        frozen_set.write_manifest(manifest)
        print(f"froze {frozen_set.outcomes_file}")
        return 0
    if not frozen_set.outcomes_file.is_file():
        return 0
    frozen = pd.read_csv(frozen_set.outcomes_file)
    frozen["exception"] = frozen["exception"].fillna("")  # an empty field is no exception, as in a fresh run
    problems = differences(fresh, frozen)
    for line in problems:
        print("  " + line)
    print(f"{len(problems)} difference(s) from the frozen outcomes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
