"""Choose the calibrator's per-task settings on train-split tasks the world model never saw.

The per-task part of :class:`~wmrl_envs.calibration.Calibrator` has two knobs:
``min_pairs_per_task`` (pairs before a task gets a map of its own) and ``task_prior_pairs``
(how strongly that map is pooled towards the global one; ``cv``, the default, chooses it
out of fold from the anchors on every refit). Choosing them on held-out tasks
would tune the calibrator on its own test set, so this script scores a grid of settings on a
corpus's **train-split** rows, refusing a corpus the surrogate was fitted on (its predictions
there are in-sample and too good). DSBench's train tasks qualify: the shipped surrogate was
fitted on MLE tasks only.

Anchor pairs are drawn the way training produces them, a group of ``--group-size`` solutions
of one task at a time; each setting is fitted on the same draws and scored by MAE on the rows
not drawn. Among the ``cv`` settings, the one with the lowest MAE averaged over ``--pairs``
wins. Fixed priors are scored for comparison: the best of them can win on one suite, but a
fixed value cannot adapt to a world model whose error is the same on every task.

    python -m bench.calibrator_settings --corpus assets/world_models/dsbench_corpus.csv

Writes ``bench/results/calibrator_settings.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from bench.common import RESULTS, rerun_command
from bench.corpus_rows import corpus_rows, draw_groups
from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.provenance import provenance
from wmrl_envs.world_models import surrogate as surrogate_lib
from wmrl_envs.world_models.build import corpus as corpus_lib

REPO = Path(__file__).resolve().parents[1]


def train_rows(corpus: Path, artefact: Path):
    """World-model predictions, real scores and task ids of the corpus's train-split rows."""
    model = surrogate_lib.SurrogateWorldModel.load(artefact)
    if model.manifest.get("corpus", {}).get("sha256") == corpus_lib.corpus_sha256(corpus):
        raise SystemExit(f"the surrogate was fitted on {corpus}: its train rows are in-sample. "
                         "Use a corpus of tasks it never saw (e.g. assets/world_models/dsbench_corpus.csv)")
    tasks, scripts, real, frame = corpus_rows(corpus, split="train")
    pred = np.array([p.score for p in model.predict(tasks, scripts)])
    return pred, real, frame["task_id"].to_numpy()


def score_settings(pred, real, task_ids, settings, sizes, seeds, group_size) -> list[dict]:
    rows = []
    for n in sizes:
        maes = {s: [] for s in settings}
        raw = []
        for seed in range(seeds):
            drawn = draw_groups(task_ids, n, group_size, np.random.default_rng(seed))
            rest = np.setdiff1d(np.arange(real.size), drawn)
            raw.append(np.abs(pred[rest] - real[rest]).mean())
            for setting in settings:
                calibrator = Calibrator(CalibratorConfig(min_pairs_per_task=setting[0], task_prior_pairs=setting[1]))
                calibrator.add_pairs(pred[drawn], real[drawn], list(task_ids[drawn]))
                maes[setting].append(np.abs(calibrator.calibrate(pred[rest], list(task_ids[rest])) - real[rest]).mean())
        for setting, values in maes.items():
            rows.append({"pairs": n, "min_pairs_per_task": setting[0], "task_prior_pairs": setting[1],
                         "mae_raw": float(np.mean(raw)), "mae": float(np.mean(values)), "mae_sd": float(np.std(values))})
    return rows


def markdown(report: dict) -> str:
    sizes = report["config"]["pairs"]
    lines = ["### Calibrator per-task settings, chosen on train-split tasks the surrogate never saw", "",
             f"{report['config']['rows']} executed solutions of {report['config']['tasks']} train tasks "
             f"(`{report['config']['corpus']}`), {report['config']['seeds']} draws per pair count, anchors drawn "
             f"in groups of {report['config']['group_size']}. MAE on the undrawn rows:", "",
             "| min_pairs_per_task | task_prior_pairs | " + " | ".join(f"{n} pairs" for n in sizes) + " | mean |",
             "|---:|---:|" + "---:|" * (len(sizes) + 1)]
    raw = {r["pairs"]: r["mae_raw"] for r in report["rows"]}
    lines.append("| raw | | " + " | ".join(f"{raw[n]:.3f}" for n in sizes) + f" | {np.mean(list(raw.values())):.3f} |")
    chosen, chosen_mean = next(((s, v) for s, v in report["ranking"] if s[1] is None), report["ranking"][0])
    for setting, mean in report["ranking"]:
        cells = [next(r for r in report["rows"] if r["pairs"] == n and
                      (r["min_pairs_per_task"], r["task_prior_pairs"]) == tuple(setting)) for n in sizes]
        mark = "**" if list(setting) == list(chosen) else ""
        lines.append(f"| {mark}{setting[0]}{mark} | {mark}{_prior_label(setting[1])}{mark} | "
                     + " | ".join(f"{c['mae']:.3f}" for c in cells) + f" | {mean:.3f} |")
    m = report["machine"]
    best, best_mean = report["ranking"][0]
    lines += ["", "Bold: the lowest mean among `cv` rows, the pooling the default uses."]
    if best != chosen:
        lines += ["", f"The best fixed prior here ({best[0]}, {_prior_label(best[1])}) is {chosen_mean - best_mean:.3f} "
                  "lower on this suite, whose surrogate error is mostly per task; a fixed prior cannot fall back "
                  "to the global map for a world model whose error is not (`tests/unit/test_calibration.py`, "
                  "`test_task_prior_chosen_from_anchors_*`)."]
    lines += ["", f"{m['cores']} cores, {m['date'][:10]}, commit `{m['commit'][:10]}`. "
              f"Rerun: `{rerun_command(__spec__.name, ['--corpus', report['config']['corpus']])}`"]
    return "\n".join(lines) + "\n"


def _prior_label(prior: float | None) -> str:
    return "cv" if prior is None else f"{prior:g}"


def _prior(text: str) -> float | None:
    """A ``--task-prior-pairs`` value: a number of pseudo-pairs, or ``cv`` (chosen out of fold)."""
    return None if text == "cv" else float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="corpus CSV with train-split rows of unseen tasks")
    parser.add_argument("--artefact", type=Path, default=surrogate_lib.default_path())
    parser.add_argument("--pairs", type=int, nargs="+", default=[30, 100, 300])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--group-size", type=int, default=4, help="pairs per anchor group (the trainer's G)")
    parser.add_argument("--min-pairs-per-task", type=int, nargs="+", default=[2, 4, 8, 16, 50])
    parser.add_argument("--task-prior-pairs", type=_prior, nargs="+", default=[None, 0, 4, 16],
                        help="pseudo-pairs of the global map, or cv: chosen out of fold (the default)")
    args = parser.parse_args()

    pred, real, task_ids = train_rows(args.corpus, args.artefact)
    if max(args.pairs) > real.size - 40:
        raise SystemExit(f"--pairs up to {max(args.pairs)} leaves too few of {real.size} rows to score on")
    settings = list(itertools.product(args.min_pairs_per_task, args.task_prior_pairs))
    rows = score_settings(pred, real, task_ids, settings, args.pairs, args.seeds, args.group_size)
    mean = {s: float(np.mean([r["mae"] for r in rows if (r["min_pairs_per_task"], r["task_prior_pairs"]) == s]))
            for s in settings}
    report = {"machine": provenance(),
              "config": {"corpus": os.path.relpath(args.corpus.resolve(), REPO), "rows": int(real.size),
                         "tasks": int(np.unique(task_ids).size), "pairs": args.pairs, "seeds": args.seeds,
                         "group_size": args.group_size},
              "rows": rows, "ranking": sorted(([list(s), m] for s, m in mean.items()), key=lambda x: x[1])}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibrator_settings.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "calibrator_settings.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
