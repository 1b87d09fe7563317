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
    x = np.column_stack([np.ones(len(both)), both["sample_score"].astype(float), both["model_valid"].astype(float)])
    y = both["real_score"].astype(float).to_numpy()
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
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
    return SampleRunHead(weights={"intercept": round(float(coef[0]), 5), "sample": round(float(coef[1]), 5),
                                  "model": round(float(coef[2]), 5)},
                         residual_sd=round(float(residual.std(ddof=3)), 5),
                         p_valid_if_valid=round((sample_valid["full_valid"].sum() + 0.5) / (len(sample_valid) + 1), 4),
                         p_valid_if_failed=smoothed, exact=tuple(exact), measured=measured)


def _leave_task_out(rows: pd.DataFrame) -> dict[str, float]:
    """Pooled Spearman of each input and of the blend fitted without the row's task."""
    sample, model = rows["sample_score"].astype(float).to_numpy(), rows["model_valid"].astype(float).to_numpy()
    y, tasks = rows["real_score"].astype(float).to_numpy(), rows["task_id"].to_numpy()
    blend = np.empty_like(y)
    for task in np.unique(tasks):
        fit = tasks != task
        x = np.column_stack([np.ones(fit.sum()), sample[fit], model[fit]])
        coef, *_ = np.linalg.lstsq(x, y[fit], rcond=None)
        blend[~fit] = coef[0] + coef[1] * sample[~fit] + coef[2] * model[~fit]
    return {"sample": round(float(spearmanr(sample, y)[0]), 4), "model": round(float(spearmanr(model, y)[0]), 4),
            "blend": round(float(spearmanr(blend, y)[0]), 4)}
