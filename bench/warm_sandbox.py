"""The warm sandbox: measure what its zygotes preload, and check that it scores like the cold one.

Two steps, each writing ``bench/results/warm_<step>.json`` and ``.md``:

``preload``
    Runs representative corpus scripts (the grammar's solutions, unbroken, from the corpus rows
    of ``--preload-tasks``) under ``python -X importtime`` in the cold sandbox, and keeps the
    modules most runs import under the runtime's requirements digest in
    ``assets/runtime-preload.json`` (:mod:`wmrl_envs.sandbox.preload`).

``parity``
    Every corpus script of ``--tasks`` (broken ones included), executed and graded through the
    code scorer with the cold executor (``bwrap``) and then the warm one: the same status and
    the same score (within ``--tolerance``) for every script, or the report lists the
    differences. Wall-clock limits are capped as the corpus builder caps them.

    python -m bench.warm_sandbox preload [--preload-tasks ...] [--max-scripts 30]
    python -m bench.warm_sandbox parity [--tasks ...] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per process on a shared 2-core box

from bench.common import RESULTS
from bench.corpus_rows import CORPUS, capped_script
from wmrl_envs.provenance import provenance
from wmrl_envs.sandbox import make_executor
from wmrl_envs.sandbox.preload import measure, profiles_path, save_profile
from wmrl_envs.sandbox.runtime import load_runtime
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.world_models.build.corpus import CorpusItem, corpus_items, read_corpus

REPO = Path(__file__).resolve().parents[1]
# Binary, multiclass, regression (twice) and text; between them every broken mutation but one.
PARITY_TASKS = ("titanic-survival", "glass-identification", "concrete-strength", "food-review-sentiment",
                "diabetes-progression")
# Train-split tasks, so that what is preloaded is not chosen on the tasks parity checks.
PRELOAD_TASKS = ("alzheimers-biomarkers", "auto-fuel-economy", "caravan-insurance", "trump-tweet-source")


def items_of(tasks: tuple[str, ...]) -> list[CorpusItem]:
    return [item for item in corpus_items(read_corpus(CORPUS)) if item.task_id in tasks]


def write(name: str, report: dict, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)
    print(markdown)


def preload(args: argparse.Namespace) -> None:
    runtime = load_runtime()
    unbroken = [item for item in items_of(tuple(args.preload_tasks)) if item.mutation == "none"]
    chosen = unbroken[: args.max_scripts]
    start = time.perf_counter()
    profile = measure(make_executor("bwrap"), [capped_script(item) for item in chosen], min_share=args.min_share,
                      min_ms=args.min_ms)
    # The runtime's Python, not this process's, is what the profile was measured on.
    profile |= {**provenance(), "tasks": list(args.preload_tasks), "python": runtime.version}
    save_profile(runtime.requirements_sha256, profile)
    heavy = sorted(profile["measured"].items(), key=lambda kv: -kv[1]["median_ms"])[:12]
    lines = [
        "### What the warm sandbox preloads",
        "",
        f"{profile['scripts']} unbroken corpus scripts of {', '.join(args.preload_tasks)} under `python -X importtime` "
        f"in the cold sandbox ({time.perf_counter() - start:.0f} s). Preloaded: the top-level imports of at least "
        f"{args.min_share:.0%} of the scripts with a median cost of at least {args.min_ms:g} ms, "
        f"{len(profile['modules'])} modules, kept under runtime digest `{runtime.requirements_sha256[:12]}` in "
        f"`{profiles_path().relative_to(REPO)}`.",
        "",
        "| module (top-level import) | share of scripts | median cumulative ms | preloaded |",
        "|---|---:|---:|---|",
    ]
    for name, m in heavy:
        preloaded = "yes" if name in profile["modules"] else "no"
        lines.append(f"| {name} | {m['share']:.0%} | {m['median_ms']:.1f} | {preloaded} |")
    write("warm_preload", {"requirements_sha256": runtime.requirements_sha256, **profile}, "\n".join(lines) + "\n")


def parity(args: argparse.Namespace) -> None:
    items = items_of(tuple(args.tasks))
    scripts, tasks = zip(*(capped_script(item) for item in items))
    outcomes, seconds = {}, {}
    for name in ("bwrap", "warm"):
        start = time.perf_counter()
        scorer = CodeScorer(executor=name, workers=args.workers, prove=False)  # every script runs
        outcomes[name] = scorer.execute(list(tasks), list(scripts))
        scorer.close()
        seconds[name] = time.perf_counter() - start
    rows, differences = [], []
    for item, cold, warm in zip(items, outcomes["bwrap"], outcomes["warm"]):
        row = {"task_id": item.task_id, "choices": item.choices, "seed": item.seed, "mutation": item.mutation}
        for label, r in (("cold", cold), ("warm", warm)):
            row |= {f"{label}_status": r.execution_status or r.status, f"{label}_score": r.real_score,
                    f"{label}_raw": r.raw_score, f"{label}_valid": r.valid,
                    f"{label}_cpu_s": r.cost.get("execution_cpu_s"), f"{label}_infra": r.infra_failure}
        same_score = abs(cold.real_score - warm.real_score) <= args.tolerance
        row["same"] = row["cold_status"] == row["warm_status"] and same_score and not cold.infra_failure \
            and not warm.infra_failure
        rows.append(row)
        if not row["same"]:
            differences.append(row)
    statuses = sorted({r["cold_status"] for r in rows})
    worst = max(abs(r["cold_score"] - r["warm_score"]) for r in rows)
    cpu = {label: sum(r[f"{label}_cpu_s"] or 0.0 for r in rows) / len(rows) for label in ("cold", "warm")}
    report = {"tasks": list(args.tasks), "scripts": len(rows), "tolerance": args.tolerance, "workers": args.workers,
              "same": len(rows) - len(differences), "differences": differences, "statuses": statuses,
              "max_abs_score_difference": worst, "batch_wall_s": seconds, "mean_run_cpu_s": cpu,
              **provenance(), "rows": rows}
    lines = [
        "### Warm against cold: same scripts, same scores",
        "",
        f"Every corpus script of {', '.join(args.tasks)} ({len(rows)} scripts, statuses {', '.join(statuses)}), "
        f"executed and graded through the code scorer with each executor, {args.workers} workers.",
        "",
        f"* Same status and score (within {args.tolerance:g}): **{len(rows) - len(differences)} of {len(rows)}**; "
        f"largest score difference {worst:.3g}.",
        f"* Batch wall time: cold {seconds['bwrap']:.0f} s, warm {seconds['warm']:.0f} s. Mean run CPU-s (the run's "
        f"own cgroup): cold {cpu['cold']:.2f}, warm {cpu['warm']:.2f}.",
        "",
    ]
    for d in differences:
        lines.append(f"* differs: {d['task_id']} {d['choices']} seed {d['seed']} {d['mutation']}: cold "
                     f"{d['cold_status']} {d['cold_score']}, warm {d['warm_status']} {d['warm_score']}")
    write("warm_parity", report, "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("preload", help="measure what the zygotes import (-X importtime over corpus scripts)")
    p.add_argument("--preload-tasks", nargs="+", default=list(PRELOAD_TASKS))
    p.add_argument("--max-scripts", type=int, default=30, help="unbroken corpus scripts to measure")
    p.add_argument("--min-share", type=float, default=0.5, help="preload modules at least this share of scripts import")
    p.add_argument("--min-ms", type=float, default=1.0, help="... at a median cumulative cost of at least this")
    q = steps.add_parser("parity", help="every corpus script of the tasks, warm and cold: same status and score")
    q.add_argument("--tasks", nargs="+", default=list(PARITY_TASKS))
    q.add_argument("--workers", type=int, default=2)
    q.add_argument("--tolerance", type=float, default=1e-9)
    args = parser.parse_args()
    {"preload": preload, "parity": parity}[args.step](args)


if __name__ == "__main__":
    main()
