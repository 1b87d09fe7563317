"""Measure what a run on a sample of the task says about the full run, and write the sample-run head.

Every executed corpus row (``assets/world_models/*corpus.csv``, every split) that no static proof
settles is run again on its task's sample (:func:`wmrl_envs.world_models.sample_run.sample_view`,
the default :class:`SampleRunConfig`), beside its recorded full run, and the pairs are measured by
:func:`wmrl_envs.world_models.build.sample_head.fit_head` (exact failure classes, P(valid) after a
sample's outcome, the valid score's blend). The runs are memoised in
``assets/world_models/sample_corpus.csv.xz``, so a rerun executes only what that file lacks.

Rows whose full run timed out, and the non-termination mutants, are not run: a sample run of a
script that never ends costs its whole wall cap and a timeout is never exact.

    python scripts/build_sample_run_head.py            # run what the memo lacks, fit, write the head
    python scripts/build_sample_run_head.py --fit-only # refit from the memo
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
from wmrl_envs.analysis.proofs import Prover
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.build import corpus as corpus_lib
from wmrl_envs.world_models.build.sample_head import fit_head
from wmrl_envs.world_models.sample_run import (
    SampleRunConfig,
    SampleRunHead,
    SampleRunWorldModel,
    default_head_path,
    valid_estimate,
)
from wmrl_envs.world_models.surrogate import SurrogateWorldModel

log = logging.getLogger("build_sample_run_head")
ASSETS = REPO / "assets" / "world_models"
CORPORA = [ASSETS / name for name in corpus_lib.EXECUTED_CORPORA]
MEMO = ASSETS / "sample_corpus.csv.xz"
CHUNK = 64
MEMO_COLUMNS = [*corpus_lib.MEMO_KEY, "split", "full_outcome", "full_exception", "real_score", "proved",
                "sample_status", "sample_exception", "sample_score", "sample_cpu_s", "model_valid", "sample_config"]


def config_label(config: SampleRunConfig) -> str:
    """The sample's size as the memo records it: runs made at another size are run again."""
    return f"{config.fraction:g}:{config.min_train_rows}:{config.max_test_rows}:{config.seed}"


def current_rows(memo: pd.DataFrame) -> pd.DataFrame:
    """The memo's runs made at the default sample size (a memo from before the size was recorded
    was made at 8% and 200 rows)."""
    made = memo["sample_config"] if "sample_config" in memo else pd.Series("0.08:200:20000:0", index=memo.index)
    kept = memo[made.astype(str) == config_label(SampleRunConfig())].copy()
    if len(kept) < len(memo):
        log.info("%d memo rows were run at another sample size: they run again", len(memo) - len(kept))
    return kept.assign(sample_config=config_label(SampleRunConfig()))


def run_missing(frame: pd.DataFrame, memo: pd.DataFrame) -> pd.DataFrame:
    """Run every row the memo lacks on its sample (in chunks, each appended to the memo)."""
    todo = corpus_lib.rows_to_run(frame, memo)
    log.info("%d corpus rows, %d already in %s, %d to run", len(frame), len(frame) - len(todo), MEMO.name, len(todo))
    if todo.empty:
        return memo
    model = SampleRunWorldModel(base=SurrogateWorldModel.load(), head=SampleRunHead())
    prover = Prover()
    bar = tqdm(total=len(todo), desc="sample runs")
    try:
        for start in range(0, len(todo), CHUNK):
            chunk = todo.iloc[start:start + CHUNK]
            row_tasks, scripts = corpus_lib.rendered(chunk, render_solution, get_task)
            proved = [prover.prove(t, s) is not None for t, s in zip(row_tasks, scripts)]
            run = [i for i, p in enumerate(proved) if not p]
            results = dict(zip(run, model.run_samples([row_tasks[i] for i in run], [scripts[i] for i in run])))
            base = dict(zip(run, model.base.predict([row_tasks[i] for i in run], [scripts[i] for i in run])))
            rows = []
            for i, row in enumerate(chunk.itertuples()):
                result = results.get(i)
                rows.append({**{k: getattr(row, k) for k in corpus_lib.MEMO_KEY}, "split": row.split,
                             "full_outcome": row.outcome,
                             "full_exception": row.exception or "", "real_score": row.real_score,
                             "proved": proved[i],
                             "sample_status": "" if result is None else result.status,
                             "sample_exception": "" if result is None else result.exception or "",
                             "sample_score": np.nan if result is None else result.score,
                             "sample_cpu_s": np.nan if result is None else round(result.cpu_s, 3),
                             "model_valid": np.nan if i not in base else round(valid_estimate(base[i]), 6),
                             "sample_config": config_label(model.config)})
            memo = pd.concat([memo, pd.DataFrame(rows)], ignore_index=True)
            memo.to_csv(MEMO, index=False)
            bar.update(len(chunk))
    finally:
        bar.close()
        model.close()
    return memo


def with_base_predictions(memo: pd.DataFrame) -> pd.DataFrame:
    """The base model's reward, P(valid) and uncertainty on every sample-run row (computed once for
    each row, kept in the memo): what a run rule decides from."""
    columns = ("model_score", "model_p_valid", "model_uncertainty")
    # Numbers, whether the memo was read back as text or never had the columns.
    memo = memo.assign(**{c: pd.to_numeric(memo[c], errors="coerce") if c in memo else np.nan for c in columns})
    missing = memo["model_score"].isna()
    ran = memo.index[(~memo["proved"].astype(bool)) & (memo["sample_status"] != "") & missing]
    if ran.empty:
        return memo
    row_tasks, scripts = corpus_lib.rendered(memo.loc[ran], render_solution, get_task)
    predictions = SurrogateWorldModel.load().predict(row_tasks, scripts)
    memo.loc[ran, "model_score"] = [round(p.score, 6) for p in predictions]
    memo.loc[ran, "model_p_valid"] = [round(p.p_valid, 6) for p in predictions]
    memo.loc[ran, "model_uncertainty"] = [round(p.uncertainty, 6) for p in predictions]
    memo.to_csv(MEMO, index=False)
    return memo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-only", action="store_true", help="refit from the memo without running anything")
    parser.add_argument("--output", type=Path, default=default_head_path())
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.time()
    memo = current_rows(corpus_lib.read_memo(MEMO, MEMO_COLUMNS))
    if not args.fit_only:
        memo = run_missing(corpus_lib.executed_rows(CORPORA), memo)
    head = fit_head(with_base_predictions(memo))
    head.save(args.output)
    m = head.measured
    log.info("wrote %s in %.0f s: %d rows run, %d false failures of %d failures, exact %s, "
             "score head %s, leave-task-out Spearman %s", args.output, time.time() - start, m["rows_run"],
             m["false_failures"], m["failures"], list(head.exact), head.weights, m["leave_task_out_spearman"])
    for rule, figures in m.get("run_rules", {}).items():
        log.info("  run rule %-50s %s", rule, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
