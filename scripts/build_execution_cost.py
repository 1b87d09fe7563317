"""Measure what full runs of the corpora's train-split scripts cost, and fit the execution-cost model.

Every train-split row of the executed corpora (``assets/world_models/*corpus.csv``) runs again in
today's sandbox (the default executor, every script executed, none proved), and its CPU-seconds
are memoised in ``assets/world_models/cost_corpus.csv.xz``, so a rerun executes only what the memo
lacks. Rows whose recorded run timed out and the non-termination mutants are left out: a script
that never ends costs its wall cap, whatever its features say. Held-out rows are never read.
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
CORPORA = [ASSETS / n for n in ("corpus.csv", "dsbench_corpus.csv", "handwritten_corpus.csv", "outcome_corpus.csv")]
MEMO = ASSETS / "cost_corpus.csv.xz"
KEY = ["corpus", "task_id", "choices", "seed", "mutation"]
CHUNK = 64


def corpus_frame() -> pd.DataFrame:
    """The train-split rows to measure (no timeouts, no non-termination mutants)."""
    frame = pd.concat([corpus_lib.read_corpus(p).assign(corpus=p.name) for p in CORPORA], ignore_index=True)
    frame = frame[(frame["split"] == "train") & (frame["outcome"] != outcome.TIMEOUT)]
    return frame[~frame["mutation"].isin(corpus_lib.TIMEOUT_MUTATIONS)].reset_index(drop=True)


def read_memo() -> pd.DataFrame:
    if MEMO.is_file():
        return pd.read_csv(MEMO, keep_default_na=False, dtype={"seed": int})
    return pd.DataFrame(columns=[*KEY, "split", "status", "cpu_s", "wall_s"])


def run_missing(frame: pd.DataFrame, memo: pd.DataFrame, workers: int) -> pd.DataFrame:
    """Execute every row the memo lacks (in chunks, each appended to the memo)."""
    done = set(map(tuple, memo[KEY].astype(str).to_numpy()))
    todo = frame[[tuple(map(str, k)) not in done for k in frame[KEY].to_numpy()]]
    log.info("%d train rows, %d already in %s, %d to run", len(frame), len(frame) - len(todo), MEMO.name, len(todo))
    if todo.empty:
        return memo
    scorer, tasks = CodeScorer(workers=workers, prove=False, reuse=False, neighbours=False), {}
    bar = tqdm(total=len(todo), desc="full runs")
    try:
        for start in range(0, len(todo), CHUNK):
            chunk = todo.iloc[start:start + CHUNK]
            items = corpus_lib.corpus_items(chunk)
            row_tasks = [tasks.setdefault(i.task_id, get_task(i.task_id)) for i in items]
            scripts = [i.script(t.spec, render_solution) for i, t in zip(items, row_tasks)]
            results = scorer.execute(row_tasks, scripts)
            # An infrastructure failure measured nothing: it is left out, and a rerun tries it again.
            rows = [{**{k: getattr(row, k) for k in KEY}, "split": row.split, "status": r.status,
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
    items = corpus_lib.corpus_items(rows)
    tasks = {}
    row_tasks = [tasks.setdefault(i.task_id, get_task(i.task_id)) for i in items]
    scripts = [i.script(t.spec, render_solution) for i, t in zip(items, row_tasks)]
    record = provenance()
    return fit_cost_model(feature_rows(row_tasks, scripts), rows["cpu_s"].astype(float).to_numpy(), rows["task_id"].tolist(), FEATURE_NAMES,
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
    memo = read_memo()
    if not args.fit_only:
        memo = run_missing(corpus_frame(), memo, args.workers)
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
