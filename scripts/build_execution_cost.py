"""Measure what full runs of the corpora's train-split scripts cost, and fit the execution-cost model.

Every train-split row of the executed corpora (``assets/world_models/*corpus.csv``) with a recorded
outcome runs again in today's sandbox (the default executor, every script executed, none proved),
and its CPU-seconds are memoised in ``assets/world_models/cost_corpus.csv.xz``, so a rerun executes
only what the memo lacks. Rows whose recorded run timed out and the non-termination mutants are left
out (:func:`~wmrl_envs.world_models.build.corpus.executed_rows`): a script that never ends costs its
wall cap, whatever its features say. Held-out rows are never read.
:func:`wmrl_envs.world_models.build.execution_cost.fit_cost_model` then fits and measures the model
(task-grouped cross-validation), which goes to ``assets/world_models/execution_cost.json``.

    python scripts/build_execution_cost.py             # run what the memo lacks, fit, write the model
    python scripts/build_execution_cost.py --fit-only  # refit from the memo
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.code.handwritten import render_solution
from wmrl_envs import outcome
from wmrl_envs.analysis.code_features import FEATURE_NAMES
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.build import corpus as corpus_lib
from wmrl_envs.world_models.build.execution_cost import fit_cost_model
from wmrl_envs.world_models.execution_cost import ExecutionCostModel, default_cost_path, feature_rows

log = logging.getLogger("build_execution_cost")
ASSETS = REPO / "assets" / "world_models"
CORPORA = [ASSETS / name for name in corpus_lib.EXECUTED_CORPORA]
MEMO = ASSETS / "cost_corpus.csv.xz"
CHUNK = 64


def run_missing(frame: pd.DataFrame, memo: pd.DataFrame, workers: int) -> pd.DataFrame:
    """Execute every train-split row the memo lacks (in chunks, each appended to the memo)."""
    todo = corpus_lib.rows_to_run(frame[frame["split"] == "train"], memo)
    log.info("%d train rows, %d to run (the rest are in %s)", (frame["split"] == "train").sum(), len(todo), MEMO.name)
    if todo.empty:
        return memo
    scorer = CodeScorer(workers=workers, prove=False, reuse=False, neighbours=False)
    bar = tqdm(total=len(todo), desc="full runs")
    try:
        for start in range(0, len(todo), CHUNK):
            chunk = todo.iloc[start:start + CHUNK]
            results = scorer.execute(*corpus_lib.rendered(chunk, render_solution, get_task))
            # An infrastructure failure measured nothing: it is left out, and a rerun tries it again.
            rows = [{**{k: getattr(row, k) for k in corpus_lib.MEMO_KEY}, "split": row.split, "status": r.status,
                     "cpu_s": round(r.cost.get("execution_cpu_s", np.nan), 4),
                     "wall_s": round(r.cost.get("execution_s", np.nan), 4)}
                    for row, r in zip(chunk.itertuples(), results) if not r.infra_failure]
            if len(rows) < len(chunk):
                log.warning("%d runs failed for the infrastructure; a rerun tries them again", len(chunk) - len(rows))
            memo = pd.concat([memo, pd.DataFrame(rows)], ignore_index=True)
            memo.to_csv(MEMO, index=False)
            bar.update(len(chunk))
    finally:
        bar.close()
        scorer.close()
    return memo


def fit(memo: pd.DataFrame) -> ExecutionCostModel:
    """The model of every measured run with a CPU time, but those that timed out today (a script that
    never ends costs its wall cap, whatever its features say)."""
    rows = memo[(pd.to_numeric(memo["cpu_s"], errors="coerce") > 0)
                & (memo["status"] != outcome.TIMEOUT)].reset_index(drop=True)
    record = provenance()
    return fit_cost_model(feature_rows(*corpus_lib.rendered(rows, render_solution, get_task)), rows["cpu_s"].astype(float).to_numpy(), rows["task_id"].tolist(), FEATURE_NAMES,
                          provenance={"memo": MEMO.name, "measured_on": {k: record[k] for k in ("cpu", "cores", "date")},
                                      "rebuild": "python scripts/build_execution_cost.py"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-only", action="store_true", help="refit from the memo without running anything")
    parser.add_argument("--workers", type=int, default=2, help="parallel executions")
    parser.add_argument("--output", type=Path, default=default_cost_path())
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.time()
    memo = corpus_lib.read_memo(MEMO, [*corpus_lib.MEMO_KEY, "split", "status", "cpu_s", "wall_s"])
    if not args.fit_only:
        memo = run_missing(corpus_lib.executed_rows(CORPORA), memo, args.workers)
    model = fit(memo)
    model.save(args.output)
    m = model.measured
    log.info("wrote %s in %.0f s: %d runs of %d tasks; alpha %s; out of fold: RMSE(log) %.3f, Spearman %.3f "
             "(within task %.3f), a group's price %.3f", args.output, time.time() - start, m["rows"], m["tasks"],
             m["alpha"], model.residual_sd, m["cv_spearman"], m["cv_spearman_within_task_mean"] or float("nan"),
             m["cv_group_spearman"] or float("nan"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
