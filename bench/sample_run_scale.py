"""What a sample run costs, and how it ranks scripts, on a task of realistic size.

The multi-fidelity world model (:mod:`wmrl_envs.world_models.sample_run`) runs a script in the
sandbox on a sample of its task. On the built-in tasks (100-6,000 training rows) a sample run
costs about the sandbox's fixed floor; the claim tested here is that on a task of 10^5-10^6
training rows it costs a small share of the full run while it ranks scripts about as the full
run does.

The bench writes a binary task in WMRL's native layout (:func:`build_binary_task`: ``make_classification``
with label noise, 20 numeric and 5 categorical columns, metric ``roc_auc``; built once under
``$WMRL_HOME/scale-tasks`` and reused), loads it with the task loader, and takes each script of
:data:`SCRIPTS` through

1. its full run: ``CodeScorer.execute`` in the real sandbox, one run at a time (``workers=1``)
   and without the static prover (``prove=False``), so that every script really runs;
2. its sample run: ``SampleRunWorldModel.run_samples`` on the task's sample (default
   :class:`~wmrl_envs.world_models.sample_run.SampleRunConfig` but ``workers=1``), after the
   sample's one-time build, which is timed apart (it is paid once per task, not per script);
3. the model's ``predict`` (the surrogate beside the sample run's outcome, through the shipped
   head), which reuses the sample runs just made instead of running them again; beside it, for a
   valid sample, the full run's CPU the model projects and its P(timeout)
   (``SampleRunWorldModel.p_timeout``), against the full run's own CPU and status.

Sizes: 500,000 training and 50,000 test rows. Measured on one core before choosing, at 300,000
rows: HistGradientBoosting with 100 iterations took 6 CPU-s, with 500 iterations 16, the random
forest 50 and k-NN 41; 500,000 rows keep the slowest valid script near 1-1.5 CPU-min (a little
more wall time on a shared machine) and the whole bench near 12 minutes on 2 cores, while the
sample (8%: 40,000 training rows) is well above its 600-row floor.

Each script runs once. Writes ``bench/results/<name>.json`` and ``.md`` (``--name``, default
``sample_run_scale``).

    python -m bench.sample_run_scale                     # 500,000 training rows, about 12 min on 2 cores
    python -m bench.sample_run_scale --train-rows 20000 --test-rows 5000 --name /tmp/sample_run_scale_small
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread in this process, as in the sandbox

import numpy as np
import pandas as pd
import yaml
from scipy.stats import spearmanr

from bench.common import write_result
from wmrl_envs.analysis.script import code_key
from wmrl_envs.grading.grader import grade
from wmrl_envs.paths import wmrl_home
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.task_spec import Task, TaskSpec
from wmrl_envs.tasks.loader import load_task
from wmrl_envs.world_models.sample_run import SampleRunWorldModel

#: Bumped whenever the generated task changes, so that a stale folder is not reused.
GENERATOR_VERSION = 1
#: Columns of the generated task: numeric features, categorical features (the first four are
#: quantile bins of informative features, level names shuffled; the last is 300 levels of noise).
N_NUMERIC = 20
CATEGORY_LEVELS = (5, 8, 12, 30)
NOISE_LEVELS = 300
CLASSES = ("no", "yes")
#: Sandbox limits of a full run. The wall clock is what a timed-out script costs; 180 s lets the
#: slowest valid script finish at 500,000 rows on a loaded machine and times out the grid search.
LIMITS = {"wall_s": 180, "cpu_s": 360, "memory_mb": 8192, "max_processes": 128, "tmpfs_mb": 512,
          "file_mb": 256, "output_bytes": 65536}

# ----------------------------------------------------------------------------- the task


def make_table(n_rows: int, seed: int) -> pd.DataFrame:
    """Rows of the synthetic task: ``id``, ``num_00..``, ``cat_0..`` and ``target`` (``no``/``yes``)."""
    from sklearn.datasets import make_classification

    n_hidden = N_NUMERIC + len(CATEGORY_LEVELS)
    # Three clusters a class and 5% flipped labels: no model is perfect and a linear one is weak.
    X, y = make_classification(n_samples=n_rows, n_features=n_hidden, n_informative=10, n_redundant=5,
                               n_clusters_per_class=3, flip_y=0.05, class_sep=0.8, weights=[0.7],
                               random_state=seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_hidden)
    columns: dict[str, np.ndarray] = {"id": np.arange(n_rows)}
    for j, source in enumerate(order[:N_NUMERIC]):  # in units of their own, as real columns are
        columns[f"num_{j:02d}"] = np.round(X[:, source] * rng.uniform(0.5, 50) + rng.uniform(-100, 100), 4)
    for k, (source, levels) in enumerate(zip(order[N_NUMERIC:], CATEGORY_LEVELS)):
        cuts = np.quantile(X[:, source], np.linspace(0, 1, levels + 1)[1:-1])
        names = np.array([f"{chr(ord('a') + k)}{i:02d}" for i in rng.permutation(levels)])
        columns[f"cat_{k}"] = names[np.searchsorted(cuts, X[:, source])]
    columns[f"cat_{len(CATEGORY_LEVELS)}"] = np.array([f"z{i:03d}" for i in range(NOISE_LEVELS)])[
        rng.integers(0, NOISE_LEVELS, n_rows)]
    columns["target"] = np.asarray(CLASSES)[y]
    return pd.DataFrame(columns)


def _codes(train: pd.DataFrame, test: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Numeric columns and categorical codes (by the training table's levels) as matrices."""
    train, test = train.drop(columns=["id", "target"]), test.drop(columns=["id", "target"], errors="ignore")
    for column in [c for c in train.columns if c.startswith("cat_")]:
        levels = pd.Index(sorted(train[column].unique()))
        train[column], test[column] = levels.get_indexer(train[column]), levels.get_indexer(test[column])  # unseen: -1
    return train.to_numpy(float), test.to_numpy(float)


def reference_scores(train: pd.DataFrame, test: pd.DataFrame, answers: pd.DataFrame, task_spec: TaskSpec,
                     seed: int) -> list[float]:
    """The leaderboard: 50 simple models fitted on subsamples of the training table (100 rows
    to 100,000) and graded on the whole test set as a submission is: a spread from a weak
    linear model on one column to boosted trees on a fifth of the rows."""
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(seed)
    X_all, X_test = _codes(train, test)
    y_all = (train["target"] == CLASSES[1]).to_numpy()
    numeric = np.arange(N_NUMERIC)

    def subsample(rows: int) -> np.ndarray:
        return rng.choice(len(train), size=min(rows, len(train)), replace=False)

    fits = []  # (model, rows, columns)
    for width in range(1, N_NUMERIC + 1):  # 20 linear models on 1..20 numeric columns
        fits.append((make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), 20_000,
                     rng.choice(numeric, size=width, replace=False)))
    for rows in (1_000, 10_000):
        fits.append((GaussianNB(), rows, numeric))
    for depth in (2, 4, 6, 8, 12, 16):
        fits.append((DecisionTreeClassifier(max_depth=depth, min_samples_leaf=20, random_state=seed), 50_000, None))
    for rows in (100, 300, 1_000, 3_000, 10_000, 30_000):
        fits.append((make_pipeline(StandardScaler(), KNeighborsClassifier(25)), rows, numeric))
    for rows in (2_000, 20_000):
        for depth in (6, 12):
            fits.append((RandomForestClassifier(n_estimators=30, max_depth=depth, random_state=seed), rows, None))
    for rows in (1_000, 10_000, 100_000):
        for iterations in (10, 30, 100, 300):
            fits.append((HistGradientBoostingClassifier(max_iter=iterations, early_stopping=False, random_state=seed),
                         rows, None))
    scores = []
    for model, rows, columns in fits:
        picked = subsample(rows)
        cols = slice(None) if columns is None else columns
        y = y_all[picked]
        if y.min() == y.max():  # a tiny subsample of one class: the prior, as a trivial entry would
            p = np.full(len(X_test), y.mean())
        else:
            p = model.fit(X_all[picked][:, cols], y).predict_proba(X_test[:, cols])[:, 1]
        scores.append(grade(pd.DataFrame({"id": test["id"], "target": p}), answers, task_spec))
    return scores


def task_id(n_train: int, n_test: int, seed: int) -> str:
    return f"scale-binary-{n_train}-{n_test}-s{seed}-g{GENERATOR_VERSION}"


def build_binary_task(folder: Path, n_train: int, n_test: int, seed: int = 0) -> Task:
    """Write the synthetic binary task into ``folder`` (native layout) and load it."""
    table = make_table(n_train + n_test, seed)
    train, test = table.iloc[:n_train], table.iloc[n_train:]
    prior = float((train["target"] == CLASSES[1]).mean())
    spec = {
        "id": folder.name, "name": f"Synthetic churn, {n_train:,} training rows", "suite": "scale",
        "env_id": "wmrl/MLEDojo-v0", "split": "heldout", "metric": "roc_auc", "task_type": "binary",
        "id_column": "id", "target_columns": ["target"], "classes": list(CLASSES), "limits": LIMITS,
        "meta": {"source": "sklearn.datasets.make_classification", "seed": seed, "n_train": n_train,
                 "n_test": n_test, "n_features": N_NUMERIC + len(CATEGORY_LEVELS) + 1, "n_numeric": N_NUMERIC,
                 "text_columns": [], "generator": GENERATOR_VERSION},
    }
    (folder / "public").mkdir(parents=True)
    (folder / "private").mkdir()
    (folder / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    train.to_csv(folder / "public" / "train.csv", index=False)
    test.drop(columns="target").to_csv(folder / "public" / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], "target": round(prior, 6)}).to_csv(folder / "public" / "sample_submission.csv",
                                                                       index=False)
    answers = test[["id", "target"]].reset_index(drop=True)
    answers.to_csv(folder / "private" / "answers.csv", index=False)
    (folder / "description.md").write_text(_description(spec, prior))
    task = load_task(folder, require_leaderboard=False)
    scores = sorted(reference_scores(train, test, answers, task.spec, seed), reverse=True)
    pd.DataFrame({"rank": np.arange(1, len(scores) + 1), "score": scores}).to_csv(folder / "leaderboard.csv",
                                                                                  index=False)
    return load_task(folder)


def _description(spec: dict, prior: float) -> str:
    n_train, n_test = spec["meta"]["n_train"], spec["meta"]["n_test"]
    cats = len(CATEGORY_LEVELS) + 1
    return f"""# {spec['name']}

Synthetic customer records: will the customer churn? {N_NUMERIC} numeric and {cats} categorical columns.

## Task

Predict `target` for every row of `data/test.csv`. This is a binary task with 2 classes; their shares in
train.csv: `no` ({1 - prior:.1%}), `yes` ({prior:.1%}).

## Files

The input files are in `data/` (read-only), relative to the working directory:

- `data/train.csv`: {n_train:,} rows with `id`, the features `num_00`..`num_{N_NUMERIC - 1:02d}` (numbers),
  `cat_0`..`cat_{cats - 1}` (text categories) and the target `target`.
- `data/test.csv`: {n_test:,} rows with the same columns except `target`.
- `data/sample_submission.csv`: {n_test:,} rows, a valid submission.

## Evaluation

Metric: **roc_auc** (area under the ROC curve; higher is better), computed on the hidden labels of the
test rows. The score is then placed on this task's leaderboard of reference solutions.

## Submission format

Write `submission.csv` to the working directory (not into `data/`), as CSV with a header and no index
column. Columns, exactly: `id,target`. One row per `id` of `data/test.csv` ({n_test:,} rows, any order).

- `target`: the predicted probability (between 0 and 1) that `target` is `yes` (the other class is `no`).

## Rules

- Time limit: {LIMITS['wall_s']} s of wall-clock time for the whole script; memory limit {LIMITS['memory_mb']} MB.
- No internet access. Python 3 with numpy, pandas, scipy and scikit-learn (no other packages).
- Read inputs only from `data/`; write `submission.csv` to the working directory.
"""


def scale_task(n_train: int, n_test: int, seed: int, root: Path) -> tuple[Task, float]:
    """The task under ``root``, built there first when absent; and the seconds its build took
    (0 when reused). Built in a scratch folder and moved into place whole."""
    folder = root / task_id(n_train, n_test, seed)
    if (folder / "leaderboard.csv").is_file():
        return load_task(folder), 0.0
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        build_binary_task(scratch / folder.name, n_train, n_test, seed)
        if folder.exists():  # an incomplete folder of an interrupted build
            shutil.rmtree(folder)
        os.replace(scratch / folder.name, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return load_task(folder), time.perf_counter() - started


# ----------------------------------------------------------------------------- the scripts

_READ = """import numpy as np
import pandas as pd

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
y = (train["target"] == "yes").astype(int)
numeric = [c for c in train.columns if c.startswith("num_")]
categorical = [c for c in train.columns if c.startswith("cat_")]
"""
_CODES = """for column in categorical:  # categories as integer codes, by the training table's levels
    levels = pd.Index(sorted(train[column].unique()))
    train[column], test[column] = levels.get_indexer(train[column]), levels.get_indexer(test[column])  # unseen: -1
features = numeric + categorical
"""
_WRITE = """pd.DataFrame({"id": test["id"], "target": p}).to_csv("submission.csv", index=False)
"""

#: name -> (what it is, the script). Each reads data/ and writes submission.csv.
SCRIPTS: dict[str, tuple[str, str]] = {
    "prior": ("the training share of `yes` for every row", _READ + "p = y.mean()\n" + _WRITE),
    "logreg_numeric": ("scaled logistic regression on the numeric columns", _READ + """
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(train[numeric], y)
p = model.predict_proba(test[numeric])[:, 1]
""" + _WRITE),
    "onehot_logreg": ("one-hot categories and scaled numbers, logistic regression", _READ + """
from sklearn.compose import make_column_transformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

encode = make_column_transformer((StandardScaler(), numeric), (OneHotEncoder(handle_unknown="ignore"), categorical))
model = make_pipeline(encode, LogisticRegression(max_iter=1000)).fit(train[numeric + categorical], y)
p = model.predict_proba(test[numeric + categorical])[:, 1]
""" + _WRITE),
    "random_forest": ("random forest, 30 trees of depth 12", _READ + _CODES + """
from sklearn.ensemble import RandomForestClassifier

model = RandomForestClassifier(n_estimators=30, max_depth=12, random_state=0).fit(train[features], y)
p = model.predict_proba(test[features])[:, 1]
""" + _WRITE),
    "hgb_default": ("HistGradientBoosting with its defaults (early stopping on)", _READ + _CODES + """
from sklearn.ensemble import HistGradientBoostingClassifier

model = HistGradientBoostingClassifier(random_state=0).fit(train[features], y)
p = model.predict_proba(test[features])[:, 1]
""" + _WRITE),
    "hgb_long": ("HistGradientBoosting, 600 iterations at rate 0.05, no early stopping", _READ + _CODES + """
from sklearn.ensemble import HistGradientBoostingClassifier

model = HistGradientBoostingClassifier(max_iter=600, learning_rate=0.05, early_stopping=False, random_state=0)
model.fit(train[features], y)
p = model.predict_proba(test[features])[:, 1]
""" + _WRITE),
    "knn": ("25-nearest neighbours on the scaled numeric columns", _READ + """
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

model = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=25)).fit(train[numeric], y)
p = model.predict_proba(test[numeric])[:, 1]
""" + _WRITE),
    "name_error": ("a bug whatever the size: a misspelt name after the data is read", _READ + _CODES + """
from sklearn.ensemble import HistGradientBoostingClassifier

model = HistGradientBoostingClassifier(random_state=0).fit(train[feature_columns], y)
p = model.predict_proba(test[features])[:, 1]
""" + _WRITE),
    "subsample_50k": ("boosting on 50,000 sampled rows for speed: fails on fewer rows", _READ + _CODES + """
from sklearn.ensemble import HistGradientBoostingClassifier

train = train.sample(n=50_000, random_state=0)  # a faster fit on a subsample
model = HistGradientBoostingClassifier(max_iter=300, early_stopping=False, random_state=0)
model.fit(train[features], (train["target"] == "yes").astype(int))
p = model.predict_proba(test[features])[:, 1]
""" + _WRITE),
    "grid_search": ("3-fold grid search over 8 boosting settings: outgrows the time limit", _READ + _CODES + """
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import GridSearchCV

grid = {"max_iter": [100, 200], "learning_rate": [0.05, 0.1], "max_leaf_nodes": [31, 63]}
search = GridSearchCV(HistGradientBoostingClassifier(early_stopping=False, random_state=0), grid, cv=3,
                      scoring="roc_auc").fit(train[features], y)
p = search.predict_proba(test[features])[:, 1]
""" + _WRITE),
}

# ----------------------------------------------------------------------------- the runs


def full_runs(task: Task, names: list[str]) -> dict[str, dict]:
    """Each script's full run in the sandbox, one at a time."""
    scorer = CodeScorer(world_model="surrogate", workers=1, prove=False)
    out = {}
    try:
        for name in names:
            result = scorer.execute([task], [SCRIPTS[name][1]])[0]
            out[name] = {"status": result.status, "exception": result.exception, "error": result.error,
                         "cpu_s": result.cost.get("execution_cpu_s"), "wall_s": result.cost.get("execution_s"),
                         "raw_score": result.raw_score, "score": result.real_score}
            print(f"full   {name:15s} {result.status:18s} cpu {out[name]['cpu_s']:7.1f} s  "
                  f"wall {out[name]['wall_s']:7.1f} s  score {result.real_score}", flush=True)
    finally:
        scorer.close()
    return out


def sample_runs(task: Task, names: list[str], samples_root: Path) -> tuple[dict[str, dict], dict]:
    """The sample's build (timed), each script's sample run, and the model's predictions."""
    model = SampleRunWorldModel(config={"workers": 1}, samples_root=samples_root)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        view = model.view(task)
        build = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                 "train_rows": view.train_rows, "full_train_rows": view.full_train_rows,
                 "test_rows": view.test_rows, "full_test_rows": view.full_test_rows,
                 "limits": asdict(model.config.limits(task.limits))}
        scripts = [SCRIPTS[name][1] for name in names]
        wall = time.perf_counter()
        outcomes = model.run_samples([task] * len(names), scripts)
        build["runs_wall_s"] = time.perf_counter() - wall
        # The runs just made, handed to the model as a resumed run's memo: predict reuses them.
        model.load_state_dict({"memo": [[task.id, code_key(s), asdict(o)]
                                        for s, o in zip(scripts, outcomes) if o is not None]})
        predictions = model.predict([task] * len(names), scripts)
        # What the timeout estimate makes of each valid sample: its full run's CPU, projected.
        late = [model.p_timeout(task, o) if o is not None and o.status == "valid" else (None, None) for o in outcomes]
    finally:
        model.close()
    out = {}
    for name, o, p, (p_late, projected) in zip(names, outcomes, predictions, late):
        out[name] = {"status": o.status if o else "infra_failure", "exception": o.exception if o else None,
                     "error": o.message if o else None, "cpu_s": o.cpu_s if o else None,
                     "score": o.score if o else None,
                     "projected_cpu_s": projected, "p_timeout": p_late,
                     "predicted": {"status": p.status, "score": p.score, "p_valid": p.p_valid, "stage": p.stage}}
        print(f"sample {name:15s} {out[name]['status']:18s} cpu {o.cpu_s if o else float('nan'):7.2f} s  "
              f"score {out[name]['score']}  predicted {p.status} {p.score:.3f} ({p.stage})", flush=True)
    return out, build


def summary(full: dict[str, dict], sample: dict[str, dict]) -> dict:
    names = list(full)
    both_valid = [n for n in names if full[n]["status"] == sample[n]["status"] == "valid"]
    full_cpu = sum(full[n]["cpu_s"] for n in names)
    sample_cpu = sum(sample[n]["cpu_s"] or 0.0 for n in names)

    def rho(x: list[float], y: list[float]) -> float | None:
        return float(spearmanr(x, y).statistic) if len(x) > 2 else None

    projection = np.log([full[n]["cpu_s"] / sample[n]["projected_cpu_s"] for n in both_valid])

    return {
        "full_cpu_s": full_cpu, "sample_cpu_s": sample_cpu, "sample_over_full_cpu": sample_cpu / full_cpu,
        "full_wall_s": sum(full[n]["wall_s"] for n in names),
        "both_valid": both_valid,
        "spearman_sample_full_score": rho([sample[n]["score"] for n in both_valid], [full[n]["score"] for n in both_valid]),
        "spearman_sample_full_raw": rho([sample[n]["score"] for n in both_valid],
                                        [full[n]["raw_score"] for n in both_valid]),
        "spearman_predicted_full_score": rho([sample[n]["predicted"]["score"] for n in names],
                                             [full[n]["score"] for n in names]),
        "status_agree": sum(full[n]["status"] == sample[n]["status"] for n in names),
        "predicted_status_agree": sum(full[n]["status"] == sample[n]["predicted"]["status"] for n in names),
        "projection_mean_log": float(projection.mean()) if len(projection) else None,
        "projection_sd_log": float(projection.std(ddof=1)) if len(projection) > 1 else None,
        "scripts": len(names),
    }


# ----------------------------------------------------------------------------- the report


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _status(run: dict) -> str:
    return run["status"] + (f" ({run['exception']})" if run.get("exception") else "")


def markdown(full: dict[str, dict], sample: dict[str, dict], build: dict, overall: dict, task: Task,
             config: dict) -> str:
    lines = [
        "# Sample runs against full runs on a task of realistic size",
        "",
        f"Task `{task.id}`: binary, roc_auc, {build['full_train_rows']:,} training and "
        f"{build['full_test_rows']:,} test rows, {N_NUMERIC} numeric and {len(CATEGORY_LEVELS) + 1} categorical "
        f"columns (`make_classification`, 5% flipped labels). Its leaderboard: 50 simple models fitted on "
        "subsamples of 100 to 100,000 training rows (logistic regressions on 1-20 columns, naive Bayes, trees, "
        "k-NN, forests, boosting), graded on the whole test set. Full-run limits: "
        f"wall {task.limits.wall_s:.0f} s, CPU {task.limits.cpu_s:.0f} s, memory {task.limits.memory_mb} MB. "
        + (f"Built in {config['task_build_s']:.0f} s (data and leaderboard, once)." if config["task_build_s"]
           else "Reused from an earlier run."),
        "",
        f"Sample (default `SampleRunConfig`): {build['train_rows']:,} training rows, {build['test_rows']:,} test rows "
        f"(with their answers); its runs' limits: wall {build['limits']['wall_s']:.0f} s, CPU "
        f"{build['limits']['cpu_s']:.0f} s. Its one-time build: {build['wall_s']:.1f} s wall, {build['cpu_s']:.1f} "
        "CPU-s (per task, not per script; not in the per-script figures).",
        "",
        "Each script ran once, full runs one at a time (`CodeScorer(workers=1, prove=False).execute`, "
        f"executor `{config['executor']}`), sample runs one at a time (`SampleRunWorldModel.run_samples`, "
        "`workers=1`). Score: the leaderboard position score (the reward); the full run's AUC beside it. "
        "Prediction: the model's `predict` (surrogate + sample run through the shipped head).",
        "",
        "| script | full status | full CPU-s | full wall-s | full AUC | full score | sample status | sample CPU-s "
        "| sample / full CPU | projected full CPU-s | P(timeout) | sample score | predicted status | predicted score "
        "| stage |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in full:
        f, s = full[name], sample[name]
        ratio = s["cpu_s"] / f["cpu_s"] if s["cpu_s"] is not None and f["cpu_s"] else None
        p = s["predicted"]
        lines.append(f"| `{name}` | {_status(f)} | {_num(f['cpu_s'], 1)} | {_num(f['wall_s'], 1)} | "
                     f"{_num(f['raw_score'], 4)} | {_num(f['score'], 3)} | {_status(s)} | {_num(s['cpu_s'], 2)} | "
                     f"{_num(ratio, 3)} | {_num(s.get('projected_cpu_s'), 1)} | {_num(s.get('p_timeout'), 3)} | "
                     f"{_num(s['score'], 3)} | {p['status']} | {p['score']:.3f} | {p['stage']} |")
    o = overall
    lines += [
        "",
        f"- Total CPU: sample runs {o['sample_cpu_s']:.1f} s against full runs {o['full_cpu_s']:.1f} s: "
        f"**{o['sample_over_full_cpu']:.3f}** ({(o['sample_cpu_s'] + build['cpu_s']) / o['full_cpu_s']:.3f} with "
        f"the sample's build). Full runs' wall time: {o['full_wall_s']:.0f} s.",
        f"- Spearman, sample score against full score, the {len(o['both_valid'])} scripts valid in both: "
        f"{_num(o['spearman_sample_full_score'], 3)} (against the full AUC: {_num(o['spearman_sample_full_raw'], 3)}).",
        f"- Spearman, predicted score against full score, all {o['scripts']} scripts: "
        f"{_num(o['spearman_predicted_full_score'], 3)}.",
        f"- Statuses agreeing: sample run {o['status_agree']}/{o['scripts']}, prediction "
        f"{o['predicted_status_agree']}/{o['scripts']}.",
        "- Timeout estimate: a valid sample's CPU times the task's training rows over the sample's is the full run's "
        "projected CPU; P(timeout) meets the task's limits with a log-normal spread of "
        "`SampleRunConfig.timeout_log_sd`, and above 0.5 the prediction is a timeout. `log(full / projected)` on the "
        f"scripts valid in both: mean {_num(o.get('projection_mean_log'), 2)}, sd {_num(o.get('projection_sd_log'), 2)}.",
        f"- Load average (1 min) at start {config['loadavg_start']:.2f}, at end {config['loadavg_end']:.2f} "
        "(2 cores, shared).",
        "",
        "Scripts:",
        "",
    ]
    lines += [f"- `{name}`: {what}" for name, (what, _) in SCRIPTS.items() if name in full]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-rows", type=int, default=500_000)
    parser.add_argument("--test-rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated task")
    parser.add_argument("--tasks-root", type=Path, default=None,
                        help="where the task is built and reused (default: $WMRL_HOME/scale-tasks)")
    parser.add_argument("--scripts", nargs="*", choices=list(SCRIPTS), default=list(SCRIPTS))
    parser.add_argument("--name", default="sample_run_scale")
    args = parser.parse_args(argv)
    loadavg_start = os.getloadavg()[0]
    root = args.tasks_root if args.tasks_root is not None else wmrl_home() / "scale-tasks"
    task, task_build_s = scale_task(args.train_rows, args.test_rows, args.seed, root)
    how = f"built in {task_build_s:.0f} s" if task_build_s else "reused"
    print(f"task {task.id} at {task.root} ({how})", flush=True)
    with tempfile.TemporaryDirectory(prefix="sample-run-scale-") as samples_root:  # a fresh sample, its build timed
        os.chmod(samples_root, 0o755)  # the sandbox's users read the sample as they read the task
        sample, build = sample_runs(task, args.scripts, Path(samples_root))
    full = full_runs(task, args.scripts)
    overall = summary(full, sample)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    config.update(executor=DEFAULT_EXECUTOR, task_build_s=task_build_s, loadavg_start=loadavg_start,
                  loadavg_end=os.getloadavg()[0])
    payload = {"config": config, "task": {"id": task.id, "limits": asdict(task.limits)}, "sample_view": build,
               "overall": overall, "scripts": {n: {"full": full[n], "sample": sample[n]} for n in args.scripts}}
    path = write_result(args.name, __spec__.name, payload, markdown(full, sample, build, overall, task, config))
    print(path.read_text())
    print(json.dumps(overall, indent=1))


if __name__ == "__main__":
    main()
