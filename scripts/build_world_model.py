"""Build the surrogate world model's corpus and artefact.

Execute sampled grammar solutions (plus reference and deliberately broken ones) in the
sandbox and append the outcomes to the corpus CSV; rerunning resumes where it stopped::

    python scripts/build_world_model.py --corpus assets/world_models/corpus.csv --split train --per-task 14
    python scripts/build_world_model.py --corpus assets/world_models/corpus.csv --split heldout --per-task 15

After a change to the renderer that alters what some tasks' scripts do, re-execute those tasks::

    python scripts/build_world_model.py --split train --per-task 13 --tasks gss-income movie-ratings --replace

Execute mutants of grammar solutions, every operator of ``wmrl_envs/mutations.py`` in
turn, for the outcome corpus the status head and the prover are measured on::

    python scripts/build_world_model.py --corpus assets/world_models/outcome_corpus.csv --suite mle --split all \
        --mutants 12 --loop-wall-s 6
    python scripts/build_world_model.py --corpus assets/world_models/outcome_corpus.csv --suite dsbench --split all \
        --mutants 12 --loop-wall-s 6

Execute hand-written solutions (every style of ``agents/code/handwritten.py`` on every task,
then their mutants), so the status head learns outcomes rather than the grammar's idiom::

    python scripts/build_world_model.py --corpus assets/world_models/handwritten_corpus.csv --suite mle \
        --split all --handwritten --per-task 5 --broken-fraction 0
    python scripts/build_world_model.py --corpus assets/world_models/handwritten_corpus.csv --suite mle \
        --split all --handwritten --mutants 6 --loop-wall-s 6

(and the same with ``--suite dsbench``).

Give the rows of a corpus built before outcomes were recorded their outcome (valid rows at once,
the others by running them again)::

    python scripts/build_world_model.py --corpus assets/world_models/corpus.csv --fill-outcomes

Fit the surrogate on the corpus's train-split rows and write ``assets/world_models/surrogate.{joblib,json}``::

    python scripts/build_world_model.py --corpus assets/world_models/corpus.csv --train

Fit the status head (P(outcome) of scripts no proof settles) on the train rows of the corpora
with recorded outcomes, and attach it to the artefact; the score heads stay as they are::

    python scripts/build_world_model.py --train-status

``--cv K`` reports grouped (leave-tasks-out) K-fold cross-validation of both heads on the train
rows instead of fitting; use it to choose settings without looking at held-out tasks. ``--train``
runs the same cross-validation (5 folds unless ``--cv`` says otherwise) and makes the head that
predicted unseen tasks better the artefact's default.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

# Agent code and the encoder both get one thread each: on a shared 2-core machine more
# threads run slower.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.code.grammar import REFERENCE_SOLUTIONS, SLOTS
from agents.code.handwritten import STYLE_KEY, STYLES, render_solution
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.tasks import get_task, list_tasks
from wmrl_envs.world_models.build import corpus as corpus_lib
from wmrl_envs.world_models.surrogate import SurrogateConfig, SurrogateWorldModel, default_path

log = logging.getLogger("build_world_model")
DEFAULT_CORPUS = REPO / "assets" / "world_models" / "corpus.csv"
DEFAULT_OUTCOME_CORPORA = [REPO / "assets" / "world_models" / name
                           for name in ("corpus.csv", "dsbench_corpus.csv", "outcome_corpus.csv",
                                        "handwritten_corpus.csv")]
# Favour cheap solutions so the corpus builds in well under an hour on two workers; every
# option keeps a fair share, so the world model still sees the expensive ones.
SLOT_WEIGHTS = {
    "capacity": {"low": 3.0, "medium": 2.0, "high": 1.0},
    "validation": {"none": 3.0, "holdout": 3.0, "cv3": 1.0},
}


render = render_solution  # grammar points and hand-written styles alike


def build(args: argparse.Namespace) -> None:
    tasks = list_tasks(suite=args.suite, split=None if args.split == "all" else args.split)
    if args.tasks:
        tasks = [t for t in tasks if t.id in set(args.tasks)]
    # Hand-written styles are planned like grammar points of one slot, every style once first.
    slots, weights = ({STYLE_KEY: tuple(STYLES)}, None) if args.handwritten else (SLOTS, SLOT_WEIGHTS)
    references = ([{STYLE_KEY: s} for s in STYLES] if args.handwritten
                  else [c.to_dict() for c in REFERENCE_SOLUTIONS.values()])
    if args.mutants:
        plan = corpus_lib.plan_mutants(tasks, slots, render, per_task=args.mutants, slot_weights=weights,
                                       seed=args.seed)
    else:
        plan = corpus_lib.plan_corpus(tasks, slots, references, per_task=args.per_task,
                                      broken_fraction=args.broken_fraction, slot_weights=weights, seed=args.seed)
    log.info("%d tasks, %d planned executions (%s split)", len(tasks), len(plan), args.split)
    if args.replace:
        dropped = corpus_lib.drop_tasks(args.corpus, [t.id for t in tasks])
        log.info("dropped %d existing rows of these tasks; they run again", dropped)
    scorer = corpus_scorer(args)
    try:
        stats = corpus_lib.build_corpus(plan, {t.id: t for t in tasks}, render, args.corpus, scorer.execute,
                                        workers=args.workers, wall_s=args.wall_s, loop_wall_s=args.loop_wall_s)
    finally:
        scorer.close()
    log.info("%s", stats)
    _record_build(args, stats)


def corpus_scorer(args: argparse.Namespace) -> CodeScorer:
    """What executes corpus rows: every script runs, unproved (the corpus is what proofs answer to)."""
    return CodeScorer(workers=args.workers, prove=False)


def _record_build(args: argparse.Namespace, stats: corpus_lib.BuildStats) -> None:
    """Append this run's counts and wall time to ``<corpus>.builds.json`` (what a build costs)."""
    log_path = Path(args.corpus).with_suffix(".builds.json")
    runs = json.loads(log_path.read_text()) if log_path.exists() else []
    runs.append({"split": args.split, "per_task": args.per_task, "workers": args.workers, "wall_cap_s": args.wall_s,
                 **provenance(), **asdict(stats)})
    log_path.write_text(json.dumps(runs, indent=2) + "\n")


def training_set(corpus_path: Path) -> tuple[list, list[str], np.ndarray, pd.DataFrame]:
    """Tasks, re-rendered scripts and real scores of the corpus's train-split rows."""
    frame = corpus_lib.read_corpus(corpus_path)
    frame = frame[frame["split"] == "train"].reset_index(drop=True)
    tasks = {tid: get_task(tid) for tid in frame["task_id"].unique()}
    items = corpus_lib.corpus_items(frame)
    row_tasks = [tasks[item.task_id] for item in items]
    scripts = [item.script(task.spec, render) for item, task in zip(items, row_tasks)]
    return row_tasks, scripts, frame["real_score"].to_numpy(float), frame


def train(args: argparse.Namespace) -> None:
    tasks, scripts, scores, frame = training_set(Path(args.corpus))
    cv = cross_validate(args, (tasks, scripts, scores, frame))
    # The default head is the one that predicts unseen tasks better (mean per-task Spearman,
    # then overall); on a tie the cheaper static head wins.
    ranked = sorted(cv["cv"], key=lambda h: (cv["cv"][h]["spearman_per_task"], cv["cv"][h]["spearman"],
                                              h == "static"))
    default_head = ranked[-1]
    metadata = {
        "corpus": {"path": os.path.relpath(Path(args.corpus).resolve(), REPO),
                   "sha256": corpus_lib.corpus_sha256(args.corpus), "rows_train": len(frame)},
        "rebuild": f"python scripts/build_world_model.py --corpus {os.path.relpath(Path(args.corpus).resolve(), REPO)} "
                   "--train",
        "head_choice": {"rule": "higher leave-tasks-out Spearman per task, then overall; static on a tie",
                        "folds": args.cv or 5, "cv": cv["cv"], "chosen": default_head},
    }
    start = time.perf_counter()
    model = SurrogateWorldModel.fit(tasks, scripts, scores, embed=not args.no_embed, config=_config(args),
                                    metadata=metadata, default_head=default_head)
    path = model.save(args.output)
    log.info("fitted on %d rows of %d tasks in %.0f s; default head %s (cv %s); wrote %s (%.0f kB)", len(scores),
             len(set(frame.task_id)), time.perf_counter() - start, default_head, cv["cv"], path,
             path.stat().st_size / 1024)


def outcome_rows(paths: list[Path], split: str) -> pd.DataFrame:
    """The rows of every corpus with a recorded outcome, of one split."""
    frames = [corpus_lib.read_corpus(p).assign(corpus=os.path.relpath(Path(p).resolve(), REPO)) for p in paths]
    frame = pd.concat(frames, ignore_index=True)
    return frame[(frame["split"] == split) & (frame["outcome"] != "")].reset_index(drop=True)


def train_status(args: argparse.Namespace) -> None:
    """Fit the status head on the train rows that no proof settles and attach it to the artefact
    (score heads unchanged)."""
    from wmrl_envs.analysis.code_features import analyse_script, feature_vector, outcome_features
    from wmrl_envs.analysis.proofs import Prover
    from wmrl_envs.world_models.status_head import StatusHeadConfig, fit_status_head

    frame = outcome_rows(args.outcome_corpora, "train")
    tasks = {tid: get_task(tid) for tid in frame["task_id"].unique()}
    prover, rows = Prover(), []
    for item, row in zip(corpus_lib.corpus_items(frame), frame.itertuples()):
        task = tasks[item.task_id]
        script = item.script(task.spec, render)
        if prover.prove(task, script) is None:
            rows.append((task, script, row.outcome, row.exception or None))
    analyses = [analyse_script(s) for _, s, _, _ in rows]
    features = np.array([feature_vector(t, a) + outcome_features(t, a) for (t, _, _, _), a in zip(rows, analyses)],
                        dtype=float)
    scripts, statuses = [s for _, s, _, _ in rows], [o for _, _, o, _ in rows]
    exceptions, groups = [e for _, _, _, e in rows], [t.id for t, _, _, _ in rows]
    head = fit_status_head(scripts, features, statuses, exceptions, groups, StatusHeadConfig(seed=args.seed))
    log.info("status head: out-of-fold log loss %.4f (temperature %.2f)", head.cv_log_loss, head.temperature)
    report = {
        "model": "gradient-boosted trees over token 1-2-gram presence, the score head's features and "
                 "the outcome features (string keys read, and those no task file has)",
        "config": asdict(StatusHeadConfig(seed=args.seed)), "cv_log_loss": round(head.cv_log_loss, 4),
        "temperature": round(head.temperature, 3), "labels": head.labels,
        "rows_train": len(frame), "rows_unproved": len(rows),
        "corpora": {os.path.relpath(Path(p).resolve(), REPO): corpus_lib.corpus_sha256(p) for p in args.outcome_corpora},
        "rebuild": "python scripts/build_world_model.py --train-status",
    }
    model = SurrogateWorldModel.load(args.output).with_status_head(head, report)
    path = model.save(args.output)
    log.info("status head on %d unproved train rows (%d labels); wrote %s", len(rows), len(head.labels), path)


def cross_validate(args: argparse.Namespace, data=None) -> dict:
    """Leave-tasks-out CV on train rows, per head: Spearman rho overall and mean per task, and MAE."""
    from scipy.stats import spearmanr

    tasks, scripts, scores, frame = data or training_set(Path(args.corpus))
    n_folds = args.cv or 5
    ids = frame["task_id"].to_numpy()
    names = np.unique(ids)
    fold_of = {name: i % n_folds for i, name in enumerate(np.random.default_rng(0).permutation(names))}
    folds = np.array([fold_of[t] for t in ids])
    config = _config(args)
    results = {}
    for embed in ([False] if args.no_embed else [False, True]):
        pred = np.empty(len(scores))
        for k in range(n_folds):
            fit_rows, test_rows = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
            model = SurrogateWorldModel.fit([tasks[i] for i in fit_rows], [scripts[i] for i in fit_rows],
                                            scores[fit_rows], embed=embed, config=config)
            pred[test_rows] = [p.score for p in model.predict([tasks[i] for i in test_rows],
                                                                [scripts[i] for i in test_rows])]
        per_task = [spearmanr(pred[ids == t], scores[ids == t]).statistic for t in names
                    if np.ptp(scores[ids == t]) > 0]
        results["embed" if embed else "static"] = {
            "spearman": round(float(spearmanr(pred, scores).statistic), 3),
            "spearman_per_task": round(float(np.nanmean(per_task)), 3),
            "mae": round(float(np.abs(pred - scores).mean()), 3),
        }
    return {"config": asdict(config), "folds": n_folds, "cv": results}


def _config(args: argparse.Namespace) -> SurrogateConfig:
    overrides = json.loads(args.config) if args.config else {}
    return replace(SurrogateConfig(), **overrides)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="corpus CSV (appended to, resumable)")
    parser.add_argument("--suite", default="mle", help="task suite")
    parser.add_argument("--split", choices=("train", "heldout", "all"), default="train", help="split to execute")
    parser.add_argument("--tasks", nargs="*", help="only these task ids")
    parser.add_argument("--per-task", type=int, default=14, help="executions per task")
    parser.add_argument("--replace", action="store_true",
                        help="re-execute the planned tasks: drop their existing rows first (needs --tasks)")
    parser.add_argument("--broken-fraction", type=float, default=0.15, help="share of mutated (broken) scripts")
    parser.add_argument("--train-status", action="store_true",
                        help="fit the status head on the outcome corpora's train rows and attach it to --output")
    parser.add_argument("--outcome-corpora", type=Path, nargs="+", default=DEFAULT_OUTCOME_CORPORA,
                        help="corpora whose recorded outcomes train the status head")
    parser.add_argument("--fill-outcomes", action="store_true",
                        help="give the corpus's rows written without outcome columns their outcome (valid rows "
                             "directly, the others by running them again), then stop")
    parser.add_argument("--mutants", type=int, default=0,
                        help="plan this many mutants per task, every operator of mutations.py in turn, instead of "
                             "grammar solutions (the outcome corpus)")
    parser.add_argument("--handwritten", action="store_true",
                        help="plan hand-written styles (agents/code/handwritten.py) instead of grammar points")
    parser.add_argument("--workers", type=int, default=2, help="sandbox runs at once")
    parser.add_argument("--wall-s", type=float, default=60.0, help="cap on each run's wall-clock limit")
    parser.add_argument("--loop-wall-s", type=float, default=30.0, help="wall-clock limit of infinite-loop runs")
    parser.add_argument("--seed", type=int, default=0, help="seeds the sampled solutions")
    parser.add_argument("--train", action="store_true", help="fit the surrogate on the train rows and save it")
    parser.add_argument("--cv", type=int, default=0, help="K-fold leave-tasks-out CV on train rows (no fit)")
    parser.add_argument("--no-embed", action="store_true", help="fit without the MiniLM embedding head")
    parser.add_argument("--config", help='SurrogateConfig overrides as JSON, e.g. \'{"n_members": 4}\'')
    parser.add_argument("--output", type=Path, default=default_path(), help="artefact path (.joblib)")
    args = parser.parse_args(argv)
    if args.replace and not args.tasks:
        parser.error("--replace re-executes named tasks only: give --tasks")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.fill_outcomes:
        tasks = {t.id: t for t in list_tasks()}
        scorer = corpus_scorer(args)
        try:
            rerun = corpus_lib.fill_outcomes(args.corpus, tasks, render, scorer.execute, workers=args.workers,
                                             wall_s=args.wall_s, loop_wall_s=args.loop_wall_s)
        finally:
            scorer.close()
        log.info("re-executed %d rows", rerun)
    elif args.train_status:
        train_status(args)
    elif args.train:
        train(args)
    elif args.cv:
        print(json.dumps(cross_validate(args), indent=2))
    else:
        build(args)


if __name__ == "__main__":
    main()
