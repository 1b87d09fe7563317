"""What the bubblewrap sandbox costs: added latency per run and pool throughput.

Runs, interleaved in one process so machine noise hits both sides alike:

1. latency: the same script run bare (a plain subprocess of the runtime venv's python, in a
   temp dir, with the sandbox's environment variables) and through ``BwrapExecutor``;
   a trivial script and a small numpy script; median and added milliseconds per run.
2. throughput: CPU-bound pure-Python scripts (about ``--loop-s`` seconds each) through an
   ``ExecutorPool`` with 1 and 2 workers; scripts per second and the speed-up.
3. Ray throughput: the same scripts through ``make_executor("ray")`` on a local Ray cluster
   started with ``ray.init(num_cpus=1)`` and then ``num_cpus=2`` (the pool has a thread per
   script, so Ray's CPUs bound the concurrency); start-up and prewarm are timed apart from the
   batch. ``--skip-ray`` leaves it out (it needs ``pip install 'wmrl[ray]'``).
4. Docker latency: the latency runs of 1. through ``make_executor("docker")``, on the engine of
   ``--docker-host`` or else on a private dockerd started for the benchmark (root, docker.io);
   ``--skip-docker`` leaves it out. The 60 ms target is bubblewrap's.
5. Warm against cold: ``make_executor("warm")`` (runs forked from a preloaded zygote) and
   ``"bwrap"``, interleaved, ``--warm-repeats`` runs each of a trivial script, the corpus
   scripts' imports alone, and the median corpus script (the unbroken corpus row whose recorded
   CPU-s is nearest the corpus median). Per run: the CPU-s of everything this benchmark's
   process tree spent on it (its own cpuacct cgroup: host side, sandbox set-up, the zygote's
   fork and the run), the run's own cgroup CPU-s and the wall time; mean ± SE. Then pool
   throughput with 2 workers on batches of ``--pool-jobs`` median corpus scripts, per executor.
   The zygote's start (its imports, paid once) is timed apart. ``--skip-warm`` leaves it out.

Writes ``bench/results/<name>.json`` and ``.md`` (``--name``, default ``sandbox_overhead``).
Targets: under 60 ms added per run, at least 1.7x throughput with 2 workers on 2 cores, and at
least 2.5x fewer CPU-s per median corpus run warm than cold.

    python -m bench.sandbox_overhead [--runs 20] [--pool-jobs 6] [--loop-s 1.5] [--skip-ray] [--skip-docker]
                                     [--warm-repeats 5] [--skip-warm]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench.common import RESULTS
from wmrl_envs.provenance import provenance
from wmrl_envs.sandbox import ExecutorPool, Limits, cgroups, make_executor
from wmrl_envs.sandbox.dockerd import PrivateDockerd
from wmrl_envs.sandbox.launcher import agent_env
from wmrl_envs.sandbox.runtime import load_runtime

SCRIPTS = {
    "trivial": "pass\n",
    "numpy": "import numpy as np\nprint(float(np.linalg.norm(np.arange(1000.0))))\n",
}
LOOP = "total = 0\nfor i in range({n}):\n    total += i * i\nprint(total)\n"
TARGET_ADDED_MS = 60.0
TARGET_SPEEDUP = 1.7
TARGET_WARM_CPU_RATIO = 2.5


def run_bare(python: Path, script: str, env: dict[str, str]) -> float:
    """Seconds to run ``script`` with the runtime's python, unsandboxed."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, "solution.py").write_text(script)
        start = time.perf_counter()
        subprocess.run([str(python), "solution.py"], cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start


def run_boxed(executor, script: str, task) -> float:
    start = time.perf_counter()
    result = executor.run(script, task)
    elapsed = time.perf_counter() - start
    if not result.ok:
        raise RuntimeError(f"sandboxed benchmark run failed: {result}")
    return elapsed


def latency(executor, task, python: Path, runs: int) -> dict[str, dict[str, float]]:
    env = agent_env(path=f"{python.parent}:/usr/bin:/bin", home="/tmp", tmpdir="/tmp")
    out = {}
    for name, script in SCRIPTS.items():
        run_bare(python, script, env), run_boxed(executor, script, task)  # warm caches
        bare, boxed = [], []
        for _ in range(runs):  # interleaved: drift and noise hit both sides alike
            bare.append(run_bare(python, script, env))
            boxed.append(run_boxed(executor, script, task))
        out[name] = {
            "bare_median_ms": 1000 * statistics.median(bare),
            f"{executor.name}_median_ms": 1000 * statistics.median(boxed),
            # Median of the per-pair differences: robust to load that drifts during the run.
            "added_ms": 1000 * statistics.median(b - a for a, b in zip(bare, boxed, strict=True)),
        }
    return out


def calibrate_loop(python: Path, seconds: float) -> int:
    """Loop length that takes about ``seconds`` of pure-Python work here."""
    n = 2_000_000
    env = agent_env(path=f"{python.parent}:/usr/bin:/bin", home="/tmp", tmpdir="/tmp")
    elapsed = run_bare(python, LOOP.format(n=n), env) - run_bare(python, "pass\n", env)
    return int(n * seconds / max(elapsed, 1e-3))


def host_busy_cpu_s() -> float:
    """CPU-seconds the whole machine has spent busy since boot (from /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def timed_batch(pool: ExecutorPool, items: list, label: str) -> dict[str, float]:
    """Scripts per second, mean CPU-seconds per script and the other load, for one batch."""
    busy, start = host_busy_cpu_s(), time.perf_counter()
    results = pool.run_batch(items)
    elapsed, busy = time.perf_counter() - start, host_busy_cpu_s() - busy
    if not all(r.ok for r in results):
        raise RuntimeError(f"a throughput run failed: {[r for r in results if not r.ok][:1]}")
    ours = sum(r.cpu_s for r in results)
    return {
        f"scripts_per_s_{label}": len(items) / elapsed,
        f"mean_cpu_s_{label}": ours / len(items),
        # On a shared machine other work competes for the cores; record how much.
        f"other_load_cores_{label}": max(0.0, busy - ours) / elapsed,
    }


def loop_items(task, n: int, jobs: int) -> list:
    return [(LOOP.format(n=n + i), task) for i in range(jobs)]  # distinct scripts


def throughput(executor, task, n: int, jobs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for workers in (1, 2):
        with ExecutorPool(executor, workers=workers) as pool:
            out |= timed_batch(pool, loop_items(task, n, jobs), f"{workers}w")
    out["speedup_2w"] = out["scripts_per_s_2w"] / out["scripts_per_s_1w"]
    return out


def ray_throughput(task, n: int, jobs: int) -> dict[str, float]:
    """The throughput batch through the Ray executor on a local cluster of 1, then 2 CPUs."""
    import ray

    out: dict[str, float] = {}
    for cpus in (1, 2):
        start = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        try:
            executor = make_executor("ray")
            executor.prewarm([task])
            out[f"startup_s_{cpus}w"] = time.perf_counter() - start  # ray.init plus prewarm
            with ExecutorPool(executor, workers=jobs) as pool:
                pool.run_batch([("pass\n", task)] * 2 * cpus)  # each worker builds its sandbox once
                out |= timed_batch(pool, loop_items(task, n, jobs), f"{cpus}w")
        finally:
            ray.shutdown()
    out["speedup_2w"] = out["scripts_per_s_2w"] / out["scripts_per_s_1w"]
    return out


class TreeCpu:
    """CPU-seconds of this process and everything it starts, from a cpuacct cgroup of its own.

    Entered before any executor exists, so that the run cgroups, the helpers, bwrap and the
    warm sandbox's zygote all land below it. ``usage()`` is None where cgroups are not writable.
    """

    def __init__(self) -> None:
        runs = cgroups.parent_dirs().get("cpuacct")  # <this process's group>/wmrl, when writable
        self.parent = runs.parent if runs is not None else None
        self.group = self.parent / f"wmrl-bench-{os.getpid()}" if self.parent is not None else None

    def __enter__(self) -> TreeCpu:
        if self.group is not None:
            try:
                self.group.mkdir()
                (self.group / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                self.group = None
        return self

    def usage(self) -> float | None:
        return int((self.group / "cpuacct.usage").read_text()) / 1e9 if self.group else None

    def __exit__(self, *exc) -> None:
        if self.group is not None:
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
            for group in sorted((p for p in self.group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                cgroups.remove_dir(group)
            cgroups.remove_dir(self.group)


def mean_se(values: list[float]) -> dict[str, float]:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return {"mean": statistics.fmean(values), "se": se, "n": len(values)}


def ratio(cold: dict[str, float], warm: dict[str, float]) -> dict[str, float]:
    """cold/warm of two means, with the SE propagated from both (first order)."""
    value = cold["mean"] / warm["mean"]
    return {"mean": value, "se": value * math.hypot(cold["se"] / cold["mean"], warm["se"] / warm["mean"])}


def warm_scripts() -> tuple[dict[str, str], object, dict[str, object]]:
    """The trivial, imports-only and median corpus scripts, their task, and which corpus row."""
    from bench.corpus_rows import CORPUS, capped_script
    from wmrl_envs.world_models.build.corpus import corpus_items, read_corpus

    frame = read_corpus(CORPUS)
    ok = frame[(frame.status == "ok") & (frame.mutation == "none")]
    median = ok.iloc[(ok.cpu_s - frame[frame.status == "ok"].cpu_s.median()).abs().argsort().iloc[0]]
    item = next(i for i in corpus_items(frame) if (i.task_id, i.choices, i.seed, i.mutation)
                == (median.task_id, median.choices, median.seed, median.mutation))
    script, task = capped_script(item)
    header = script.split("\nSEED = ", 1)[0]  # the docstring and the imports, nothing else
    scripts = {"trivial": "pass\n", "imports_only": header + "\n", "median_corpus": script}
    row = {"task_id": item.task_id, "choices": item.choices, "seed": item.seed, "recorded_cpu_s": float(median.cpu_s)}
    return scripts, task, row


def warm_vs_cold(repeats: int, jobs: int, tree: TreeCpu) -> dict[str, object]:
    """Section 5: warm against cold, interleaved (see the module docstring)."""
    scripts, task, row = warm_scripts()
    executors = {"bwrap": make_executor("bwrap"), "warm": make_executor("warm")}
    start, before = time.perf_counter(), tree.usage()
    executors["warm"].start()
    zygote = {"start_wall_s": time.perf_counter() - start,
              "start_cpu_s": None if before is None else tree.usage() - before}
    samples = {(s, e, m): [] for s in scripts for e in executors for m in ("tree_cpu_s", "run_cpu_s", "wall_s")}
    for executor in executors.values():  # warm caches (page cache, the zygote's first fork)
        executor.run(scripts["imports_only"], task).cleanup()
    for _ in range(repeats):
        for script_name, script in scripts.items():
            for name, executor in executors.items():
                before, start = tree.usage(), time.perf_counter()
                result = executor.run(script, task)
                wall, after = time.perf_counter() - start, tree.usage()
                result.cleanup()
                if not result.ok:
                    raise RuntimeError(f"a {name} benchmark run failed: {result}")
                samples[script_name, name, "wall_s"].append(wall)
                samples[script_name, name, "run_cpu_s"].append(result.cpu_s)
                if before is not None:
                    samples[script_name, name, "tree_cpu_s"].append(after - before)
    per_run = {s: {e: {m: mean_se(samples[s, e, m]) for m in ("tree_cpu_s", "run_cpu_s", "wall_s")
                       if samples[s, e, m]} for e in executors} for s in scripts}
    for row_ in per_run.values():
        key = "tree_cpu_s" if "tree_cpu_s" in row_["warm"] else "run_cpu_s"
        row_["cpu_ratio"] = ratio(row_["bwrap"][key], row_["warm"][key]) | {"measure": key}
    pool = {}
    for name, executor in executors.items():
        rates, cpus = [], []
        with ExecutorPool(executor, workers=2) as workers:
            for _ in range(3):
                before, start = tree.usage(), time.perf_counter()
                results = workers.run_batch([(scripts["median_corpus"], task)] * jobs)
                elapsed = time.perf_counter() - start
                if not all(r.ok for r in results):
                    raise RuntimeError(f"a {name} pool run failed: {[r for r in results if not r.ok][:1]}")
                for r in results:
                    r.cleanup()
                rates.append(jobs / elapsed)
                if before is not None:
                    cpus.append((tree.usage() - before) / jobs)
        pool[name] = {"scripts_per_s": mean_se(rates), **({"tree_cpu_s_per_script": mean_se(cpus)} if cpus else {})}
    pool["speedup"] = ratio(pool["warm"]["scripts_per_s"], pool["bwrap"]["scripts_per_s"])
    executors["warm"].close()
    return {"median_corpus_row": row, "repeats": repeats, "pool_jobs": jobs, "zygote": zygote,
            "tree_cpu_measured": tree.usage() is not None, "per_run": per_run, "pool_2w": pool}


def machine() -> dict[str, object]:
    """Provenance, the bwrap version and the current load (other work on a shared box skews results)."""
    bwrap = subprocess.run(["bwrap", "--version"], check=False, capture_output=True, text=True).stdout.strip()
    return {**provenance(), "bwrap": bwrap, "loadavg_1m_at_start": os.getloadavg()[0]}


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def to_markdown(report: dict) -> str:
    lat, tp = report["latency"], report["throughput"]
    lines = [
        "### Sandbox overhead (bubblewrap vs bare subprocess)",
        "",
        (
            f"{report['machine']['cores']} cores, {report['machine']['ram_gib']} GiB RAM, "
            f"{report['machine']['bwrap']}, {report['machine']['date'][:10]}, commit `{report['machine']['commit'][:10]}`, "
            f"{report['config']['runs']} interleaved runs per side."
        ),
        "",
        "| script | bare median (ms) | bwrap median (ms) | added (ms) |",
        "|---|---:|---:|---:|",
    ]
    for name, row in lat.items():
        lines.append(f"| {name} | {row['bare_median_ms']:.1f} | {row['bwrap_median_ms']:.1f} | {row['added_ms']:.1f} |")
    lines += [
        "",
        (
            f"Pool throughput, {report['config']['pool_jobs']} CPU-bound scripts of about "
            f"{report['config']['loop_s']} s each: {tp['scripts_per_s_1w']:.3f} scripts/s with 1 worker, "
            f"{tp['scripts_per_s_2w']:.3f} with 2 workers ({tp['speedup_2w']:.2f}x). Other processes on the "
            f"machine kept {tp['other_load_cores_1w']:.1f} and {tp['other_load_cores_2w']:.1f} cores busy meanwhile."
        ),
        "",
    ]
    dl = report.get("docker_latency")
    if dl is not None:
        lines += [
            f"Through the Docker executor ({report['machine']['docker']}, one container per run), "
            "the same scripts:",
            "",
            "| script | bare median (ms) | docker median (ms) | added (ms) |",
            "|---|---:|---:|---:|",
        ]
        for name, row in dl.items():
            lines.append(
                f"| {name} | {row['bare_median_ms']:.1f} | {row['docker_median_ms']:.1f} | {row['added_ms']:.1f} |"
            )
        lines.append("")
    rt = report.get("ray_throughput")
    if rt is not None:
        lines += [
            (
                f"Through the Ray executor (`ray.init(num_cpus=1|2)`, each run a Ray task holding one CPU), "
                f"the same batch: {rt['scripts_per_s_1w']:.3f} scripts/s on 1 CPU "
                f"({rt['scripts_per_s_1w'] / tp['scripts_per_s_1w']:.2f}x the local pool), "
                f"{rt['scripts_per_s_2w']:.3f} on 2 CPUs ({rt['scripts_per_s_2w'] / tp['scripts_per_s_2w']:.2f}x the "
                f"local pool, {rt['speedup_2w']:.2f}x its 1-CPU rate). Start-up (ray.init and prewarm, not in the rates): "
                f"{rt['startup_s_1w']:.1f} s and {rt['startup_s_2w']:.1f} s. Other load: "
                f"{rt['other_load_cores_1w']:.1f} and {rt['other_load_cores_2w']:.1f} cores."
            ),
            "",
        ]
    wc = report.get("warm_vs_cold")
    if wc is not None:
        lines += warm_markdown(wc)
    targets = report["targets"]
    warm_target = "" if targets.get("warm_cpu_ratio_met") is None else (
        f", >= {TARGET_WARM_CPU_RATIO}x fewer CPU-s per median corpus run warm than cold "
        f"({verdict(targets['warm_cpu_ratio_met'])})")
    lines += [
        (
            f"Targets: added latency < {TARGET_ADDED_MS:.0f} ms ({verdict(targets['latency_met'])}), "
            f"2-worker speed-up >= {TARGET_SPEEDUP}x ({verdict(targets['speedup_met'])}){warm_target}."
        ),
        "",
    ]
    return "\n".join(lines)


def warm_markdown(wc: dict) -> list[str]:
    def fmt(cell: dict | None, digits: int = 3) -> str:
        return "n/a" if cell is None else f"{cell['mean']:.{digits}f} ± {cell['se']:.{digits}f}"

    zygote, row = wc["zygote"], wc["median_corpus_row"]
    start_cpu = "" if zygote["start_cpu_s"] is None else f", {zygote['start_cpu_s']:.2f} CPU-s"
    lines = [
        "#### Warm (`make_executor(\"warm\")`) against cold (`\"bwrap\"`)",
        "",
        (f"{wc['repeats']} interleaved runs of each script on each executor, mean ± SE. Tree CPU-s: everything this "
         "benchmark's process tree spent on the run (host side, sandbox set-up, the zygote's fork, the run), from a "
         "cpuacct cgroup of its own; run CPU-s: the run's own cgroup. The median corpus script is "
         f"{row['task_id']} {row['choices']} (seed {row['seed']}, {row['recorded_cpu_s']} CPU-s in the corpus). "
         f"The zygote's start, paid once per executor: {zygote['start_wall_s']:.2f} s wall{start_cpu}."),
        "",
        "| script | cold tree CPU-s | warm tree CPU-s | cold / warm | cold run CPU-s | warm run CPU-s "
        "| cold wall s | warm wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in wc["per_run"].items():
        cold, warm = r["bwrap"], r["warm"]
        lines.append(f"| {name} | {fmt(cold.get('tree_cpu_s'))} | {fmt(warm.get('tree_cpu_s'))} | "
                     f"{fmt(r['cpu_ratio'], 2)}x | {fmt(cold['run_cpu_s'])} | {fmt(warm['run_cpu_s'])} | "
                     f"{fmt(cold['wall_s'], 2)} | {fmt(warm['wall_s'], 2)} |")
    pool = wc["pool_2w"]
    per_script = {name: pool[name].get("tree_cpu_s_per_script") for name in ("bwrap", "warm")}
    lines += [
        "",
        (f"Pool throughput, 2 workers, batches of {wc['pool_jobs']} median corpus scripts (3 batches each): cold "
         f"{fmt(pool['bwrap']['scripts_per_s'])} scripts/s, warm {fmt(pool['warm']['scripts_per_s'])} scripts/s "
         f"({fmt(pool['speedup'], 2)}x); tree CPU-s per script: cold {fmt(per_script['bwrap'])}, warm "
         f"{fmt(per_script['warm'])}."),
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per side and script for latency")
    parser.add_argument("--pool-jobs", type=int, default=6, help="CPU-bound scripts per throughput batch")
    parser.add_argument("--loop-s", type=float, default=1.5, help="approximate seconds per CPU-bound script")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the .json and .md")
    parser.add_argument("--skip-ray", action="store_true", help="leave out the Ray executor's throughput")
    parser.add_argument("--skip-docker", action="store_true", help="leave out the Docker executor's latency")
    parser.add_argument("--docker-host", default=None, help="Docker engine to use (default: a private dockerd)")
    parser.add_argument("--name", default="sandbox_overhead", help="stem of the results files")
    parser.add_argument("--skip-warm", action="store_true", help="leave out warm against cold")
    parser.add_argument("--warm-repeats", type=int, default=5, help="runs per executor and script, warm against cold")
    args = parser.parse_args()

    machine_info = machine()  # before the runs: it records the load they start under
    runtime = load_runtime()
    with tempfile.TemporaryDirectory() as root, contextlib.ExitStack() as stack:
        tree = stack.enter_context(TreeCpu())  # before any executor: their processes land in it
        executor = make_executor("bwrap")
        public = Path(root, "public")
        public.mkdir()
        task = SimpleNamespace(public_dir=public, limits=Limits(wall_s=120))
        lat = latency(executor, task, runtime.python, args.runs)
        n = calibrate_loop(runtime.python, args.loop_s)
        tp = throughput(executor, task, n, args.pool_jobs)
        rt = None if args.skip_ray else ray_throughput(task, n, args.pool_jobs)
        dl = None
        if not args.skip_docker:
            host = args.docker_host or stack.enter_context(PrivateDockerd()).host
            docker = make_executor("docker", host=host)
            machine_info["docker"] = "Docker " + subprocess.run(
                ["docker", "--host", host, "version", "--format", "{{.Server.Version}}"],
                check=True, capture_output=True, text=True).stdout.strip()
            dl = latency(docker, task, runtime.python, args.runs)
        wc = None if args.skip_warm else warm_vs_cold(args.warm_repeats, args.pool_jobs, tree)
        enforced = executor.run("pass", task).enforced

    machine_info["loadavg_1m_at_end"] = os.getloadavg()[0]
    report = {
        "benchmark": "sandbox_overhead",
        "machine": machine_info,
        "config": {
            "runs": args.runs,
            "pool_jobs": args.pool_jobs,
            "loop_s": args.loop_s,
            "loop_n": n,
            "executor": executor.name,
            "docker_engine": None if args.skip_docker else (args.docker_host or "private dockerd"),
            "enforced": enforced,
        },
        "latency": lat,
        "throughput": tp,
        "ray_throughput": rt,
        "docker_latency": dl,
        "warm_vs_cold": wc,
        "targets": {
            "latency_met": all(row["added_ms"] < TARGET_ADDED_MS for row in lat.values()),
            "speedup_met": tp["speedup_2w"] >= TARGET_SPEEDUP,
            "warm_cpu_ratio_met": None if wc is None else wc["per_run"]["median_corpus"]["cpu_ratio"]["mean"]
            >= TARGET_WARM_CPU_RATIO,
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = to_markdown(report)
    (args.out / f"{args.name}.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
