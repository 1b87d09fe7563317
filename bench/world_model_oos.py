"""The world model out of sample (issue 44): on tasks, code and generators that no fit has seen.

Every figure is measured on a frozen held-out set (``--set``: ``v1``, ``bench/oos``, the default;
``v2``, ``bench/oos_v2``, on which each change is judged once by a registration of its own) or on corpus rows whose
generator was left out of the fit, and each is labelled with what was held out. Nothing here
fits, tunes or selects anything on a frozen set (``bench/oos/README.md`` says why); the only thing
fitted is the status head of section 3, on corpus rows of the train split.

1. **Unseen tasks, valid scripts.** The world model's reward against the real one on the set's new
   tasks: the hand-written scripts that ran valid there, and grammar scripts
   (``agents/code/grammar.py``) drawn uniformly over the grammar by ``plan_corpus`` (the
   untrained grammar policy is near uniform), ``--grammar-seed``, in plan order until a task has
   ``--grammar-per-task`` valid ones. Their executions are memoised in
   ``bench/results/world_model_oos[_v2]_grammar.csv`` (one row per executed draw, the script's
   sha256 beside it), so a rerun executes only what the memo lacks. Pooled Spearman, mean
   within-task Spearman, pairwise accuracy within task, MAE.
2. **Hand-written LLM-style scripts** (the set's ``scripts/``, ground truth its
   ``outcomes.csv``): status accuracy, failure recall, exception-class match, AUC and
   ECE of P(valid), within-task Spearman and pairwise accuracy on the valid ones, failing scripts
   rewarded above their task's median valid reward, false proofs.
3. **Leave one operator family out** (``--lofo``): the mutants of ``wmrl_envs/mutations.py``
   grouped into :data:`OPERATOR_FAMILIES`; for each family asked for, the status head is refitted
   as ``scripts/build_world_model.py --train-status`` fits it, without that family's train rows,
   and predicts the family's held-out-split rows, beside the shipped head (which saw the family).
   A refit costs about 5 CPU-minutes (six boosted-tree fits: five out-of-fold for the
   temperature, one final), so it runs only on the families named. The committed baseline ran
   ``submission_format`` and ``columns``, the two families with the most held-out rows that no
   proof settles (66 and 43; the head answers only those), chosen before any refit ran.
4. **Prequential anchors of a training run** (``--run DIR``): the anchors' (world-model score,
   real score) pairs from the run's checkpoint, each dated by ``calibration/n_pairs`` in its
   ``metrics.csv``, by third of the run: Spearman and MAE of the raw score, and MAE of the score
   calibrated by the calibrator as it stood before the anchor's step.

Intervals are percentile bootstrap 95% intervals over ``--resamples`` resamples of the scripts
(drawn with replacement from the pooled set, ``--bootstrap-seed``).

    python -m bench.world_model_oos                                   # sections 1 and 2
    python -m bench.world_model_oos --set v2 --world-model sample_run    # the second frozen set
    python -m bench.world_model_oos --lofo api_drift columns --run runs/main-...
    python -m bench.world_model_oos --world-model llm_outcome --name world_model_oos_llm
    # section 4 alone, for runs side by side (label=folder), with their final held-out scores:
    python -m bench.world_model_oos --prequential-only old=runs/a new=runs/b --name prequential_ab
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from bench import world_model_metrics as metrics
from bench.common import auroc, write_result
from bench.oos import SETS
from bench.oos.rows import (
    GRAMMAR_DRAW_FACTOR,
    GRAMMAR_PER_TASK,
    GRAMMAR_SEED,
    NAME,
    grammar_memo,
    grammar_rows,
    handwritten_rows,
    result_name,
)
from wmrl_envs import outcome
from wmrl_envs.errors import ConfigError
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.task_spec import Task

REPO = Path(__file__).resolve().parents[1]
RESAMPLES = 2000
BOOTSTRAP_SEED = 0
#: The mutation operators by the kind of mistake they make, fixed before any refit was measured.
OPERATOR_FAMILIES: dict[str, tuple[str, ...]] = {
    "syntax": ("syntax_error",),
    "names": ("exception", "undefined_name", "use_before_def", "conditional_name"),
    "columns": ("wrong_column", "kaggle_column_names", "lowercase_headers", "test_missing_column"),
    "files": ("missing_input_file", "kaggle_working_dir", "no_submission"),
    "api_drift": ("missing_module", "wrong_import_source", "dataframe_append", "missing_attribute",
                  "misspelled_kwarg"),
    "estimator_use": ("proba_matrix_column", "unfitted_transformer", "fit_order", "unencoded_strings",
                      "single_output_multi_target"),
    "non_termination": ("infinite_loop", "endless_data_loop"),
    "submission_format": ("wrong_columns", "label_codes", "missing_class_columns", "nan_predictions", "too_few_rows",
                          "extra_columns"),
}
#: The corpora the status head is fitted on, in ``scripts/build_world_model.py --train-status``'s order.
OUTCOME_CORPORA = ("corpus.csv", "dsbench_corpus.csv", "outcome_corpus.csv", "handwritten_corpus.csv")


# ----------------------------------------------------------------------------- predictions


def default_world_model() -> str:
    """The world model ``wmrl train`` uses by default."""
    from dataclasses import fields

    from trainers.wmrl_config import FamilyConfig

    return next(f.default for f in fields(FamilyConfig) if f.name == "world_model")


def load_world_model(name: str):
    """The world model ``name`` with the options ``wmrl train`` gives it, and the CPU-s its load took."""
    from trainers.wmrl_config import FamilyConfig
    from wmrl_envs.world_models import make_world_model

    cpu = time.process_time()
    model = make_world_model(name, **FamilyConfig(world_model=name).world_model_kwargs())
    return model, time.process_time() - cpu


def predict(model, tasks: list[Task], scripts: list[str]) -> tuple[pd.DataFrame, float]:
    """The world model's outcome for every script (one batch), and its CPU-s per script."""
    cpu = time.process_time()
    out = model.predict(tasks, scripts)
    # A multi-fidelity model's sample runs spend CPU in the sandbox, which this process's clock misses.
    cpu_per_script = (time.process_time() - cpu + sum(p.cpu_s for p in out)) / max(len(scripts), 1)
    frame = pd.DataFrame({"pred_status": [p.status for p in out], "pred_exception": [p.exception or "" for p in out],
                          "p_valid": [p.p_valid for p in out], "pred_reward": [p.score for p in out],
                          "proved": [bool(p.proved) for p in out], "parsed": [bool(p.parsed) for p in out],
                          "stage": [p.stage for p in out]})
    return frame, cpu_per_script


# ----------------------------------------------------------------------------- sections 1 and 2


def interval(statistic: Callable[[np.ndarray], float], n: int, args: argparse.Namespace) -> dict[str, float | int]:
    return metrics.bootstrap(statistic, n, args.resamples, args.bootstrap_seed)


def ranking(rows: pd.DataFrame, args: argparse.Namespace) -> dict[str, Any]:
    """Section 1's figures on valid scripts, each with its interval."""
    score, real = rows["pred_reward"].to_numpy(float), rows["reward"].to_numpy(float)
    tasks = rows["task_id"].to_numpy(object)
    return {
        "scripts": len(rows), "tasks": int(rows["task_id"].nunique()),
        "spearman_pooled": interval(lambda i: metrics.spearman(score[i], real[i]), len(rows), args),
        "spearman_within_task": interval(lambda i: metrics.mean_within_task_spearman(score[i], real[i], tasks[i]),
                                         len(rows), args),
        "pairwise_within_task": interval(lambda i: metrics.pairwise_accuracy(score[i], real[i], tasks[i]),
                                         len(rows), args),
        "mae": interval(lambda i: float(np.mean(np.abs(score[i] - real[i]))), len(rows), args),
    }


def outcomes(rows: pd.DataFrame, args: argparse.Namespace) -> dict[str, Any]:
    """Section 2's figures on scripts that may fail, each rate with its interval."""
    status, real_status = rows["pred_status"].to_numpy(object), rows["status"].to_numpy(object)
    exception, real_exception = rows["pred_exception"].to_numpy(object), rows["exception"].to_numpy(object)
    p_valid, score = rows["p_valid"].to_numpy(float), rows["pred_reward"].to_numpy(float)
    real, tasks = rows["reward"].to_numpy(float), rows["task_id"].to_numpy(object)
    valid, proved = real_status == outcome.VALID, rows["proved"].to_numpy(bool)
    n = len(rows)

    def on_valid(fn):
        return lambda i: fn(score[i][valid[i]], real[i][valid[i]], tasks[i][valid[i]])

    above_real = metrics.failing_above_median(score, real_status, real, tasks)
    above_wm = metrics.failing_above_median(score, real_status, real, tasks, reference=score)
    raised = metrics.raised(real_exception)
    return {
        "scripts": n, "tasks": int(rows["task_id"].nunique()), "valid": int(valid.sum()),
        "failures": int((~valid).sum()), "raised": int(raised.sum()),
        "always_valid_accuracy": float(valid.mean()),
        "status_accuracy": interval(lambda i: float(np.mean(status[i] == real_status[i])), n, args),
        "failure_recall": interval(lambda i: metrics.failure_recall(status[i], real_status[i]), n, args),
        "exception_match": interval(lambda i: metrics.exception_match(exception[i], real_exception[i]), n, args),
        "exception_matched": int((exception[raised] == real_exception[raised]).sum()),
        "auc_valid": interval(lambda i: auroc(valid[i].astype(float), p_valid[i]), n, args),
        "ece_valid": interval(lambda i: metrics.ece(p_valid[i], valid[i].astype(float)), n, args),
        "spearman_within_task_valid": interval(on_valid(metrics.mean_within_task_spearman), n, args),
        "pairwise_within_task_valid": interval(on_valid(metrics.pairwise_accuracy), n, args),
        "failing_above_median_real": {"count": above_real[0], "of": above_real[1]},
        "failing_above_median_wm": {"count": above_wm[0], "of": above_wm[1]},
        "max_failing_reward": float(score[~valid].max()) if (~valid).any() else None,
        "proofs": int(proved.sum()),
        "false_proofs": metrics.false_proofs(proved, status, exception, real_status, real_exception),
    }


# ----------------------------------------------------------------------------- section 3


def corpus_outcome_rows(corpora: list[Path]) -> pd.DataFrame:
    """Every executed corpus row with a recorded outcome (all splits), its task and script."""
    from agents.code.handwritten import render_solution
    from wmrl_envs.tasks import get_task
    from wmrl_envs.world_models.build import corpus as corpus_lib

    frame = pd.concat([corpus_lib.read_corpus(p) for p in corpora], ignore_index=True)
    frame = frame[frame["outcome"] != ""].reset_index(drop=True)
    tasks = {tid: get_task(tid) for tid in frame["task_id"].unique()}
    frame["task"] = [tasks[t] for t in frame["task_id"]]
    frame["text"] = [i.script(tasks[i.task_id].spec, render_solution) for i in corpus_lib.corpus_items(frame)]
    return frame


def leave_family_out(model, families: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Refit the status head without each family's train rows and predict its held-out rows."""
    from wmrl_envs.analysis.code_features import analyse_script, feature_vector, outcome_features
    from wmrl_envs.analysis.proofs import Prover
    from wmrl_envs.world_models.build.corpus import corpus_sha256
    from wmrl_envs.world_models.status_head import StatusHeadConfig, fit_status_head

    shipped = model.manifest["status_head"]
    corpora = [REPO / "assets" / "world_models" / name for name in OUTCOME_CORPORA]
    changed = [p.name for p in corpora
               if corpus_sha256(p) != shipped["corpora"].get(str(p.relative_to(REPO)))]
    rows = corpus_outcome_rows(corpora)
    cpu = time.process_time()
    train = rows[rows["split"] == "train"].reset_index(drop=True)
    prover = Prover()
    train = train[[prover.prove(t, s) is None for t, s in zip(train["task"], train["text"])]].reset_index(drop=True)
    features = np.array([feature_vector(t, a) + outcome_features(t, a)
                         for t, a in zip(train["task"], (analyse_script(s) for s in train["text"]))], dtype=float)
    prepare_cpu = time.process_time() - cpu
    config = StatusHeadConfig(**shipped["config"])
    heldout = rows[rows["split"] == "heldout"].reset_index(drop=True)
    report: dict[str, Any] = {"config": asdict(config), "corpora_changed_since_fit": changed,
                              "train_rows_unproved": len(train), "shipped_train_rows_unproved": shipped["rows_unproved"],
                              "prepare_cpu_s": round(prepare_cpu, 1), "families": {}}
    for family in families:
        operators = OPERATOR_FAMILIES[family]
        keep = ~train["mutation"].isin(operators).to_numpy()
        cpu = time.process_time()
        head = fit_status_head(list(train.loc[keep, "text"]), features[keep], list(train.loc[keep, "outcome"]),
                               [e or None for e in train.loc[keep, "exception"]], list(train.loc[keep, "task_id"]),
                               config)
        fit_cpu = time.process_time() - cpu
        refit = model.with_status_head(head, {**shipped, "left_out": list(operators)})
        family_rows = heldout[heldout["mutation"].isin(operators)].reset_index(drop=True)
        refit_pred, _ = predict(refit, list(family_rows["task"]), list(family_rows["text"]))
        shipped_pred, _ = predict(model, list(family_rows["task"]), list(family_rows["text"]))
        report["families"][family] = {
            "operators": list(operators), "train_rows_left_out": int((~keep).sum()),
            "heldout_rows": len(family_rows), "fit_cpu_s": round(fit_cpu, 1),
            "left_out": family_outcomes(family_rows.join(refit_pred), args),
            "shipped": family_outcomes(family_rows.join(shipped_pred), args),
        }
    return report


def family_outcomes(rows: pd.DataFrame, args: argparse.Namespace) -> dict[str, Any]:
    """Status accuracy and failure recall on a family's rows, all and those no proof settles."""
    status, real_status = rows["pred_status"].to_numpy(object), rows["outcome"].to_numpy(object)
    exception, real_exception = rows["pred_exception"].to_numpy(object), rows["exception"].to_numpy(object)
    unproved = ~rows["proved"].to_numpy(bool)
    n = len(rows)
    return {
        "failures": int((real_status != outcome.VALID).sum()), "unproved": int(unproved.sum()),
        "status_accuracy": interval(lambda i: float(np.mean(status[i] == real_status[i])), n, args),
        "failure_recall": interval(lambda i: metrics.failure_recall(status[i], real_status[i]), n, args),
        "exception_match": interval(lambda i: metrics.exception_match(exception[i], real_exception[i]), n, args),
        "unproved_status_accuracy": interval(
            lambda i: float(np.mean(status[i][unproved[i]] == real_status[i][unproved[i]]))
            if unproved[i].any() else math.nan, n, args),
        "unproved_failure_recall": interval(
            lambda i: metrics.failure_recall(status[i][unproved[i]], real_status[i][unproved[i]]), n, args),
    }


# ----------------------------------------------------------------------------- section 4


def pair_steps(steps: np.ndarray, n_pairs: np.ndarray) -> np.ndarray:
    """The step each calibrator pair was added at, from the pairs counted after each step
    (``metrics.csv``'s ``step`` and ``calibration/n_pairs``), pairs in the order they were added."""
    added = np.diff(np.concatenate([[0], n_pairs]))
    if (added < 0).any():
        raise ConfigError("the calibrator's pair count fell between steps: not one run's metrics")
    return np.repeat(steps, added)


def prequential(run: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The anchors of a training run by third of its steps, each predicted before it was learned
    from: the raw world-model score (moved only by neighbours executed in earlier batches,
    ``CodeScorer(neighbours=True)``) and the score
    the calibrator gave it with the pairs of the steps before."""
    import torch

    from wmrl_envs.calibration import Calibrator, CalibratorConfig

    state = torch.load(run / "checkpoint.pt", weights_only=False, map_location="cpu")
    pairs = state["scoring"]["calibrator"]
    history = pd.read_csv(run / "metrics.csv")
    if "calibration/n_pairs" not in history:
        raise ConfigError(f"{run} has no anchors: its mode ({state['config']['mode']}) feeds no calibrator")
    counts = history["calibration/n_pairs"].fillna(0).astype(int).to_numpy()
    steps = history["step"].to_numpy(int)
    wm, real = np.asarray(pairs["wm_scores"], float), np.asarray(pairs["real_scores"], float)
    task_ids, strata = np.asarray(pairs["task_ids"], object), list(pairs.get("strata") or [None] * len(wm))
    if counts[-1] != len(wm):
        raise ConfigError(f"{run}: metrics.csv counts {counts[-1]} pairs, the checkpoint holds {len(wm)}")
    step_of = pair_steps(steps, counts)
    calibrator = Calibrator(CalibratorConfig.from_dict(pairs["config"]))
    calibrated = np.empty(len(wm))
    for step in np.unique(step_of):
        here = np.flatnonzero(step_of == step)
        calibrated[here] = calibrator.calibrate(wm[here], list(task_ids[here]), [strata[i] for i in here])
        calibrator.add_pairs(wm[here], real[here], list(task_ids[here]), strata=[strata[i] for i in here])
    thirds = np.array_split(np.arange(steps.min(), steps.max() + 1), 3)
    config = state["config"]
    out: dict[str, Any] = {"run": str(run), "steps": int(len(steps)), "pairs": len(wm), "mode": config["mode"],
                           "seed": config["seed"], "schedule": config["schedule"], "status": None, "thirds": []}
    log_path = run / "anchors.csv"  # the trainer's anchor log: predicted and executed status
    anchors = pd.read_csv(log_path, keep_default_na=False) if log_path.exists() else None
    for part in thirds:
        mask = np.isin(step_of, part)
        figures = {"steps": [int(part[0]), int(part[-1])], **anchor_figures(wm[mask], real[mask], calibrated[mask], args)}
        if anchors is not None:
            rows = anchors[anchors["step"].isin(part) & (anchors["wm_status"] != "")]
            hit = (rows["wm_status"] == rows["status"]).to_numpy(float)
            figures["status_accuracy"] = interval(lambda i, hit=hit: float(hit[i].mean()), len(hit), args)
            figures["status_rows"] = len(hit)
        out["thirds"].append(figures)
    out["status"] = None if anchors is None else "anchors.csv"
    return out


def prequential_side(run: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Section 4 for one run, with its world model, its final held-out score and the share of its
    anchors whose prediction an executed neighbour moved (the anchors are a draw of the groups)."""
    out = prequential(run, args)
    config = json.loads((run / "config.json").read_text())
    out["world_model"] = config.get("family", {}).get("world_model")
    reports = json.loads((run / "results.json").read_text())["reports"]
    trained = [r for r in reports if r["policy"].startswith("trained")]
    out["heldout_trained"] = trained[-1]["summary"]["score_mean"] if trained else None
    anchors = pd.read_csv(run / "anchors.csv", keep_default_na=False)
    out["anchors_moved_by_neighbours"] = float((anchors["wm_stage"] == "neighbours").mean()) if len(anchors) else None
    return out


def prequential_markdown(report: dict[str, Any]) -> str:
    """The prequential figures of several runs side by side (``--prequential-only``)."""
    lines = ["### Prequential anchors of training runs, side by side (issue 44)", "",
             "In-sample tasks (the training tasks), out-of-sample scripts (the policy's own). Each pair's raw score was "
             "predicted before its anchor ran (moved only by neighbours executed in earlier batches); the calibrated "
             f"one uses the calibrator as it stood before the anchor's step. Bootstrap 95% intervals, "
             f"{report['config']['resamples']} resamples.", "",
             "| run | world model | third (steps) | pairs | Spearman | MAE raw | MAE calibrated | status acc. |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for label, run in report["runs"].items():
        for t in run["thirds"]:
            lines.append(f"| {label} | {run['world_model']} | {t['steps'][0]}-{t['steps'][1]} | {t['pairs']} | "
                         f"{ci(t['spearman'])} | {ci(t['mae_raw'])} | {ci(t['mae_calibrated'])} | "
                         f"{ci(t.get('status_accuracy'))} |")
    lines += ["", "| run | folder | seed | final held-out (trained) | anchors moved by neighbours |", "|---|---|---:|---:|---:|"]
    for label, run in report["runs"].items():
        held = "–" if run["heldout_trained"] is None else f"{run['heldout_trained']:.3f}"
        moved = "–" if run["anchors_moved_by_neighbours"] is None else f"{run['anchors_moved_by_neighbours']:.2f}"
        lines.append(f"| {label} | `{run['run']}` | {run['seed']} | {held} | {moved} |")
    return "\n".join(lines) + "\n"


def anchor_figures(wm: np.ndarray, real: np.ndarray, calibrated: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Spearman and MAE of the raw scores, and MAE of the calibrated ones, on some anchor pairs."""
    n = len(wm)
    return {"pairs": n, "exact_failures": int(((wm == 0) & (real == 0)).sum()),
            "spearman": interval(lambda i: metrics.spearman(wm[i], real[i]), n, args),
            "mae_raw": interval(lambda i: float(np.mean(np.abs(wm[i] - real[i]))), n, args),
            "mae_calibrated": interval(lambda i: float(np.mean(np.abs(calibrated[i] - real[i]))), n, args)}


# ----------------------------------------------------------------------------- report


def ci(block: dict[str, Any] | None, digits: int = 2) -> str:
    if block is None or not np.isfinite(block["value"]):
        return "–"
    return f"{block['value']:.{digits}f} [{block['lo']:.{digits}f}, {block['hi']:.{digits}f}]"


def markdown(report: dict[str, Any]) -> str:
    cfg, cost = report["config"], report["cost"]
    lines = [f"### The world model out of sample (issue 44): `{cfg['world_model']}`", "",
             f"Every figure is **out of sample** unless marked: tasks, scripts and generators no fit or selection "
             f"saw (`{cfg.get('set_folder', 'bench/oos')}`, frozen). Bootstrap 95% intervals in brackets, [lo, hi]: {cfg['resamples']} resamples of the "
             f"scripts (pooled), seed {cfg['bootstrap_seed']}.", "",
             "#### 1. Unseen tasks, valid scripts (out of sample: tasks and scripts)", "",
             f"The {report['unseen_tasks']['all']['tasks']} new tasks. Grammar scripts: drawn uniformly by `plan_corpus` (seed {cfg['grammar_seed']}) "
             f"until {cfg['grammar_per_task']} per task ran valid ({report['grammar']['draws']} draws executed, "
             f"{report['grammar']['valid']} valid; memo `bench/results/{cfg.get('grammar_memo', 'world_model_oos_grammar.csv')}`).", "",
             "| scripts | n | tasks | Spearman pooled | Spearman within task (mean) | pairwise within task | MAE |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for part, r in report["unseen_tasks"].items():
        lines.append(f"| {part} | {r['scripts']} | {r['tasks']} | {ci(r['spearman_pooled'])} | "
                     f"{ci(r['spearman_within_task'])} | {ci(r['pairwise_within_task'])} | {ci(r['mae'])} |")
    g = report["grammar_outcomes"]
    lines += ["", f"On all {g['scripts']} grammar draws (valid or not), status accuracy "
              f"{ci(g['status_accuracy'])} against {g['always_valid_accuracy']:.2f} for always answering valid; "
              f"failure recall {ci(g['failure_recall'])} of {g['failures']} failures.", ""]
    lines += ["#### 2. Hand-written scripts in LLM agents' idioms (out of sample: scripts; tasks new or held out)", "",
              "| scripts | n (valid) | status acc. | failure recall | exception match | AUC P(valid) | ECE P(valid) "
              "| Spearman within task (valid) | pairwise within task (valid) | failing > task's median valid | false proofs |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for part, r in report["handwritten"].items():
        above = r["failing_above_median_real"]
        lines.append(f"| {part} | {r['scripts']} ({r['valid']}) | {ci(r['status_accuracy'])} | "
                     f"{ci(r['failure_recall'])} | {ci(r['exception_match'])} | {ci(r['auc_valid'])} | "
                     f"{ci(r['ece_valid'])} | {ci(r['spearman_within_task_valid'])} | "
                     f"{ci(r['pairwise_within_task_valid'])} | {above['count']} of {above['of']} | "
                     f"{r['false_proofs']} of {r['proofs']} proofs |")
    a = report["handwritten"]["all"]
    lines += ["", f"All {a['scripts']}: {a['failures']} failed ({a['raised']} raised; the exception class matched on "
              f"{a['exception_matched']}); always answering valid would be {a['always_valid_accuracy']:.2f} accurate. "
              f"'Failing > median': a failing script's world-model reward above the median real reward of its "
              f"task's valid scripts ({a['failing_above_median_wm']['count']} above the median of the world model's "
              f"own rewards for them); the highest reward of a failing script is {a['max_failing_reward']:.3f}.", ""]
    lines += ["#### 3. Leave one operator family out (out of sample: generator; tasks held out)", ""]
    lofo = report.get("leave_family_out")
    if lofo is None:
        lines.append("Not run (`--lofo FAMILY ...`; a refit costs about 5 CPU-minutes).")
    else:
        lines += [f"The status head refitted on the {lofo['train_rows_unproved']} unproved train rows less the "
                  "family's, as the shipped head was fitted, predicts the family's held-out-split rows (proofs first, "
                  "as the default world model); beside it the shipped head, which saw the family (**in-sample "
                  "generator**, held-out tasks). Families run: " + ", ".join(lofo["families"]) + ", of "
                  + ", ".join(OPERATOR_FAMILIES) + " (the others: `--lofo FAMILY`).", "",
                  "| family | held-out rows (unproved) | head | status acc. | failure recall | exception match "
                  "| status acc., unproved | failure recall, unproved | refit CPU-s |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
        for family, f in lofo["families"].items():
            for label, key in (("left out", "left_out"), ("shipped (in-sample generator)", "shipped")):
                r = f[key]
                lines.append(f"| {family} | {f['heldout_rows']} ({r['unproved']}) | {label} | "
                             f"{ci(r['status_accuracy'])} | {ci(r['failure_recall'])} | {ci(r['exception_match'])} | "
                             f"{ci(r['unproved_status_accuracy'])} | {ci(r['unproved_failure_recall'])} | "
                             f"{f['fit_cpu_s'] if key == 'left_out' else ''} |")
        if lofo["corpora_changed_since_fit"]:
            lines.append(f"\nCorpora changed since the shipped head was fitted: {lofo['corpora_changed_since_fit']}.")
    lines += ["", "#### 4. Prequential anchors of a training run (in-sample tasks: training tasks; out-of-sample "
              "scripts: the policy's own)", ""]
    pre = report.get("prequential")
    if pre is None:
        lines.append("Not run (`--run DIR`: a run folder with `checkpoint.pt` and `metrics.csv`).")
    else:
        status = ("Status accuracy: the world model's predicted status against the run's, from the run's "
                  "`anchors.csv`." if pre.get("status") else
                  "Status accuracy: not recorded (a run from before the trainer's `anchors.csv`).")
        lines += [f"Run `{pre['run']}` ({pre['mode']}, {pre['steps']} steps, {pre['pairs']} anchor pairs). Each pair's "
                  "raw score was predicted before the anchor ran; the calibrated one uses the calibrator as it "
                  f"stood before the anchor's step. {status}", "",
                  "| third (steps) | pairs (exact failures) | Spearman | MAE raw | MAE calibrated | status acc. |",
                  "|---|---:|---:|---:|---:|---:|"]
        for t in pre["thirds"]:
            lines.append(f"| {t['steps'][0]}-{t['steps'][1]} | {t['pairs']} ({t['exact_failures']}) | "
                         f"{ci(t['spearman'])} | {ci(t['mae_raw'])} | {ci(t['mae_calibrated'])} | "
                         f"{ci(t.get('status_accuracy'))} |")
    stages = ", ".join(f"{stage} {n}" for stage, n in cost.get("stages", {}).items())
    lines += ["", f"**Cost.** The world model: {1000 * cost['wm_cpu_s_per_script']:.1f} ms CPU a script, its "
              f"sandbox's included (one batch of {cost['wm_scripts']}, load {cost['wm_load_cpu_s']:.1f} CPU-s apart; "
              f"the stage that answered: {stages}); executing a "
              f"hand-written script cost {cost['handwritten_sandbox_cpu_s']:.2f} CPU-s, a grammar draw "
              f"{cost['grammar_sandbox_cpu_s']:.2f} CPU-s in the sandbox. This run: {cost['grammar_executed_now']} "
              f"executions, {cost['process_cpu_s']:.0f} CPU-s in this process, {cost['wall_s']:.0f} s wall."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="See the module docstring for what each section measures.")
    parser.add_argument("--set", dest="frozen_set", choices=sorted(name for name, frozen in SETS.items() if frozen.has_scripts), default="v1",
                        help="which frozen set (default: %(default)s, bench/oos; v2: bench/oos_v2)")
    parser.add_argument("--world-model", help="world model name (default: the one `wmrl train` uses)")
    parser.add_argument("--grammar-per-task", type=int, default=GRAMMAR_PER_TASK,
                        help="valid grammar scripts per new task (default: %(default)s)")
    parser.add_argument("--grammar-seed", type=int, default=GRAMMAR_SEED, help="seeds the grammar draws")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap resamples (default: %(default)s)")
    parser.add_argument("--bootstrap-seed", type=int, default=BOOTSTRAP_SEED, help="seeds the bootstrap")
    parser.add_argument("--lofo", nargs="+", choices=[*OPERATOR_FAMILIES, "all"], default=[],
                        help="operator families to leave out of a status-head refit, each about 5 CPU-min")
    parser.add_argument("--run", type=Path, help="a training run's folder: its anchors, prequentially (section 4)")
    parser.add_argument("--prequential-only", nargs="+", metavar="LABEL=DIR",
                        help="section 4 alone, for each labelled run folder side by side (nothing else runs)")
    parser.add_argument("--executor", default=DEFAULT_EXECUTOR, help="sandbox of the grammar executions")
    parser.add_argument("--workers", type=int, default=1, help="parallel grammar executions (default: 1)")
    parser.add_argument("--name", help=f"results file name (default: {NAME}, or {NAME}_v2 under --set v2)")
    args = parser.parse_args(argv)
    frozen_set = SETS[args.frozen_set]
    args.name = args.name or result_name(frozen_set)
    if args.grammar_per_task < 1 or args.resamples < 1:
        parser.error("--grammar-per-task and --resamples must be >= 1")
    families = list(OPERATOR_FAMILIES) if "all" in args.lofo else list(dict.fromkeys(args.lofo))
    if args.prequential_only:
        runs = dict(item.split("=", 1) for item in args.prequential_only if "=" in item)
        if len(runs) != len(args.prequential_only):
            parser.error("--prequential-only takes LABEL=DIR items")
        report = {"config": {"resamples": args.resamples, "bootstrap_seed": args.bootstrap_seed},
                  "runs": {label: prequential_side(Path(folder), args) for label, folder in runs.items()}}
        path = write_result(args.name, __spec__.name, report, prequential_markdown(report))
        print(path.read_text())
        return 0
    started, cpu0 = time.perf_counter(), time.process_time()
    name = args.world_model or default_world_model()

    tasks = frozen_set.script_tasks(frozen_set.script_paths())
    definition = frozen_set.definition()
    suite, memo = definition.suite, grammar_memo(frozen_set)
    new_tasks = {t.id: tasks[t.id] for t in definition.tasks}
    handwritten = handwritten_rows(frozen_set)
    grammar, grammar_cost = grammar_rows(new_tasks, suite, args.grammar_per_task, args.grammar_seed, args.executor,
                                         args.workers, memo)
    rows = pd.concat([handwritten, grammar], ignore_index=True)
    model, load_cpu = load_world_model(name)
    predicted, wm_cpu = predict(model, [tasks[t] for t in rows["task_id"]], list(rows["text"]))
    rows = rows.join(predicted)
    unparsed = rows[~rows["parsed"]]
    rows = rows[rows["parsed"]].reset_index(drop=True)

    new = rows["suite"] == suite
    valid_new = rows[new & rows["valid"]]
    hand = rows[rows["source"] == "handwritten"]
    report: dict[str, Any] = {
        "config": {"world_model": name, "set": frozen_set.name,
                   "set_folder": frozen_set.folder.relative_to(REPO).as_posix(), "grammar_memo": memo.name,
                   "grammar_per_task": args.grammar_per_task, "grammar_seed": args.grammar_seed,
                   "grammar_draw_factor": GRAMMAR_DRAW_FACTOR, "resamples": args.resamples,
                   "bootstrap_seed": args.bootstrap_seed, "operator_families": OPERATOR_FAMILIES},
        "grammar": grammar_cost, "unparsed": unparsed[["task_id", "script"]].to_dict("records"),
        "unseen_tasks": {"all": ranking(valid_new, args),
                         "grammar": ranking(valid_new[valid_new["source"] == "grammar"], args),
                         "hand-written": ranking(valid_new[valid_new["source"] == "handwritten"], args)},
        "grammar_outcomes": outcomes(rows[rows["source"] == "grammar"].reset_index(drop=True), args),
        "handwritten": {"all": outcomes(hand.reset_index(drop=True), args),
                        "new tasks": outcomes(hand[hand["suite"] == suite].reset_index(drop=True), args),
                        **({"built-in held-out tasks": outcomes(hand[hand["suite"] != suite].reset_index(drop=True),
                                                                args)} if (hand["suite"] != suite).any() else {})},
    }
    if families:
        if not hasattr(model, "with_status_head"):
            parser.error(f"--lofo refits the surrogate's status head; world model {name!r} has none")
        report["leave_family_out"] = leave_family_out(model, families, args)
    if args.run:
        report["prequential"] = prequential(args.run, args)
    report["cost"] = {"wm_cpu_s_per_script": wm_cpu, "wm_scripts": len(predicted), "wm_load_cpu_s": load_cpu,
                      "stages": {str(k): int(v) for k, v in predicted["stage"].value_counts().items()},
                      "handwritten_sandbox_cpu_s": float(handwritten["cpu_s"].mean()),
                      "grammar_sandbox_cpu_s": grammar_cost["sandbox_cpu_s_per_script"],
                      "grammar_executed_now": grammar_cost["executed_now"],
                      "process_cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - started}
    report["predictions"] = rows.drop(columns=["text", "parsed"]).to_dict("records")
    path = write_result(args.name, __spec__.name, report, markdown(report))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
