"""Build-time: the sample-run head, measured from pairs of (sample run, full run) of corpus scripts.

``scripts/build_sample_run_head.py`` runs the executed corpora's scripts on their tasks' samples
and hands the pairs here; :func:`fit_head` measures what a sample run says about the full run and
returns the :class:`~wmrl_envs.world_models.sample_run.SampleRunHead` the runtime model loads:

* **exact failure classes**: a sample failure is exact when its class cannot depend on the data's
  size (:data:`SIZE_INDEPENDENT`), it occurred at least :data:`MIN_SUPPORT` times, and the full run
  failed the same way (status and exception) every time: 0 false failures;
* ``P(full valid | sample valid)`` and ``P(full valid | sample failed)`` by class, add-one-half
  smoothed;
* the valid score: least squares of the full run's score on the sample run's score and the base
  world model's estimate, fitted on the rows of the built-in suites' **held-out** tasks (the base
  model's own fit saw the train tasks, so its estimates there are in-sample), with the
  leave-one-task-out Spearman of each input and of the blend recorded in ``measured``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from wmrl_envs import outcome
from wmrl_envs.world_models.sample_run import SampleRunConfig, SampleRunHead, failure_class

#: Failure classes whose cause is the code's control flow or names, never the rows it reads; the
#: others (ValueError, KeyError, IndexError, ZeroDivisionError, an invalid submission, a timeout,
#: memory) can come from a sample's few rows or unseen categories, so they are never exact.
SIZE_INDEPENDENT = (
    "import_error/ModuleNotFoundError", "import_error/ImportError", "runtime_error/NameError",
    "runtime_error/UnboundLocalError", "runtime_error/AttributeError", "runtime_error/TypeError",
    "runtime_error/FileNotFoundError", "no_submission",
)
MIN_SUPPORT = 5


def fit_blend(sample: np.ndarray, model: np.ndarray, real: np.ndarray) -> np.ndarray:
    """The valid score's blend: least squares of the full run's score on ``[1, the sample run's
    score, the base model's estimate]`` (``intercept``, ``sample``, ``model`` of the head's weights)."""
    x = np.column_stack([np.ones(len(real)), sample, model])
    coef, *_ = np.linalg.lstsq(x, real, rcond=None)
    return coef


def fit_head(memo: pd.DataFrame) -> SampleRunHead:
    ran = memo[(~memo["proved"].astype(bool)) & (memo["sample_status"] != "")].copy()
    ran["sample_class"] = [failure_class(s, e or None) for s, e in zip(ran["sample_status"], ran["sample_exception"])]
    ran["full_class"] = [failure_class(s, e or None) for s, e in zip(ran["full_outcome"], ran["full_exception"])]
    ran["full_valid"] = ran["full_outcome"] == outcome.VALID
    sample_valid = ran[ran["sample_status"] == outcome.VALID]
    failed = ran[ran["sample_status"] != outcome.VALID]
    classes: dict[str, dict[str, float]] = {}
    for name, rows in failed.groupby("sample_class"):
        classes[name] = {"n": len(rows), "full_valid": int(rows["full_valid"].sum()),
                         "same_failure": int((rows["full_class"] == name).sum())}
    exact = sorted(n for n, c in classes.items()
                   if n in SIZE_INDEPENDENT and c["n"] >= MIN_SUPPORT and c["same_failure"] == c["n"])
    smoothed = {n: round((c["full_valid"] + 0.5) / (c["n"] + 1), 4) for n, c in classes.items()}
    smoothed["*"] = round((failed["full_valid"].sum() + 0.5) / (len(failed) + 1), 4)
    # The score head: held-out tasks of the built-in suites, valid on both runs.
    both = sample_valid[sample_valid["full_valid"] & (sample_valid["split"] == "heldout")
                        & np.isfinite(sample_valid["model_valid"].astype(float))]
    sample, model = both["sample_score"].astype(float).to_numpy(), both["model_valid"].astype(float).to_numpy()
    y = both["real_score"].astype(float).to_numpy()
    coef = fit_blend(sample, model, y)
    residual = y - (coef[0] + coef[1] * sample + coef[2] * model)
    measured = {
        "rows_run": len(ran), "sample_valid": len(sample_valid),
        "false_valid": int((~sample_valid["full_valid"]).sum()),
        "false_failures": int(failed["full_valid"].sum()), "failures": len(failed), "classes": classes,
        "score_head_rows": len(both), "score_head_tasks": int(both["task_id"].nunique()),
        "leave_task_out_spearman": _leave_task_out(both),
        "sample_cpu_s_median": round(float(ran["sample_cpu_s"].astype(float).median()), 3),
        "config": {k: v for k, v in SampleRunConfig().__dict__.items() if k != "uncertain_band"},
        "rebuild": "python scripts/build_sample_run_head.py",
    }
    head = SampleRunHead(weights={"intercept": round(float(coef[0]), 5), "sample": round(float(coef[1]), 5),
                                  "model": round(float(coef[2]), 5)},
                         residual_sd=round(float(residual.std(ddof=3)), 5),
                         p_valid_if_valid=round((sample_valid["full_valid"].sum() + 0.5) / (len(sample_valid) + 1), 4),
                         p_valid_if_failed=smoothed, exact=tuple(exact), measured=measured)
    if {"model_score", "model_p_valid", "model_uncertainty"} <= set(memo.columns):
        measured["run_rules"] = run_rules(ran[ran["split"] == "heldout"], head)
    return head


#: The run rules compared (``SampleRunConfig.run`` and the ones it could be): a script runs on the
#: sample when the base model's P(valid) lies in ``band`` or its uncertainty reaches the
#: ``uncertainty_quantile`` of the rows' (None: that test is off).
RUN_RULES_COMPARED: dict[str, tuple[tuple[float, float] | None, float | None]] = {
    "always": ((0.0, 1.0), None), "never": (None, None),
    "uncertain (0.05, 0.95)": ((0.05, 0.95), None), "uncertain (0.02, 0.98)": ((0.02, 0.98), None),
    "uncertain (0.05, 0.95) or top half of uncertainty": ((0.05, 0.95), 0.5),
    "uncertain (0.05, 0.95) or top fifth of uncertainty": ((0.05, 0.95), 0.8),
}


def run_rules(rows: pd.DataFrame, head: SampleRunHead) -> dict[str, dict[str, float]]:
    """Each rule of :data:`RUN_RULES_COMPARED` on ``rows`` (unproved, every outcome): the share of
    scripts it runs, and the pooled and mean within-task Spearman and MAE of the rewards it gives
    (the sample run's prediction where it runs, the base model's elsewhere) against the real ones.
    The head's blend was fitted on the valid ones of these rows: in-sample as to its 3 weights."""
    real = rows["real_score"].astype(float).to_numpy()
    base = rows["model_score"].astype(float).to_numpy()
    p_valid = rows["model_p_valid"].astype(float).to_numpy()
    spread = rows["model_uncertainty"].astype(float).to_numpy()
    sampled = np.array([_sample_reward(head, r) for r in rows.itertuples()])
    out = {}
    for name, (band, quantile) in RUN_RULES_COMPARED.items():
        run = np.zeros(len(rows), dtype=bool)
        if band is not None:
            run |= (p_valid >= band[0]) & (p_valid <= band[1])
        if quantile is not None:
            run |= spread >= np.nanquantile(spread, quantile)
        reward = np.where(run, sampled, base)
        within = [spearmanr(reward[m], real[m])[0] for m in (rows["task_id"] == t for t in rows["task_id"].unique())
                  if len(set(real[m])) > 1 and m.sum() > 2]
        out[name] = {"share_run": round(float(run.mean()), 3), "spearman": round(float(spearmanr(reward, real)[0]), 4),
                     "spearman_within_task": round(float(np.nanmean(within)), 4),
                     "mae": round(float(np.mean(np.abs(reward - real))), 4)}
    return out


def _sample_reward(head: SampleRunHead, row: Any) -> float:
    """The reward the sample-run model gives a memo row (as SampleRunWorldModel combines it)."""
    model = float(row.model_valid)
    if row.sample_status == outcome.VALID:
        return head.valid_score(float(row.sample_score), model)
    if head.is_exact(row.sample_status, row.sample_exception or None):
        return 0.0
    return head.failure_p_valid(row.sample_status, row.sample_exception or None) * model if np.isfinite(model) else 0.0


def _leave_task_out(rows: pd.DataFrame) -> dict[str, float]:
    """Pooled Spearman of each input and of the blend fitted without the row's task."""
    sample, model = rows["sample_score"].astype(float).to_numpy(), rows["model_valid"].astype(float).to_numpy()
    y, tasks = rows["real_score"].astype(float).to_numpy(), rows["task_id"].to_numpy()
    blend = np.empty_like(y)
    for task in np.unique(tasks):
        fit = tasks != task
        coef = fit_blend(sample[fit], model[fit], y[fit])
        blend[~fit] = coef[0] + coef[1] * sample[~fit] + coef[2] * model[~fit]
    return {"sample": round(float(spearmanr(sample, y)[0]), 4), "model": round(float(spearmanr(model, y)[0]), 4),
            "blend": round(float(spearmanr(blend, y)[0]), 4)}
