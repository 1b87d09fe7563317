"""Build the LIBERO-Long success reward model from simulator data generated here.

Stages (each cached, so a rerun continues where it stopped):

1. ``collect``: scripted-controller episodes at three noise levels and goal teleports with
   near-misses. Init states 0-39 are for training, 40-49 are held out for evaluation.
2. ``train``: cut every training episode into prefixes (the states a world-model episode
   shows the model at its horizon) labelled with the whole episode's success; fit a small
   MLP on instruction embedding + trajectory features; write
   ``assets/libero/success_model.npz`` and ``assets/libero/instruction_embeddings.npz``.

Extra episodes (for example rollouts of a BC policy, whose failures look different from
the scripted controller's) join the training set with ``--extra file.npz``; only their
init states 0-39 are used.

    python scripts/build_libero_reward_model.py [--stage all|collect|train] [--data-dir DIR]
        [--extra runs/libero/bc_rollouts.npz]

About 2 hours of simulation on 2 shared cores (700 episodes and 1000 teleports);
training takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wmrl_envs.libero.tasks import HELDOUT_INIT_STATES, TRAIN_INIT_STATES

TRAIN_INITS = tuple(TRAIN_INIT_STATES)
HELDOUT_INITS = tuple(HELDOUT_INIT_STATES)
#: Prefix lengths the model learns to read (the env's default wm_horizon is 260).
HORIZONS = (40, 100, 160, 220, 260, 300, 380, 460, 520)
#: (chunk name, noise level, init states): what ``collect`` simulates.
PLAN = (
    ("train-clean", "clean", TRAIN_INITS[10:]),
    ("train-noisy", "noisy", TRAIN_INITS[0::4]),
    ("train-sloppy", "sloppy", TRAIN_INITS[2::4]),
    ("heldout-noisy", "noisy", HELDOUT_INITS),
    ("heldout-sloppy", "sloppy", HELDOUT_INITS),
)


@dataclass(frozen=True)
class TrainConfig:
    hidden: tuple[int, ...] = (128, 64)
    epochs: int = 60
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 256
    seed: int = 0


def default_data_dir() -> Path:
    from wmrl_envs.paths import wmrl_home

    return wmrl_home() / "libero"


def collect(data_dir: Path) -> None:
    from wmrl_envs.libero.dataset import goal_examples, scripted_rollouts
    from wmrl_envs.libero.env import LiberoLongEnv
    from wmrl_envs.libero.trajectory import save_trajectories

    data_dir.mkdir(parents=True, exist_ok=True)
    env = LiberoLongEnv()
    try:
        for name, level, inits in PLAN:
            path = data_dir / f"{name}.npz"
            if not path.exists():
                save_trajectories(path, scripted_rollouts(env, range(10), inits, level, seed=len(name)))
            print(f"{path}: done", flush=True)
        for name, inits in (("train-goals", TRAIN_INITS), ("heldout-goals", HELDOUT_INITS)):
            path = data_dir / f"{name}.npz"
            if not path.exists():
                save_trajectories(path, goal_examples(env, range(10), inits, np.random.default_rng(len(name))))
            print(f"{path}: done", flush=True)
    finally:
        env.close()


def load_split(data_dir: Path, split: str, extra: list[Path]) -> list:
    """Every saved episode of ``split`` ("train" or "heldout"), extra files filtered by init state."""
    from wmrl_envs.libero.trajectory import load_trajectories

    inits = TRAIN_INITS if split == "train" else HELDOUT_INITS
    out = [t for p in sorted(data_dir.glob(f"{split}-*.npz")) for t in load_trajectories(p)]
    out += [t for p in extra for t in load_trajectories(p) if t.init_state in inits]
    if split == "train":  # the scripted benchmark's clean episodes (init states 0-9), if saved
        bench = data_dir / "scripted_eval.npz"
        out += [t for t in load_trajectories(bench) if t.init_state in inits] if bench.exists() else []
    return out


def train(data_dir: Path, extra: list[Path], config: TrainConfig, out: Path) -> dict[str, float]:
    import torch
    from sklearn.metrics import roc_auc_score

    from wmrl_envs.libero.dataset import prefix_examples
    from wmrl_envs.libero.embeddings import save_embeddings
    from wmrl_envs.libero.reward_model import SuccessRewardModel
    from wmrl_envs.libero.tasks import INSTRUCTIONS

    save_embeddings(INSTRUCTIONS)
    episodes = load_split(data_dir, "train", extra)
    # Validation: the episodes of init states 35-39, cut the same way.
    fit = [t for t in episodes if t.init_state < 35]
    val = [t for t in episodes if t.init_state >= 35]
    features = SuccessRewardModel([], np.zeros(1), np.ones(1))  # only its input builder is used
    prefixes, y_fit = prefix_examples(fit, HORIZONS)
    x_fit = features.inputs(prefixes)
    prefixes, y_val = prefix_examples(val, HORIZONS)
    x_val = features.inputs(prefixes)
    mean, std = x_fit.mean(0), x_fit.std(0) + 1e-3

    torch.manual_seed(config.seed)
    layers, width = [], x_fit.shape[1]
    for h in config.hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    xf = torch.as_tensor((x_fit - mean) / std)
    yf = torch.as_tensor(y_fit, dtype=torch.float32)
    # Balance the classes: successes are the minority in the noisy chunks.
    pos_weight = torch.tensor((1 - y_fit.mean()) / max(y_fit.mean(), 1e-3), dtype=torch.float32)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    generator = torch.Generator().manual_seed(config.seed)
    best = (-1.0, None)
    for _epoch in range(config.epochs):
        net.train()
        for idx in torch.randperm(len(xf), generator=generator).split(config.batch_size):
            optimizer.zero_grad()
            loss_fn(net(xf[idx]).squeeze(-1), yf[idx]).backward()
            optimizer.step()
        model = _export(net, mean, std)
        auroc = roc_auc_score(y_val, model.predict_inputs(x_val)) if len(set(y_val)) > 1 else float("nan")
        if auroc > best[0]:
            best = (auroc, model)
    model = best[1]
    model.meta = {"train_episodes": str(len(fit)), "val_episodes": str(len(val)),
                  "train_examples": str(len(y_fit)), "val_auroc": f"{best[0]:.4f}",
                  "horizons": ",".join(map(str, HORIZONS)), "config": str(config)}
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return {"val_auroc": best[0], "train_examples": float(len(y_fit)), "train_episodes": float(len(fit))}


def _export(net, mean: np.ndarray, std: np.ndarray):
    from wmrl_envs.libero.reward_model import SuccessRewardModel

    weights = []
    for layer in net:
        if hasattr(layer, "weight"):
            weights += [layer.weight.detach().numpy().T.copy(), layer.bias.detach().numpy().copy()]
    return SuccessRewardModel(weights, mean.astype(np.float32), std.astype(np.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("all", "collect", "train"), default="all")
    parser.add_argument("--data-dir", type=Path, default=None, help="episode cache (default ~/.cache/wmrl/libero)")
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="more training episodes (.npz)")
    parser.add_argument("--out", type=Path, default=None, help="artefact path (default assets/libero/success_model.npz)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from wmrl_envs.libero.reward_model import default_model_path

    data_dir = args.data_dir or default_data_dir()
    if args.stage in ("all", "collect"):
        collect(data_dir)
    if args.stage in ("all", "train"):
        print(train(data_dir, args.extra, TrainConfig(), args.out or default_model_path()))


if __name__ == "__main__":
    main()
