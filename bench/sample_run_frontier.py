"""How a sample run's fidelity and cost grow with the sample's size, on the tasks we have.

The multi-fidelity world model (:mod:`wmrl_envs.world_models.sample_run`) runs a script on
``max(min_train_rows, fraction x rows)`` of its task's training rows. This bench measures the
trade that choice makes: each configuration of :data:`DEFAULT_CONFIGS` (``fraction:min_rows``; the
last, ``1:1``, is the full run by the same code path, wall cap unscaled) runs every script of

* the **corpora** rows: the executed corpora's scripts on the built-in suites' held-out tasks that
  no proof settles, valid in full, on the tasks of more than 200 training rows (:data:`SELECTION`)
  (in-sample as to the suites; the surrogate never fitted these tasks);
* with ``--set v1``: the valid scripts of the first frozen out-of-sample set (grammar draws and
  hand-written), **used**: it has judged changes before. The second set is refused: it judges a
  change only through a registration of its own (``bench/oos/README.md``).

For each configuration it reports the raw sample score's Spearman against the full score, the
score head's blend (``intercept + sample + surrogate``, refitted for the configuration: leave one
task out on the corpora; fitted on all corpora rows for the set), its pooled and within-task
Spearman and MAE with bootstrap intervals, the share of full-valid scripts the sample fails, and
CPU: the sample runs' CPU-seconds over the full runs' measured in the same memo. A sample that
fails is scored as the runtime scores it, with the shipped head's P(valid) after that failure: a
rebuilt head can move a figure in its third decimal (the committed report's 200-row MAE on the
first set reads 0.160 under the head rebuilt at 600 rows, 0.159 under the one it ran with).

Runs are memoised in ``bench/results/sample_run_frontier_runs.csv.xz``; a rerun executes only what
it lacks (``--report`` executes nothing).

    python -m bench.sample_run_frontier --set v1 --workers 2     # about 15 min on 2 cores
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from bench import world_model_metrics as metrics
from bench.common import RESULTS, write_result
from wmrl_envs import outcome
from wmrl_envs.errors import ConfigError
from wmrl_envs.world_models.build.sample_head import fit_blend

log = logging.getLogger(__name__)
NAME = "sample_run_frontier"
RUNS = RESULTS / f"{NAME}_runs.csv.xz"
#: ``fraction:min_rows`` of each configuration; ``1:1`` is the full run.
DEFAULT_CONFIGS = ("0.04:100", "0.08:200", "0.08:400", "0.08:600", "0.08:1000", "1:1")
FULL = "1:1"
#: The corpora tasks measured are those whose sample at this size keeps fewer rows than the task
#: (the default when the bench first ran), fixed so that every run measures the same scripts.
SELECTION = "0.08:200"
RUN_COLUMNS = ["source", "key", "task_id", "config", "status", "exception", "score", "cpu_s"]
RESAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Sizing:
    """One configuration: the share of training rows and the fewest rows a sample keeps."""

    fraction: float
    min_rows: int

    @classmethod
    def parse(cls, text: str) -> Sizing:
        try:
            fraction, min_rows = text.split(":")
            sizing = cls(float(fraction), int(min_rows))
        except ValueError as exc:
            raise ConfigError(f"a configuration is FRACTION:MIN_ROWS (e.g. 0.08:200), got {text!r}") from exc
        if not 0 < sizing.fraction <= 1 or sizing.min_rows < 1:
            raise ConfigError(f"FRACTION must be in (0, 1] and MIN_ROWS >= 1, got {text!r}")
        return sizing

    @property
    def label(self) -> str:
        return f"{self.fraction:g}:{self.min_rows}"

    def sample_config(self, workers: int):
        from wmrl_envs.world_models.sample_run import SampleRunConfig

        # The full run keeps the task's own wall and CPU caps; a sample's are scaled as by default.
        extra = {"wall_share": 1.0} if self.fraction == 1 else {}
        return SampleRunConfig(fraction=self.fraction, min_train_rows=self.min_rows, workers=workers, **extra)


# ----------------------------------------------------------------------------- the scripts


def corpus_scripts() -> pd.DataFrame:
    """The corpora rows measured: held-out tasks, unproved, valid in full, their sample at
    :data:`SELECTION` smaller than the task. Columns: source, key, task_id, real, model_valid, text, task."""
    from agents.code.handwritten import render_solution
    from wmrl_envs.tasks import get_task
    from wmrl_envs.world_models.build import corpus as corpus_lib
    from wmrl_envs.world_models.sample_run import sample_view

    memo = pd.read_csv(Path(__file__).resolve().parents[1] / "assets/world_models/sample_corpus.csv.xz",
                       keep_default_na=False, dtype={"seed": int})
    rows = memo[(memo["split"] == "heldout") & (memo["full_outcome"] == outcome.VALID)
                & (~memo["proved"].astype(bool))].copy()
    selection = Sizing.parse(SELECTION).sample_config(workers=1)
    smaller = {t for t in rows["task_id"].unique()
               if (view := sample_view(get_task(t), selection)).train_rows < view.full_train_rows}
    rows = rows[rows["task_id"].isin(smaller)].reset_index(drop=True)
    row_tasks, texts = corpus_lib.rendered(rows, render_solution, get_task)
    keys = ["|".join(map(str, k)) for k in rows[list(corpus_lib.MEMO_KEY)].to_numpy()]
    return pd.DataFrame({"source": "corpus", "key": keys, "task_id": rows["task_id"],
                         "real": rows["real_score"].astype(float), "model_valid": rows["model_valid"].astype(float),
                         "text": texts, "task": row_tasks})


def set_scripts(name: str, workers: int) -> pd.DataFrame:
    """A frozen set's valid scripts (grammar draws from its memo, and hand-written), with the
    surrogate's valid-score estimate."""
    from bench.oos import SETS
    from bench.oos.rows import GRAMMAR_PER_TASK, GRAMMAR_SEED, grammar_memo, grammar_rows, handwritten_rows
    from wmrl_envs.sandbox import DEFAULT_EXECUTOR
    from wmrl_envs.tasks import get_task
    from wmrl_envs.world_models.sample_run import valid_estimate
    from wmrl_envs.world_models.surrogate import SurrogateWorldModel

    if name == "v2":
        raise ConfigError("the second frozen set judges a change only through its own registration; "
                          "this bench reads the first (--set v1)")
    frozen = SETS[name]
    tasks = frozen.materialise()
    grammar, _ = grammar_rows(tasks, "oos", GRAMMAR_PER_TASK, GRAMMAR_SEED, DEFAULT_EXECUTOR, workers,
                              grammar_memo(frozen))
    rows = pd.concat([grammar, handwritten_rows(frozen)], ignore_index=True)
    rows = rows[rows["valid"].astype(bool)].reset_index(drop=True)
    row_tasks = [tasks[t] if t in tasks else get_task(t) for t in rows["task_id"]]
    model = SurrogateWorldModel.load()
    estimates = [valid_estimate(p) for p in model.predict(row_tasks, list(rows["text"]))]
    return pd.DataFrame({"source": name, "key": [f"{s}|{t}|{n}" for s, t, n in
                                                 zip(rows["source"], rows["task_id"], rows["script"])],
                         "task_id": rows["task_id"], "real": rows["reward"].astype(float),
                         "model_valid": estimates, "text": rows["text"], "task": row_tasks})


# ----------------------------------------------------------------------------- the runs


def read_runs(path: Path = RUNS) -> pd.DataFrame:
    if path.is_file():
        return pd.read_csv(path, keep_default_na=False, na_values={"score": [""], "cpu_s": [""]})
    return pd.DataFrame(columns=RUN_COLUMNS)


def run_missing(scripts: pd.DataFrame, sizings: Sequence[Sizing], workers: int, path: Path = RUNS) -> pd.DataFrame:
    """Run every (script, configuration) the memo lacks, one configuration at a time, appending each
    configuration's runs to the memo as it finishes."""
    from tqdm.auto import tqdm

    from wmrl_envs.world_models.sample_run import SampleRunHead, SampleRunWorldModel

    runs = read_runs(path)
    for sizing in sizings:
        done = set(zip(runs["source"], runs["key"], runs["config"]))
        todo = scripts[[(s, k, sizing.label) not in done for s, k in zip(scripts["source"], scripts["key"])]]
        if todo.empty:
            continue
        tasks = list(todo["task"])
        model = SampleRunWorldModel(base="surrogate", head=SampleRunHead(), config=sizing.sample_config(workers))
        started = time.time()
        try:
            results = []
            for start in tqdm(range(0, len(todo), 32), desc=f"runs at {sizing.label}"):
                results += model.run_samples(tasks[start:start + 32], list(todo["text"].iloc[start:start + 32]))
        finally:
            model.close()
        log.info("%s: %d runs in %.0f s", sizing.label, len(todo), time.time() - started)
        new = pd.DataFrame({"source": todo["source"], "key": todo["key"], "task_id": todo["task_id"],
                            "config": sizing.label,
                            "status": [r.status if r else outcome.INFRA_FAILURE for r in results],
                            "exception": [(r.exception or "") if r else "" for r in results],
                            "score": [r.score if r and r.status == outcome.VALID else np.nan for r in results],
                            "cpu_s": [round(r.cpu_s, 4) if r else np.nan for r in results]})
        runs = pd.concat([runs, new], ignore_index=True)
        runs.to_csv(path, index=False)
    return runs


# ----------------------------------------------------------------------------- the figures


def predict(coef: np.ndarray, sample: np.ndarray, model: np.ndarray, failed_p_valid: np.ndarray) -> np.ndarray:
    """The reward the sample-run model gives: the blend where the sample ran valid, else the
    failure's P(valid) times the surrogate's estimate."""
    blend = np.clip(coef[0] + coef[1] * sample + coef[2] * model, 0.0, 1.0)
    return np.where(np.isfinite(sample), blend, failed_p_valid * np.nan_to_num(model))


def leave_task_out(frame: pd.DataFrame) -> np.ndarray:
    """Each row's prediction from a blend fitted on the other tasks' rows that ran valid."""
    out = np.empty(len(frame))
    tasks = frame["task_id"].to_numpy()
    valid = np.isfinite(frame["sample"].to_numpy())
    for task in np.unique(tasks):
        fit = (tasks != task) & valid
        coef = fit_blend(frame["sample"].to_numpy()[fit], frame["model_valid"].to_numpy()[fit],
                         frame["real"].to_numpy()[fit])
        mine = tasks == task
        out[mine] = predict(coef, frame["sample"].to_numpy()[mine], frame["model_valid"].to_numpy()[mine],
                            frame["failed_p_valid"].to_numpy()[mine])
    return out


def figures(frame: pd.DataFrame, predicted: np.ndarray, full_cpu: np.ndarray, resamples: int, seed: int) -> dict:
    """Ranking, error and cost of one configuration's predictions on one set of scripts."""
    real, tasks = frame["real"].to_numpy(), frame["task_id"].to_numpy()
    sample, cpu = frame["sample"].to_numpy(), frame["cpu_s"].to_numpy()
    ran = np.isfinite(sample)

    def boot(fn):
        return metrics.bootstrap(fn, len(real), resamples, seed)

    return {
        "scripts": int(len(real)), "tasks": int(len(np.unique(tasks))),
        "sample_failed": int((~ran).sum()),
        "raw_spearman": metrics.spearman(sample[ran], real[ran]),
        "spearman_pooled": boot(lambda i: metrics.spearman(predicted[i], real[i])),
        "spearman_within_task": boot(lambda i: metrics.mean_within_task_spearman(predicted[i], real[i], tasks[i])),
        "mae": boot(lambda i: float(np.mean(np.abs(predicted[i] - real[i])))),
        "cpu_s": float(np.nansum(cpu)), "full_cpu_s": float(np.nansum(full_cpu)),
        "cpu_share": float(np.nansum(cpu) / np.nansum(full_cpu)),
        "median_cpu_ratio": float(np.nanmedian(cpu / full_cpu)),
    }


def assemble(scripts: pd.DataFrame, runs: pd.DataFrame, label: str, head) -> pd.DataFrame:
    """The scripts with one configuration's runs: sample score (NaN where it failed), CPU, and the
    P(valid) the head gives its failure."""
    mine = runs[runs["config"] == label].drop_duplicates(["source", "key"], keep="last")
    frame = scripts.drop(columns=["text", "task"]).merge(mine[["source", "key", "status", "exception", "score", "cpu_s"]],
                                                 on=["source", "key"], how="inner", validate="one_to_one")
    frame["sample"] = frame["score"].astype(float)
    frame["failed_p_valid"] = [head.failure_p_valid(s, e or None) for s, e in zip(frame["status"], frame["exception"])]
    return frame


#: A projection is measured on tasks that hold more than this many times their sample's rows.
PROJECTION_MIN_SCALE = 3.0


def projection(frame: pd.DataFrame, full_cpu: np.ndarray, shares: np.ndarray) -> dict:
    """How well the sample's CPU, scaled linearly by the training rows, projects the full run's
    (what the runtime's timeout estimate assumes): ``log(full / projected)`` on the scripts valid
    on the sample whose task holds more than :data:`PROJECTION_MIN_SCALE` times its rows."""
    cpu = frame["cpu_s"].to_numpy(dtype=float)
    keep = np.isfinite(frame["sample"].to_numpy()) & (shares * PROJECTION_MIN_SCALE < 1) & (cpu > 0) & (full_cpu > 0)
    if keep.sum() < 2:
        return {"scripts": int(keep.sum())}
    error = np.log(full_cpu[keep] / (cpu[keep] / shares[keep]))
    return {"scripts": int(keep.sum()), "tasks": len(np.unique(frame["task_id"].to_numpy()[keep])),
            "mean_log": float(error.mean()), "sd_log": float(error.std(ddof=1))}


def report(scripts: pd.DataFrame, runs: pd.DataFrame, sizings: Sequence[Sizing], resamples: int, seed: int) -> dict:
    from wmrl_envs.world_models.sample_run import SampleRunHead, sample_view

    head = SampleRunHead.load()
    tasks = dict(zip(scripts["task_id"], scripts["task"]))
    full = assemble(scripts, runs, FULL, head).set_index(["source", "key"])["cpu_s"]
    out: dict[str, dict] = {}
    for sizing in sizings:
        frame = assemble(scripts, runs, sizing.label, head)
        full_cpu = full.reindex(list(zip(frame["source"], frame["key"]))).to_numpy(dtype=float)
        corpus = (frame["source"] == "corpus").to_numpy()
        entry = {"corpus": figures(frame[corpus].reset_index(drop=True), leave_task_out(frame[corpus]),
                                   full_cpu[corpus], resamples, seed)}
        fitted = frame[corpus & np.isfinite(frame["sample"].to_numpy())]
        coef = fit_blend(fitted["sample"].to_numpy(), fitted["model_valid"].to_numpy(), fitted["real"].to_numpy())
        entry["blend"] = [round(float(c), 4) for c in coef]
        for source in sorted(set(frame["source"]) - {"corpus"}):
            rows = (frame["source"] == source).to_numpy()
            part = frame[rows].reset_index(drop=True)
            entry[source] = figures(part, predict(coef, part["sample"].to_numpy(), part["model_valid"].to_numpy(),
                                                  part["failed_p_valid"].to_numpy()), full_cpu[rows], resamples, seed)
        if sizing.label != FULL:
            config = sizing.sample_config(workers=1)
            share = {task_id: sample_view(tasks[task_id], config).train_share for task_id in frame["task_id"].unique()}
            entry["projection"] = projection(frame, full_cpu, frame["task_id"].map(share).to_numpy(dtype=float))
        out[sizing.label] = entry
    return out


def _ci(block: dict) -> str:
    return f"{block['value']:.3f} [{block['lo']:.2f}, {block['hi']:.2f}]"


def markdown(result: dict, sources: Sequence[str]) -> str:
    lines = ["# Sample runs: fidelity against cost as the sample grows",
             "",
             "Each configuration `FRACTION:MIN_ROWS` runs a script on `max(MIN_ROWS, FRACTION x rows)` training rows "
             "(`1:1` is the full run by the same code path). The score head's blend is refitted for each "
             "configuration. Bootstrap 95% intervals over scripts in brackets. CPU share: the sample runs' "
             "CPU-seconds over the full runs' (`1:1`), measured in the same memo.",
             ""]
    titles = {"corpus": "Corpora: the built-in suites' held-out tasks (in-sample as to the suites; "
                        "blend fitted leaving the task out)",
              "v1": "The first frozen out-of-sample set (**used**: it has judged changes; blend fitted on the corpora)"}
    for source in ["corpus", *sources]:
        first = result[next(iter(result))][source]
        lines += [f"## {titles.get(source, source)}", "",
                  f"{first['scripts']} scripts valid in full, {first['tasks']} tasks.", "",
                  "| config | sample failed | raw Spearman | blend: pooled Spearman | within task | MAE | CPU share | median ratio |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label, entry in result.items():
            f = entry[source]
            lines.append(f"| `{label}` | {f['sample_failed']} | {f['raw_spearman']:.3f} | {_ci(f['spearman_pooled'])} | "
                         f"{_ci(f['spearman_within_task'])} | {_ci(f['mae'])} | {f['cpu_share']:.2f} | "
                         f"{f['median_cpu_ratio']:.2f} |")
        lines.append("")
    lines += ["Blend weights (intercept, sample, surrogate), fitted on every corpora row of the configuration: "
              + "; ".join(f"`{label}` {entry['blend']}" for label, entry in result.items()), "",
              "## The full run's CPU projected from the sample's", "",
              "The sample's CPU-seconds times the task's training rows over the sample's, against the full run's "
              "(what the timeout estimate of `SampleRunConfig.timeout_log_sd` assumes): `log(full / projected)` "
              f"on the scripts valid on the sample, on tasks of more than {PROJECTION_MIN_SCALE:g} times the sample's "
              "rows, every source together. The interpreter's start is projected too, so on these small tasks the "
              "projection runs high (a negative mean).", "",
              "| config | scripts | tasks | mean log(full / projected) | sd |", "|---|---:|---:|---:|---:|"]
    for label, entry in result.items():
        p = entry.get("projection")
        if p and "sd_log" in p:
            lines.append(f"| `{label}` | {p['scripts']} | {p['tasks']} | {p['mean_log']:.2f} | {p['sd_log']:.2f} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS), metavar="FRACTION:MIN_ROWS",
                        help=f"sample sizes to compare; must include the full run {FULL} (default: %(default)s)")
    parser.add_argument("--set", dest="frozen_set", choices=["v1", "v2"], help="also read a frozen set (v1 only)")
    parser.add_argument("--workers", type=int, default=2, help="parallel runs (default: %(default)s)")
    parser.add_argument("--report", action="store_true", help="execute nothing; report from the memo")
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    parser.add_argument("--name", default=NAME, help="results file name (default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sizings = [Sizing.parse(c) for c in args.configs]
    if FULL not in [s.label for s in sizings]:
        raise ConfigError(f"--configs must include the full run {FULL}: the CPU share is measured against it")
    scripts = corpus_scripts()
    if args.frozen_set:
        scripts = pd.concat([scripts, set_scripts(args.frozen_set, args.workers)], ignore_index=True)
    runs = read_runs() if args.report else run_missing(scripts, sizings, args.workers)
    result = report(scripts, runs, sizings, args.resamples, BOOTSTRAP_SEED)
    sources = [args.frozen_set] if args.frozen_set else []
    path = write_result(args.name, __spec__.name, {"configs": [s.label for s in sizings], "result": result},
                        markdown(result, sources))
    log.info("wrote %s", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
