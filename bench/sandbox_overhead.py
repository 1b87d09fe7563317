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

Writes ``bench/results/<name>.json`` and ``.md`` (``--name``, default ``sandbox_overhead``).
Targets: under 60 ms added per run, at least 1.7x throughput with 2 workers on 2 cores.

    python bench/sandbox_overhead.py [--runs 20] [--pool-jobs 6] [--loop-s 1.5] [--skip-ray] [--skip-docker]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from wmrl_envs.sandbox import ExecutorPool, Limits, make_executor
from wmrl_envs.sandbox.dockerd import PrivateDockerd
from wmrl_envs.sandbox.launcher import agent_env
from wmrl_envs.sandbox.runtime import load_runtime

RESULTS = Path(__file__).resolve().parent / "results"
SCRIPTS = {
    "trivial": "pass\n",
    "numpy": "import numpy as np\nprint(float(np.linalg.norm(np.arange(1000.0))))\n",
}
LOOP = "total = 0\nfor i in range({n}):\n    total += i * i\nprint(total)\n"
TARGET_ADDED_MS = 60.0
TARGET_SPEEDUP = 1.7


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


def machine() -> dict[str, object]:
    """Cores, RAM, versions and the current load (other work on a shared box skews results)."""
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(pages / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "bwrap": subprocess.run(["bwrap", "--version"], check=False, capture_output=True, text=True).stdout.strip(),
        "loadavg_1m_at_start": os.getloadavg()[0],
    }


def git_commit() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], check=False, capture_output=True, text=True, cwd=RESULTS.parent)
    return proc.stdout.strip() or None


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def to_markdown(report: dict) -> str:
    lat, tp = report["latency"], report["throughput"]
    lines = [
        "### Sandbox overhead (bubblewrap vs bare subprocess)",
        "",
        (
            f"{report['machine']['cores']} cores, {report['machine']['ram_gib']} GiB RAM, "
            f"{report['machine']['bwrap']}, {report['date'][:10]}, commit `{(report['git_commit'] or '?')[:10]}`, "
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
    lines += [
        (
            f"Targets: added latency < {TARGET_ADDED_MS:.0f} ms ({verdict(report['targets']['latency_met'])}), "
            f"2-worker speed-up >= {TARGET_SPEEDUP}x ({verdict(report['targets']['speedup_met'])})."
        ),
        "",
    ]
    return "\n".join(lines)


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
    args = parser.parse_args()

    machine_info = machine()  # before the runs: it records the load they start under
    runtime = load_runtime()
    executor = make_executor("bwrap")
    with tempfile.TemporaryDirectory() as root, contextlib.ExitStack() as stack:
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
        enforced = executor.run("pass", task).enforced

    machine_info["loadavg_1m_at_end"] = os.getloadavg()[0]
    report = {
        "benchmark": "sandbox_overhead",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
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
        "targets": {
            "latency_met": all(row["added_ms"] < TARGET_ADDED_MS for row in lat.values()),
            "speedup_met": tp["speedup_2w"] >= TARGET_SPEEDUP,
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = to_markdown(report)
    (args.out / f"{args.name}.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
