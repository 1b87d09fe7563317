"""How well the LIBERO-Long success reward model predicts success, and what it costs.

Held-out data: episodes from init states 40-49, never seen in training (scripted controller
at two noise levels, goal teleports and near-misses, and, when present, greedy MiniVLA
episodes from ``bench/libero_vla.py eval``).

* **Prediction AUROC**: the model reads only the first ``wm_horizon`` steps of an episode
  (all of it if it ended sooner), exactly what a world-model episode of the env shows it,
  and is scored against the episode's final success. Reported per data source and per horizon.
* **Goal AUROC**: teleported goal states against near-misses a few centimetres away.
* **Cost**: reward-model seconds per prediction against the simulator seconds it saves, the
  steps from ``wm_horizon`` to the episode's end, timed here on a few fresh episodes.

    python -m bench.libero_reward_model [--wm-horizon 260] [--timing-episodes 4]

Writes ``bench/results/libero_reward_model.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bench.common import auroc, setup_threads, write_result

HORIZONS = (60, 120, 200, 260, 380, 520)


def score_at(model, episodes, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    prefixes = [e.prefix(horizon) if e.steps > horizon else e for e in episodes]
    return np.array([float(bool(e.success)) for e in episodes]), model.predict(prefixes)


def heldout_episodes(data_dir: Path, runs: Path) -> dict[str, list]:
    from wmrl_envs.libero.trajectory import load_trajectories

    groups: dict[str, list] = {}
    for path in sorted(data_dir.glob("heldout-*.npz")) + sorted(runs.glob("*/eval-40-*.npz")):
        for t in load_trajectories(path):
            if t.init_state >= 40:
                source = "minivla" if not t.source.startswith(("scripted", "teleport", "near-miss")) else t.source
                groups.setdefault("goal" if source in ("teleport", "near-miss") else source, []).append(t)
    return groups


def time_simulator(episodes: int) -> float:
    """Seconds per simulator step, from full noisy scripted episodes run now (held-out inits)."""
    from wmrl_envs.libero.dataset import NOISE_LEVELS
    from wmrl_envs.libero.evaluate import evaluate_libero
    from wmrl_envs.libero.scripted import ScriptedPolicy

    tasks = list(range(0, 10, max(1, 10 // episodes)))[:episodes]
    report = evaluate_libero(ScriptedPolicy(NOISE_LEVELS["noisy"], seed=123), trials=1, tasks=tasks,
                             init_states=[45], name="timing", progress=False)
    return report.simulation_s / report.simulation_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wm-horizon", type=int, default=260)
    parser.add_argument("--timing-episodes", type=int, default=4)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None)
    args = parser.parse_args()
    setup_threads()
    from wmrl_envs.libero.reward_model import load_reward_model
    from wmrl_envs.paths import wmrl_home

    model = load_reward_model(args.model)
    groups = heldout_episodes(args.data_dir or wmrl_home() / "libero", Path("runs/libero"))
    rollouts = [e for name, eps in groups.items() if name != "goal" for e in eps]
    if not rollouts:
        raise SystemExit("no held-out episodes: run scripts/build_libero_reward_model.py --stage collect first")

    by_source = {}
    for name, eps in sorted(groups.items()):
        labels, scores = score_at(model, eps, args.wm_horizon if name != "goal" else 10**6)
        by_source[name] = {"episodes": len(eps), "success_share": float(labels.mean()), "auroc": auroc(labels, scores)}
    labels, scores = score_at(model, rollouts, args.wm_horizon)
    overall = {"episodes": len(rollouts), "success_share": float(labels.mean()), "auroc": auroc(labels, scores),
               "brier": float(np.mean((scores - labels) ** 2))}
    by_horizon = {h: auroc(*score_at(model, rollouts, h)) for h in HORIZONS}

    start = time.perf_counter()
    repeats = 3
    for _ in range(repeats):
        score_at(model, rollouts, args.wm_horizon)
    model_s = (time.perf_counter() - start) / (repeats * len(rollouts))
    step_s = time_simulator(args.timing_episodes)
    remaining = np.array([max(0, e.steps - args.wm_horizon) for e in rollouts])
    saved_s = float(remaining.mean()) * step_s
    cost = {"model_s_per_prediction": model_s, "simulator_s_per_step": step_s,
            "mean_steps_after_horizon": float(remaining.mean()),
            "simulator_s_saved_per_episode": saved_s, "saving_over_model_cost": saved_s / model_s,
            "share_of_episode_steps_saved": float(remaining.sum() / sum(e.steps for e in rollouts))}

    rows = [f"| {name} | {v['episodes']} | {v['success_share']:.2f} | {v['auroc']:.3f} |" for name, v in by_source.items()]
    md = "\n".join([
        f"### LIBERO-Long success reward model (`{model.name}`), held-out init states 40-49", "",
        f"Prediction from the first {args.wm_horizon} steps (goal row: the final state) against final success:", "",
        "| data | episodes | success share | AUROC |", "|---|---:|---:|---:|", *rows,
        f"| **all rollouts** | {overall['episodes']} | {overall['success_share']:.2f} | **{overall['auroc']:.3f}** |",
        "", "AUROC by horizon (all rollouts): " + ", ".join(f"{h}: {a:.3f}" for h, a in by_horizon.items()), "",
        f"Cost: {1000 * model_s:.2f} ms per prediction vs {1000 * step_s:.1f} ms per simulator step; stopping at "
        f"step {args.wm_horizon} skips {remaining.mean():.0f} steps ({cost['share_of_episode_steps_saved']:.0%} of "
        f"all steps) = {saved_s:.2f} s of simulation per episode, {cost['saving_over_model_cost']:.0f}x the model's cost.",
    ])
    payload = {"config": {k: str(v) for k, v in vars(args).items()}, "model": model.name, "model_meta": model.meta,
               "by_source": by_source, "overall": overall, "auroc_by_horizon": by_horizon, "cost": cost}
    print(write_result("libero_reward_model", __spec__.name, payload, md).read_text())


if __name__ == "__main__":
    main()
