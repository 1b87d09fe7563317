"""Throughput of LIBERO-Long episodes on simulation workers, and what the paper-scale protocol would cost.

In one run, the same batch of training episodes (a MiniVLA policy sampling, ``--episodes`` in
groups of ``--group-size`` on ``--tasks``, every episode to success or ``--max-steps``) is run

* in this process (the ``inline`` pool: one worker, no pickling; what ``--sim-workers 1`` costs),
* on ``--workers`` local worker processes (1 and 2 by default),
* on ``--ray-workers`` Ray actors of a local Ray cluster (``ray.init(num_cpus=...)``; set
  ``RAY_ADDRESS`` to measure a running cluster instead),

and for each the episodes per wall-second of the timed batch are recorded, after a warm-up batch
of one episode per worker in which each worker starts and builds its simulator (start-up is
reported apart). Every configuration must give the same episodes (each episode's action bins
and success, hashed): the run records whether they do.

The projection reads the measured rates: one worker's rate ``r_1`` (episodes/s), the scaling
efficiency ``e = r_W / (W r_1)`` of the largest local pool, and the CPU-seconds ``c`` the workers
spent per episode. An update of ``E`` episodes on ``W_c`` cluster workers then takes about
``E / (W_c r_1 e)`` wall-seconds of simulation and ``E c`` CPU-seconds; ``U`` updates take ``U``
times that (plus the policy update, under 1% of a LIBERO run's CPU in the ledger). Episodes here
run to their end (real, anchor and shaped episodes do; truncated world-model ones stop at 260
steps), so for a policy that rarely succeeds this is the upper end. Results:
``bench/results/libero_throughput.{json,md}``::

    python -m bench.libero_throughput --episodes 32 --workers 1 2 --ray-workers 2
    python -m bench.libero_throughput --episodes 4 --max-steps 20 --result libero_throughput_smoke  # a smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path

import numpy as np

from bench.common import setup_threads, write_result

#: The paper-scale protocol projected by default: 128 episodes an update (16 groups of 8), 2000 updates.
PAPER_EPISODES, PAPER_UPDATES = 128, 2000


def episode_jobs(episodes: int, group_size: int, tasks: list[int], seed: int, prefix: str) -> list:
    """The batch: groups of ``group_size`` sampled episodes, each group one task from one training
    init state, every episode run to its end (stream ``real``)."""
    from agents.vla.remote import SampledEpisode, episode_seed
    from wmrl_envs.libero.tasks import TRAIN_INIT_STATES

    rng = np.random.default_rng(seed)
    jobs = []
    for g in range(-(-episodes // group_size)):
        group = f"{prefix}-{g}"
        task, init = tasks[g % len(tasks)], int(rng.choice(TRAIN_INIT_STATES))
        jobs += [SampledEpisode(task, init, group, m, "real", episode_seed(seed, group, m)) for m in range(group_size)]
    return jobs[:episodes]


def fingerprint(results) -> list[str]:
    """Per episode: a hash of its action bins and its success (an infrastructure failure: ``lost``)."""
    out = []
    for r in results:
        if r.infra_failure:
            out.append("lost")
            continue
        rollout = r.output
        digest = hashlib.blake2b(rollout.tokens["bins"].numpy().tobytes(), digest_size=8).hexdigest()
        out.append(f"{digest}/{rollout.response['real_score']}")
    return out


def measure(backend: str, workers: int, payload, warm_jobs: list, jobs: list, env_options: dict) -> dict:
    """Start a pool, warm it up, time the batch; the pool's start-up, warm-up and timed figures."""
    from wmrl_envs.libero.workers import SimulationPool

    start = time.perf_counter()
    with SimulationPool(workers, backend, env_options) as pool:
        started = time.perf_counter()
        pool.ship(payload)
        pool.run(warm_jobs[:workers])  # every worker takes one: each builds its simulator
        warmed = time.perf_counter()
        results = pool.run(jobs)
        wall = time.perf_counter() - warmed
    done = [r for r in results if not r.infra_failure]
    costs = [r.output.response["cost"] for r in done]
    sim_steps = sum(int(c["simulation_steps"]) for c in costs)
    cpu = sum(r.cpu_s for r in done)
    return {"backend": backend, "workers": workers, "episodes": len(jobs), "infra_failures": len(jobs) - len(done),
            "startup_s": started - start, "warmup_s": warmed - started, "wall_s": wall,
            "episodes_per_s": len(done) / wall, "simulation_steps": sim_steps, "simulation_steps_per_s": sim_steps / wall,
            "mean_episode_steps": sim_steps / max(len(done), 1), "worker_cpu_s": cpu,
            "simulation_cpu_s": sum(float(c["simulation_cpu_s"]) for c in costs),
            "cpu_s_per_episode": cpu / max(len(done), 1), "episodes_fingerprint": fingerprint(results)}


def projection(rows: list[dict], episodes: int, cluster_workers: int, updates: int) -> dict:
    """The paper-scale cost from the measured local rates (the formula of the module docstring)."""
    local = {r["workers"]: r for r in rows if r["backend"] == "local"}
    if 1 not in local:
        raise SystemExit("the projection needs the 1-worker local rate: keep 1 in --workers")
    r1 = local[1]["episodes_per_s"]
    biggest = max(local)
    efficiency = local[biggest]["episodes_per_s"] / (biggest * r1)
    cpu_per_episode = np.mean([r["cpu_s_per_episode"] for r in rows])
    update_s = episodes / (cluster_workers * r1 * efficiency)
    return {"episodes_per_update": episodes, "cluster_workers": cluster_workers, "updates": updates,
            "one_worker_episodes_per_s": r1, "scaling_efficiency": efficiency, "efficiency_from_workers": biggest,
            "cpu_s_per_episode": float(cpu_per_episode), "update_wall_s": update_s,
            "update_cpu_s": float(episodes * cpu_per_episode), "total_wall_h": updates * update_s / 3600,
            "total_cpu_h": float(updates * episodes * cpu_per_episode / 3600)}


def report(rows: list[dict], identical: bool, projected: dict, args: argparse.Namespace) -> str:
    lines = ["# LIBERO-Long episodes on simulation workers: throughput", "",
             (f"{rows[0]['episodes']} sampled MiniVLA episodes (groups of {args.group_size}, tasks "
              f"{' '.join(map(str, args.tasks))}, up to {args.max_steps} steps after 10 wait steps), timed after a "
              "warm-up of one episode per worker (start-up: the pool's constructor, which waits for Ray's actors; "
              "local processes import and build their simulators in the warm-up). Load average at the start: "
              f"{' / '.join(f'{v:.2f}' for v in args.load)}."), "",
             "| workers | episodes/s | sim steps/s | mean steps | worker CPU-s / episode | start-up s | warm-up s | "
             "lost |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        name = "this process" if r["backend"] == "inline" else f"{r['workers']} {r['backend']}"
        lines.append(f"| {name} | {r['episodes_per_s']:.3f} | {r['simulation_steps_per_s']:.1f} | "
                     f"{r['mean_episode_steps']:.0f} | {r['cpu_s_per_episode']:.2f} | {r['startup_s']:.1f} | "
                     f"{r['warmup_s']:.1f} | {r['infra_failures']} |")
    p = projected
    lines += ["", ("Every configuration gave the same episodes (action bins and successes)." if identical else
                   "**The configurations gave different episodes**: see `episodes_fingerprint` in the json."), "",
              (f"Projected paper-scale cost ({p['episodes_per_update']} episodes an update, {p['updates']} updates, "
               f"{p['cluster_workers']} cluster workers): one worker runs r_1 = {p['one_worker_episodes_per_s']:.3f} "
               f"episodes/s, {p['efficiency_from_workers']} workers keep e = {p['scaling_efficiency']:.2f} of "
               f"linear scaling, and an episode costs c = {p['cpu_s_per_episode']:.1f} worker CPU-s. An update "
               f"takes E / (W r_1 e) = {p['update_wall_s']:.0f} s of simulation and E c = {p['update_cpu_s']:.0f} "
               f"CPU-s; the run {p['total_wall_h']:.1f} h and {p['total_cpu_h']:.0f} CPU-hours.")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=32, help="episodes of the timed batch")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--tasks", type=int, nargs="+", default=[2], help="tasks of the groups (one: no rebuilds)")
    parser.add_argument("--max-steps", type=int, default=520, help="steps of an episode (the protocol's 520)")
    parser.add_argument("--policy", type=Path, default=None,
                        help="a MiniVLA policy.pt (default: a fresh one, seed 0, which rarely succeeds)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="local pool sizes measured")
    parser.add_argument("--ray-workers", type=int, default=2, help="Ray actors measured (0: no Ray)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--project-episodes", type=int, default=PAPER_EPISODES, help="episodes an update, projected")
    parser.add_argument("--project-workers", type=int, default=64, help="cluster workers, projected")
    parser.add_argument("--project-updates", type=int, default=PAPER_UPDATES, help="updates, projected")
    parser.add_argument("--result", default="libero_throughput", help="name of the bench/results files written")
    args = parser.parse_args()
    if args.episodes < 1 or args.group_size < 1 or args.max_steps < 1:
        raise SystemExit("--episodes, --group-size and --max-steps must be at least 1")
    setup_threads()
    import torch

    from agents.vla.policy import MiniVLAPolicy
    from agents.vla.remote import VLAWeights

    torch.manual_seed(args.seed)
    policy = MiniVLAPolicy.load(args.policy) if args.policy else MiniVLAPolicy()
    payload = VLAWeights.of(policy)
    env_options = {"max_steps": args.max_steps, "wm_horizon": min(260, args.max_steps), "task_ids": args.tasks}
    jobs = episode_jobs(args.episodes, args.group_size, args.tasks, args.seed, "timed")
    warm = episode_jobs(max([*args.workers, args.ray_workers]), 1, args.tasks, args.seed + 1, "warm-up")
    args.load = os.getloadavg()

    rows = [measure("inline", 1, payload, warm, jobs, env_options)]
    rows += [measure("local", n, payload, warm, jobs, env_options) for n in args.workers]
    if args.ray_workers:
        import ray

        own = not ray.is_initialized() and not os.environ.get("RAY_ADDRESS")
        if own:
            ray.init(num_cpus=args.ray_workers, include_dashboard=False, log_to_driver=False)
        elif not ray.is_initialized():
            ray.init()  # joins the cluster RAY_ADDRESS names
        try:
            rows.append(measure("ray", args.ray_workers, payload, warm, jobs, env_options))
        finally:
            ray.shutdown()
    identical = len({tuple(r["episodes_fingerprint"]) for r in rows}) == 1
    projected = projection(rows, args.project_episodes, args.project_workers, args.project_updates)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "load"}
    md = write_result(args.result, __spec__.name, {"config": config, "load_average": list(args.load), "rows": rows,
                                    "identical_episodes": identical, "projection": projected},
                      report(rows, identical, projected, args))
    print(md.read_text())


if __name__ == "__main__":
    main()
