"""MiniVLA on LIBERO-Long: behaviour cloning, then WMRL versus real-reward GRPO, over seeds.

Seed ``s`` is one paired replicate: BC with seed ``s`` (``bc-s<s>``), then WMRL and real GRPO
fine-tunes of that BC policy with seed ``s`` (``wmrl-s<s>``, ``real-s<s>``), all evaluated on
the same held-out init states. Every stage writes under ``--runs`` and is skipped when its
output exists, so the whole protocol resumes after an interruption.

* ``bc``: behaviour-clone MiniVLA from the scripted controller's successes on training init
  states 0-39 of the chosen tasks (episodes from ``bench/libero_scripted.py --save``).
* ``probe``: sampled (not greedy) success of a policy on training init states at a given
  temperature, and the share of GRPO groups that would carry no signal (all members alike).
* ``finetune --mode wmrl|real``: the shared :class:`~trainers.wmrl.WMRLTrainer` with
  :class:`~trainers.families.libero.LiberoAdapter`, the same number of updates in both modes;
  a policy snapshot and the ledger are kept every ``--curve-every`` steps for learning curves;
  ``--train 'bias|norm'`` trains only the parameters whose names match.
* ``--sim-workers N [--executor ray]`` (``finetune``, ``eval``, ``all``): run the episodes on N
  simulation workers (local processes, or Ray actors on the cluster ``RAY_ADDRESS`` names, else
  a local one); ``finetune --wm-reward shaped`` rewards world-model groups by potential-based
  shaping instead of truncating them (``wmrl_envs/scoring/shaping.py``).
* ``eval --policy NAME [--step K] [--fresh N]``: greedy success on held-out init states 40-49 of
  the tasks, or with ``--fresh N`` on N sampled placements per task (init states 1000..), scenes
  in no LIBERO file, for more held-out episodes than the 10 official states allow.
* ``drift --policy NAME [--step K] [--start OTHER]``: how far a fine-tune moved its BC start's
  greedy actions, on demonstration states: the share of action tokens and of steps whose greedy
  bin changed, and KL(BC || fine-tune). ``--start bc-s3`` compares with another run instead, so
  two BC seeds give the scale.
* ``report``: ``bench/results/libero_vla.json`` (one row per policy and seed) and ``.md``:
  mean ± SE over seeds, the paired gain over BC, learning curves of held-out success against
  training simulator CPU-seconds, and the simulator compute each ``wmrl-<variant>`` needs to
  reach the final success of ``real-<variant>`` (the same settings), where real GRPO's final
  paired gain over BC exceeds its SE; ``eval --protocol`` and ``eval --fresh`` results are
  reported too, both held-out sets pooled where a policy has both, the per-update success of
  the executed training episodes (what RL optimises, sampled, on training states), and how
  the success model scored the anchor groups of each WMRL run.
  ``report --seeds 6 7 8`` prints the view of some seeds and writes nothing.

    python -m bench.libero_vla all --seeds 0 1 2          # every stage below, resumable
    python -m bench.libero_vla bc --seed 0
    python -m bench.libero_vla probe --policy bc-s0 --temperature 1.0
    python -m bench.libero_vla finetune --mode wmrl --seed 0
    python -m bench.libero_vla eval --policy wmrl-s0 --step 4
    python -m bench.libero_vla drift --policy wmrl-s0
    python -m bench.libero_vla report

The full protocol (10 tasks x 50 init states) for one policy:
``python -m bench.libero_vla eval --policy wmrl-s0 --protocol``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.common import concordance, mean_se, save_figure, setup_threads, write_result
from bench.curves import crossing, draw_curve, mean_curve

if TYPE_CHECKING:
    import torch

#: Tasks trained and evaluated. Chosen because the BC policy succeeds on some of their
#: held-out init states and fails on others (bench/results/libero_vla.md, BC column), so
#: groups carry signal and a gain is visible; 5 tasks x 10 held-out states = 50 trials.
DEFAULT_TASKS = (0, 2, 3, 5, 7)
HELDOUT = tuple(range(40, 50))
#: File stem of evaluations on sampled placements (``eval --fresh``): scenes drawn from each
#: task's own placement regions that no LIBERO file, training run or earlier choice has seen.
FRESH_PREFIX = "eval-fresh"
METHODS = ("wmrl", "real")


def run_dir(args: argparse.Namespace, name: str) -> Path:
    return args.runs / name


#: A run folder's name: ``<policy>-s<seed>``.
RUN_NAME = re.compile(r"(.+)-s(\d+)")


# ------------------------------------------------------------------ stages
def stage_bc(args: argparse.Namespace) -> None:
    from agents.vla.bc import BCConfig, behaviour_clone
    from agents.vla.policy import VLAConfig
    from wmrl_envs.libero.trajectory import load_trajectories

    out = run_dir(args, f"bc-s{args.seed}") / "policy.pt"
    if out.exists():
        print(f"{out} exists")
        return
    # Every successful scripted episode of the training init states, clean or noisy: noisy
    # successes widen the states seen, and cross-entropy learns the mode of the noisy actions.
    demos = [t for p in args.demos for t in load_trajectories(p)
             if t.success and t.source.startswith("scripted") and t.init_state < 40 and t.task_index in args.tasks]
    if not demos:
        raise SystemExit(f"no scripted successes of tasks {args.tasks} in {args.demos}: run "
                         f"python -m bench.libero_scripted --trials 40 --tasks {' '.join(map(str, args.tasks))} --save FILE --name libero_scripted_train")
    config = BCConfig(epochs=args.epochs, seed=args.seed)
    policy, losses = behaviour_clone(demos, config, VLAConfig(hidden=args.hidden, blocks=args.blocks), progress=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    policy.save(out)
    (out.parent / "bc.json").write_text(json.dumps({
        "demos": len(demos), "steps": int(sum(d.steps for d in demos)), "tasks": list(args.tasks),
        "config": vars(config), "hidden": args.hidden, "blocks": args.blocks, "losses": losses}, indent=2))
    print(f"wrote {out} from {len(demos)} demonstrations")


def stage_probe(args: argparse.Namespace) -> None:
    """Sampled success per (task, init state): the signal GRPO groups of this policy carry."""
    from agents.vla.policy import MiniVLAPolicy, VLAEpisodePolicy
    from wmrl_envs.libero.evaluate import evaluate_libero

    out = run_dir(args, args.policy) / f"probe-t{args.temperature:g}-{args.inits[0]}-{len(args.inits)}x{args.samples}.json"
    if out.exists():
        print(out.read_text())
        return
    policy = MiniVLAPolicy.load(run_dir(args, args.policy) / "policy.pt")
    policy.config.temperature = args.temperature
    per_state: dict[str, list[bool]] = {}
    for sample in range(args.samples):
        report = evaluate_libero(VLAEpisodePolicy(policy, greedy=False, seed=1000 + sample), trials=len(args.inits),
                                 tasks=args.tasks, init_states=args.inits, name=f"probe {args.policy}")
        for task in report.tasks:
            for k, success in zip(args.inits, task.successes):
                per_state.setdefault(f"{task.task_index}:{k}", []).append(bool(success))
    rates = {key: float(np.mean(v)) for key, v in per_state.items()}
    by_task = {t: float(np.mean([r for key, r in rates.items() if key.startswith(f"{t}:")])) for t in args.tasks}
    # P(a group of g samples from one state is all-fail or all-success) under the state's rate.
    g = args.group_size
    silent = float(np.mean([p ** g + (1 - p) ** g for p in rates.values()]))
    payload = {"policy": args.policy, "temperature": args.temperature, "samples": args.samples,
               "init_states": list(args.inits), "success_by_task": by_task, "success_by_state": rates,
               "success": float(np.mean(list(rates.values()))), f"silent_group_share_g{g}": silent}
    out.write_text(json.dumps(payload, indent=2))
    print(json.dumps({k: v for k, v in payload.items() if k != "success_by_state"}, indent=2))


def stage_finetune(args: argparse.Namespace) -> None:
    from agents.vla.policy import MiniVLAPolicy
    from trainers.families.libero import LiberoAdapter
    from trainers.wmrl import WMRLTrainer
    from trainers.wmrl_config import WMRLConfig

    name = args.name or f"{args.mode}-s{args.seed}"
    run = run_dir(args, name)
    if (run / "policy.pt").exists():
        print(f"{run / 'policy.pt'} exists")
        return
    init = run_dir(args, args.init or f"bc-s{args.seed}") / "policy.pt"
    policy = MiniVLAPolicy.load(init)
    if args.images:  # the camera joins the state input; the BC behaviour is where RL starts
        policy = policy.with_images()
    if args.train:
        for param_name, param in policy.named_parameters():
            param.requires_grad_(re.search(args.train, param_name) is not None)
        if not any(param.requires_grad for param in policy.parameters()):
            raise SystemExit(f"--train {args.train!r} matches no parameter of the policy")
    policy.config.temperature = args.temperature
    config = WMRLConfig.from_flat(
        mode=args.mode, env_id="wmrl/LIBERO-Long-v0", policy="vla", policy_path=str(init),
        steps=args.steps, tasks_per_step=args.tasks_per_step, group_size=args.group_size,
        warmup_steps=min(2, args.steps - 1), anchor_fraction=args.anchor_fraction, learning_rate=args.learning_rate,
        kl_coef=args.kl_coef, update_epochs=args.update_epochs, advantage=args.advantage,
        calibration_min_pairs_global=8, seed=args.seed, sim_workers=args.sim_workers, executor=args.executor,
        wm_reward=args.wm_reward, output_dir=str(run), checkpoint_every=1, tensorboard=False)
    adapter = LiberoAdapter(task_ids=args.tasks, wm_horizon=args.wm_horizon, seed=args.seed,
                            obs_mode="both" if args.images else "state", sim_workers=args.sim_workers,
                            executor=args.executor, wm_reward=args.wm_reward)
    trainer = WMRLTrainer(config, policy, adapter)
    trainer.resume()
    run.mkdir(parents=True, exist_ok=True)
    (run / "finetune.json").write_text(json.dumps({**{k: v for k, v in vars(args).items() if k != "func"},
                                                   "runs": str(args.runs), "init": str(init)}, indent=2))
    try:
        while trainer.step < config.steps:
            metrics = trainer.train_step()
            trainer.save_checkpoint()
            print(f"{name} step {trainer.step}/{config.steps}: reward {metrics['reward/mean']:.3f}, "
                  f"sim {trainer.ledger.metrics().get('cost/simulation_cpu_s', 0.0):.0f} CPU-s", flush=True)
            if trainer.step % args.curve_every == 0 and trainer.step < config.steps:
                policy.save(run / f"policy-step{trainer.step}.pt")
                (run / f"ledger-step{trainer.step}.json").write_text(json.dumps(trainer.ledger.metrics(), indent=2))
    finally:
        adapter.close()
    policy.save(run / "policy.pt")
    (run / "ledger.json").write_text(json.dumps(trainer.ledger.metrics(), indent=2))


def stage_eval(args: argparse.Namespace) -> None:
    from agents.vla.policy import MiniVLAPolicy, VLAEpisodePolicy
    from trainers.families.libero_pool import evaluate_episodes, make_pool, pooled
    from wmrl_envs.libero.tasks import sampled_init_states

    if args.protocol and args.fresh:
        raise SystemExit("--protocol and --fresh are different evaluations: give one")
    folder = run_dir(args, args.policy)
    suffix = f"-step{args.step}" if args.step is not None else ""
    if args.protocol:
        tasks, inits, out = list(range(10)), list(range(50)), folder / f"eval-protocol{suffix}.json"
    elif args.fresh:
        tasks, inits = list(args.tasks), list(sampled_init_states(args.fresh))
        out = folder / f"{FRESH_PREFIX}{suffix}.json"
    else:
        tasks, inits, out = list(args.tasks), list(HELDOUT), folder / f"eval{suffix}.json"
    if out.exists():
        print(f"{out} exists")
        return
    policy = MiniVLAPolicy.load(folder / f"policy{suffix}.pt")
    obs_mode = "both" if policy.config.use_images else "state"
    pool = (make_pool(args.sim_workers, args.executor, {"obs_mode": obs_mode})
            if pooled(args.sim_workers, args.executor) else None)
    try:
        report = evaluate_episodes(VLAEpisodePolicy(policy, greedy=True), len(inits), tasks, inits,
                                   f"{args.policy}{suffix}", obs_mode=obs_mode, pool=pool)
    finally:
        if pool is not None:
            pool.close()
    out.write_text(json.dumps(report.to_dict(), indent=2))
    print(report.to_markdown())


def stage_all(args: argparse.Namespace) -> None:
    """Every stage for every seed, in dependency order; finished outputs are skipped."""
    for seed in args.seeds:
        stage_bc(argparse.Namespace(**{**vars(args), "seed": seed}))
        stage_eval(argparse.Namespace(**{**vars(args), "policy": f"bc-s{seed}", "step": None, "protocol": False,
                                           "fresh": 0}))
        for mode in METHODS:
            stage_finetune(argparse.Namespace(**{**vars(args), "seed": seed, "mode": mode, "name": None, "init": None}))
            for step in [*range(args.curve_every, args.steps, args.curve_every), None]:
                stage_eval(argparse.Namespace(**{**vars(args), "policy": f"{mode}-s{seed}", "step": step,
                                                 "protocol": False, "fresh": 0}))
    stage_report(argparse.Namespace(**{**vars(args), "seeds": None}))  # every seed's results, written


def greedy_drift(start: torch.Tensor, moved: torch.Tensor) -> dict[str, float]:
    """How far a fine-tune moved from its start, from both policies' log-probs ``[N, 7, bins]``
    on the same states: the share of action tokens whose greedy bin changed, the share of steps
    with any changed token, the mean shift (in bins) of a changed token, and KL(start || moved)."""
    a, b = start.argmax(-1), moved.argmax(-1)
    changed = a != b
    return {"token_flip_rate": changed.float().mean().item(),
            "step_flip_rate": changed.any(-1).float().mean().item(),
            "bin_shift_when_flipped": ((a - b).abs().float().sum() / changed.sum().clamp_min(1)).item(),
            "kl_start_to_policy": (start.exp() * (start - moved)).sum(-1).mean().item()}


def stage_drift(args: argparse.Namespace) -> None:
    """Greedy drift of a fine-tune (or of one snapshot) from its starting policy, on states of
    the demonstrations: what the RL updates did to the actions the evaluation takes."""
    import torch

    from agents.vla.bc import demonstration_steps
    from agents.vla.policy import MiniVLAPolicy
    from wmrl_envs.libero.embeddings import instruction_embeddings
    from wmrl_envs.libero.tasks import INSTRUCTIONS
    from wmrl_envs.libero.trajectory import load_trajectories

    folder = run_dir(args, args.policy)
    suffix = f"-step{args.step}" if args.step is not None else ""
    out = folder / (f"drift-from-{args.start}{suffix}.json" if args.start else f"drift{suffix}.json")
    if out.exists():
        print(out.read_text())
        return
    if args.start:  # another run's policy as the reference, e.g. another BC seed for scale
        reference, tasks_of = run_dir(args, args.start) / "policy.pt", args.tasks
    elif (folder / "finetune.json").exists():
        finetune = json.loads((folder / "finetune.json").read_text())
        reference, tasks_of = Path(finetune["init"]), finetune["tasks"]
    else:
        raise SystemExit(f"{folder} is not a fine-tune's run folder (no finetune.json): give --start to name the "
                         "policy to compare it with")
    start, moved = MiniVLAPolicy.load(reference), MiniVLAPolicy.load(folder / f"policy{suffix}.pt")
    if moved.config.use_images:
        raise SystemExit("drift reads demonstration states, and the demonstrations hold no camera frames")
    demos = [t for p in args.demos for t in load_trajectories(p) if t.success and t.task_index in tasks_of]
    if not demos:
        raise SystemExit(f"no successful demonstrations of tasks {tasks_of} in {args.demos}")
    tasks, states, _ = demonstration_steps(demos)
    pick = np.random.default_rng(0).choice(len(states), min(args.states, len(states)), replace=False)
    embeddings = torch.as_tensor(instruction_embeddings([INSTRUCTIONS[t] for t in tasks[pick]]))
    with torch.no_grad():
        logps = [torch.log_softmax(p(embeddings, torch.as_tensor(states[pick])), -1) for p in (start, moved)]
    payload = {"policy": args.policy, "step": args.step, "start": str(reference), "states": int(len(pick)),
               **greedy_drift(*logps)}
    out.write_text(json.dumps(payload, indent=2))
    print(json.dumps(payload, indent=2))


# ------------------------------------------------------------------ report
def _success(report: dict[str, Any]) -> tuple[float, int]:
    successes = [s for t in report["tasks"] for s in t["successes"]]
    return float(np.mean(successes)), len(successes)


def _row(policy: str, seed: int, evaluation: dict[str, Any], ledger: dict[str, Any]) -> dict[str, Any]:
    success, trials = _success(evaluation)
    return {"policy": policy, "seed": seed, "trials": trials, "success": success,
            "tasks": sorted(t["task_index"] for t in evaluation["tasks"]),
            "sim_cpu_s": float(ledger.get("cost/simulation_cpu_s", 0.0)),
            "total_cpu_s": float(ledger.get("cost/total_cpu_s", 0.0)),
            "sim_steps": int(ledger.get("cost/simulation_count", 0))}


def collect_rows(runs: Path, prefix: str = "eval") -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """One row per evaluated ``<policy>-s<seed>`` folder, and each fine-tune's learning curve.

    ``prefix`` picks the evaluation: ``"eval"`` (init states 40-49) or :data:`FRESH_PREFIX`.
    An evaluated snapshot of step ``k`` is also a row of its own, policy ``<policy>@<k>``, with
    the compute spent up to it: a fixed budget of ``k`` updates is a policy one may report.
    """
    rows, curves = [], {}
    for folder in sorted(p for p in runs.iterdir() if p.is_dir()):
        match = RUN_NAME.fullmatch(folder.name)
        if not match:
            continue
        policy, seed = match.group(1), int(match.group(2))
        final = folder / f"{prefix}.json"
        steps = sorted(int(ev.stem.rsplit("step", 1)[1]) for ev in folder.glob(f"{prefix}-step*.json"))
        snapshots = [(step, json.loads((folder / f"{prefix}-step{step}.json").read_text()),
                      json.loads((folder / f"ledger-step{step}.json").read_text())) for step in steps]
        for step, evaluation, step_ledger in snapshots:
            rows.append({**_row(f"{policy}@{step}", seed, evaluation, step_ledger), "snapshot_of": policy,
                         "step": step})
        if not final.exists():
            continue
        ledger = json.loads((folder / "ledger.json").read_text()) if (folder / "ledger.json").exists() else {}
        rows.append(_row(policy, seed, json.loads(final.read_text()), ledger))
        final_row = rows[-1]
        meta = folder / "finetune.json"
        if policy == "bc" or not meta.exists():
            continue
        finetune = json.loads(meta.read_text())
        start = runs / Path(finetune["init"]).parent.name / f"{prefix}.json"
        if not start.exists():
            continue
        start_eval = json.loads(start.read_text())
        if sorted(t["task_index"] for t in start_eval["tasks"]) != final_row["tasks"]:
            continue  # the starting policy was evaluated on other tasks: no curve from it
        points = [(0, 0.0, _success(start_eval)[0])]
        points += [(step, float(step_ledger.get("cost/simulation_cpu_s", 0.0)), _success(evaluation)[0])
                   for step, evaluation, step_ledger in snapshots]
        points.append((int(finetune["steps"]), final_row["sim_cpu_s"], final_row["success"]))
        curves.setdefault(policy, []).append({"seed": seed, "tasks": final_row["tasks"], "curve": [
            {"step": s, "compute_cpu_s": c, "heldout_mean": v, "heldout_se": float("nan")} for s, c, v in points]})
    return rows, curves


def pool_rows(rows: list[dict[str, Any]], fresh_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each (policy, seed) evaluated on both held-out sets, as one row over all their episodes."""
    fresh = {(r["policy"], r["seed"]): r for r in fresh_rows}
    pooled = []
    for row in rows:
        other = fresh.get((row["policy"], row["seed"]))
        if other is None or other["tasks"] != row["tasks"]:
            continue
        trials = row["trials"] + other["trials"]
        pooled.append({**row, "trials": trials,
                       "success": (row["success"] * row["trials"] + other["success"] * other["trials"]) / trials})
    return pooled


#: Per-update success of the simulator-graded training episodes (sampled at the training
#: temperature, on training init states): every episode under real GRPO, the anchors under WMRL.
EXECUTED_SUCCESS = ("reward/real/mean", "reward/anchor/mean")


def collect_training_success(runs: Path) -> dict[str, dict[int, list[float]]]:
    """For each fine-tune and seed, the executed training episodes' success at every update:
    what RL optimises, where the held-out evaluation is greedy."""
    import csv

    found: dict[str, dict[int, list[float]]] = {}
    for path in sorted(runs.glob("*-s*/metrics.csv")):
        match = RUN_NAME.fullmatch(path.parent.name)
        if not match or not (path.parent / "finetune.json").exists():
            continue
        with path.open() as f:
            rows = list(csv.DictReader(f))
        key = next((k for k in EXECUTED_SUCCESS if any(r.get(k) for r in rows)), None)
        if key is not None:
            found.setdefault(match.group(1), {})[int(match.group(2))] = [
                float(r[key]) if r.get(key) else float("nan") for r in rows]
    return found


def collect_protocol(runs: Path) -> list[dict[str, Any]]:
    """Every full-protocol evaluation (10 tasks x init states 0-49), with its per-task success."""
    results = []
    for path in sorted(runs.glob("*/eval-protocol*.json")):
        report = json.loads(path.read_text())
        success, trials = _success(report)
        results.append({"policy": path.parent.name + path.stem[len("eval-protocol"):], "trials": trials,
                        "success": success,
                        "by_task": {str(t["task_index"]): float(np.mean(t["successes"])) for t in report["tasks"]}})
    return results


def collect_drift(runs: Path) -> dict[str, dict[int, dict[str, float]]]:
    """Every ``drift`` result, by policy and seed: ``<policy>@<k>`` for a snapshot, and
    ``<policy> from <start>`` (seeds dropped) when it was compared with another run than its start."""
    found: dict[str, dict[int, dict[str, float]]] = {}
    for path in sorted(runs.glob("*-s*/drift*.json")):
        folder = RUN_NAME.fullmatch(path.parent.name)
        stem = re.fullmatch(r"drift(?:-from-(.+?))?(?:-step(\d+))?", path.stem)
        if folder and stem:
            start, step = stem.groups()
            name = folder.group(1) + (f"@{step}" if step else "")
            if start:
                name += f" from {re.sub(r'-s[0-9]+$', '', start)}"
            found.setdefault(name, {})[int(folder.group(2))] = json.loads(path.read_text())
    return found


def anchor_group_stats(wm: np.ndarray, real: np.ndarray, calibrated: np.ndarray, group_size: int) -> dict[str, float]:
    """How the success model scores anchor groups (consecutive blocks of ``group_size``), whose
    episodes were also executed: AUROC over all anchors and within groups of mixed outcome (the
    only ranking GRPO uses), and, in groups whose real outcomes are all alike (no signal under
    real rewards), the spread of the calibrated scores that GRPO's std normalisation scales up."""
    wins, pairs = concordance(real, wm)
    within = [concordance(real[i:i + group_size], wm[i:i + group_size]) for i in range(0, len(wm), group_size)]
    silent = [calibrated[i:i + group_size].std() for i in range(0, len(wm), group_size)
              if real[i:i + group_size].min() == real[i:i + group_size].max()]
    mixed_pairs = sum(n for _, n in within)
    return {"groups": len(within), "silent_share": len(silent) / len(within),
            "auroc": wins / pairs if pairs else float("nan"),
            "auroc_within_groups": sum(w for w, _ in within) / mixed_pairs if mixed_pairs else float("nan"),
            "silent_calibrated_std_median": float(np.median(silent)) if silent else float("nan"),
            "silent_share_spread_over_0.01": float(np.mean(np.array(silent) > 0.01)) if silent else float("nan")}


def collect_anchor_groups(runs: Path) -> dict[str, dict[int, dict[str, float]]]:
    """:func:`anchor_group_stats` of every WMRL fine-tune, from the anchor pairs in its last
    checkpoint, calibrated by the final map (in-sample). Runs whose pairs are not whole groups
    of one task each (a dropped episode breaks the blocks) are left out."""
    import torch

    from wmrl_envs.calibration import Calibrator, CalibratorConfig

    found: dict[str, dict[int, dict[str, float]]] = {}
    for path in sorted(runs.glob("wmrl*-s*/checkpoint.pt")):
        match = RUN_NAME.fullmatch(path.parent.name)
        if not match:
            continue
        state = torch.load(path, weights_only=False, map_location="cpu")  # our own run's file
        pairs, g = state["scoring"]["calibrator"], int(state["config"]["schedule"]["group_size"])
        wm, real, tasks = np.asarray(pairs["wm_scores"]), np.asarray(pairs["real_scores"]), list(pairs["task_ids"])
        if not len(wm) or len(wm) % g or any(len(set(tasks[i:i + g])) != 1 for i in range(0, len(wm), g)):
            continue
        calibrator = Calibrator(CalibratorConfig(**pairs["config"]))
        calibrator.load_state_dict(pairs)
        found.setdefault(match.group(1), {})[int(match.group(2))] = anchor_group_stats(
            wm, real, calibrator.calibrate(wm, tasks), g)
    return found


def real_counterpart(policy: str) -> str:
    """The real-GRPO run a fine-tune is compared with: ``wmrl-<variant>`` against ``real-<variant>``."""
    return "real" + policy[len("wmrl"):] if policy.startswith("wmrl") else "real"


def summarise(rows: list[dict[str, Any]], curves: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_policy.setdefault(row["policy"], []).append(row)
    # A policy's gain is over the same seed's BC policy on the same tasks.
    bc = {(r["seed"], tuple(r["tasks"])): r["success"] for r in by_policy.get("bc", [])}
    summary = {}
    for policy, group in by_policy.items():
        mean, se = mean_se([r["success"] for r in group])
        paired = [r["success"] - bc[r["seed"], tuple(r["tasks"])] for r in group if (r["seed"], tuple(r["tasks"])) in bc]
        gain, gain_se = mean_se(paired) if paired and policy != "bc" else (float("nan"), float("nan"))
        summary[policy] = {"seeds": sorted(r["seed"] for r in group), "trials": [r["trials"] for r in group],
                           "tasks": group[0]["tasks"],
                           "success": mean, "success_se": se, "gain_over_bc": gain, "gain_over_bc_se": gain_se,
                           "sim_cpu_s": float(np.mean([r["sim_cpu_s"] for r in group])),
                           "total_cpu_s": float(np.mean([r["total_cpu_s"] for r in group]))}
    mean_curves = {p: mean_curve(c) for p, c in curves.items() if len({len(r["curve"]) for r in c}) == 1}
    for policy, curve in mean_curves.items():
        # The paired gain over each seed's BC policy at every evaluation point of the curve.
        gains = np.array([[p["heldout_mean"] - bc[r["seed"], tuple(r["tasks"])] for p in r["curve"]]
                          for r in curves[policy] if (r["seed"], tuple(r["tasks"])) in bc])
        if len(gains):
            summary[policy]["curve_gain_over_bc"] = [mean_se(list(column)) for column in gains.T]
        summary[policy]["curve"] = {k: v.tolist() for k, v in curve.items()}
    comparisons = {}
    for policy in (p for p in mean_curves if p.startswith("wmrl")):
        real_name = real_counterpart(policy)
        # Mean curves compare only over the same seeds (the same BC policies under both).
        if real_name not in mean_curves or summary[real_name]["seeds"] != summary[policy]["seeds"]:
            continue
        real = mean_curves[real_name]
        # Compute-to-reach is only a comparison when real GRPO ends above BC by more than one SE
        # of its paired gain: a final within noise of the start is reached by interpolating
        # the first segment of any curve, and would give a speedup that means nothing.
        target = float(real["score"][-1])
        gain, gain_se = summary[real_name]["gain_over_bc"], summary[real_name]["gain_over_bc_se"]
        improves = bool(math.isfinite(gain_se) and gain > gain_se)
        reach = crossing(mean_curves[policy]["compute"], mean_curves[policy]["score"], target) if improves else None
        real_reach = crossing(real["compute"], real["score"], target) if improves else None
        comparisons[policy] = {"real": real_name, "target_real_final": target, "real_improves_on_start": improves,
                               "sim_cpu_s_to_real_final": reach, "real_sim_cpu_s_to_real_final": real_reach,
                               "speedup_vs_real": real_reach / reach if reach and real_reach else None}
    return {"policies": summary, "comparisons": comparisons}


def _fmt(mean: float, se: float) -> str:
    if not math.isfinite(mean):
        return "—"
    return f"{mean:.3f}" if not math.isfinite(se) else f"{mean:.3f} ± {se:.3f}"


def _summary_table(summary: dict[str, Any], heading: str) -> list[str]:
    lines = [f"| policy | tasks | seeds | trials/seed | {heading} | gain over BC | sim CPU-s | total CPU-s |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for policy, s in summary["policies"].items():
        lines.append(f"| `{policy}` | {' '.join(map(str, s['tasks']))} | {','.join(map(str, s['seeds']))} | "
                     f"{min(s['trials'])} | "
                     f"{_fmt(s['success'], s['success_se'])} | {_fmt(s['gain_over_bc'], s['gain_over_bc_se'])} | "
                     f"{s['sim_cpu_s']:.0f} | {s['total_cpu_s']:.0f} |")
    return lines


def _comparison_table(summary: dict[str, Any]) -> list[str]:
    if not summary["comparisons"]:
        return []
    lines = ["", ("Simulator compute to reach real GRPO's final success (mean curves; each WMRL variant against "
             "real GRPO with the same settings; only where real's final paired gain over BC exceeds its SE):"), "",
             "| WMRL run | real run | real's final | WMRL sim CPU-s to it | real sim CPU-s to it | speedup |",
             "|---|---|---:|---:|---:|---:|"]
    for policy, c in summary["comparisons"].items():
        if not c["real_improves_on_start"]:
            lines.append(f"| `{policy}` | `{c['real']}` | {c['target_real_final']:.3f} | real GRPO's final "
                         "gain over BC is within one SE: no improvement to reach | | |")
            continue
        reach, real_reach = c["sim_cpu_s_to_real_final"], c["real_sim_cpu_s_to_real_final"]
        speed = c["speedup_vs_real"]
        lines.append(f"| `{policy}` | `{c['real']}` | {c['target_real_final']:.3f} | "
                     f"{'never' if reach is None else f'{reach:.0f}'} | "
                     f"{'—' if real_reach is None else f'{real_reach:.0f}'} | "
                     f"{'—' if speed is None else f'{speed:.1f}x'} |")
    return lines


def _training_lines(training: dict[str, dict[int, list[float]]]) -> list[str]:
    lines = ["", ("Success of the executed training episodes at each update (sampled at the training temperature, "
                  "training init states; all 16 or 64 episodes of an update under real GRPO, only the anchors "
                  "under WMRL), mean ± SE over seeds:"), ""]
    for policy, by_seed in training.items():
        updates = min(len(v) for v in by_seed.values())
        columns = [[v[u] for v in by_seed.values() if math.isfinite(v[u])] for u in range(updates)]
        points = ", ".join(f"{u + 1}: {_fmt(*mean_se(c))}" for u, c in enumerate(columns) if c)
        lines.append(f"- `{policy}` (seeds {','.join(map(str, sorted(by_seed)))}): {points}")
    return lines


def report_markdown(rows: list[dict[str, Any]], summary: dict[str, Any],
                    protocol: Sequence[dict[str, Any]] = (), fresh: dict[str, Any] | None = None,
                    pooled: dict[str, Any] | None = None,
                    training: dict[str, dict[int, list[float]]] | None = None,
                    drift: dict[str, dict[int, dict[str, float]]] | None = None,
                    anchors: dict[str, dict[int, dict[str, float]]] | None = None) -> str:
    lines = ["### MiniVLA on LIBERO-Long: WMRL vs real GRPO vs behaviour cloning", "",
             ("Greedy actions, held-out init states 40-49 of the trained tasks; mean ± SE over seeds (seed s: "
              "BC with seed s, both fine-tunes of that BC policy with seed s). Gain: paired difference to the "
              "same seed's BC policy. Compute: training simulator CPU-seconds from the ledger. `<policy>@<k>`: "
              "the run's snapshot after k updates, with the compute spent up to it."), ""]
    lines += _summary_table(summary, "held-out success")
    lines += ["", "Per seed (final policies; every snapshot's row is in the json):", "",
              "| policy | seed | trials | success | sim CPU-s | total CPU-s |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| `{r['policy']}` | {r['seed']} | {r['trials']} | {r['success']:.3f} | {r['sim_cpu_s']:.0f} | "
              f"{r['total_cpu_s']:.0f} |" for r in rows if "snapshot_of" not in r]
    lines += _comparison_table(summary)
    curves = {p: s["curve"] for p, s in summary["policies"].items() if "curve" in s}
    if curves:
        lines += ["", "Learning curves (mean over seeds: step, sim CPU-s, held-out success, paired gain over BC):", ""]
        for policy, c in curves.items():
            gains = summary["policies"][policy].get("curve_gain_over_bc", [(float("nan"), float("nan"))] * len(c["step"]))
            points = ", ".join(f"step {st}: {cp:.0f} s → {sc:.3f} (gain {_fmt(*g)})"
                               for st, cp, sc, g in zip(c["step"], c["compute"], c["score"], gains))
            lines.append(f"- `{policy}`: {points}")
    if fresh:
        lines += ["", (f"Sampled placements (init states {fresh['init_states'][0]}-{fresh['init_states'][-1]} of "
                       "each trained task: scenes drawn from the task's own placement regions, in no LIBERO file "
                       "and never used to train or to choose anything), greedy, paired with the same seed's BC "
                       "on the same scenes:"), ""]
        lines += _summary_table(fresh["summary"], "success")
        lines += _comparison_table(fresh["summary"])
    if pooled:
        lines += ["", ("Both held-out sets pooled (states 40-49 and the sampled placements: every policy and seed "
                       "evaluated on both, so twice the episodes behind each seed's figure), paired with the same "
                       "seed's BC on the same episodes:"), ""]
        lines += _summary_table(pooled["summary"], "success")
    if training:
        lines += _training_lines(training)
    if drift:
        lines += ["", ("Greedy drift from the BC start on demonstration states (`drift`): the share of action tokens "
                       "and of steps whose greedy bin changed, the mean shift of a changed token in bins (of 256), "
                       "and KL(BC || policy) per token; mean ± SE over seeds:"), "",
                  "| policy | seeds | tokens changed | steps with a change | shift (bins) | KL per token |",
                  "|---|---|---:|---:|---:|---:|"]
        for policy, by_seed in drift.items():
            cells = [_fmt(*mean_se([d[key] for d in by_seed.values()])) for key in
                     ("token_flip_rate", "step_flip_rate", "bin_shift_when_flipped", "kl_start_to_policy")]
            lines.append(f"| `{policy}` | {','.join(map(str, sorted(by_seed)))} | {' | '.join(cells)} |")
    if anchors:
        lines += ["", ("The success model on anchor groups (episodes both executed and scored; final calibration map, "
                       "in-sample): AUROC over all anchors and within groups of mixed outcome; for groups whose real "
                       "outcomes are all alike, the median within-group std of the calibrated scores and the share "
                       "above 0.01 (std-normalised advantages scale these up to ±1); mean ± SE over seeds:"), "",
                  ("| policy | seeds | anchor groups | silent under real | AUROC | AUROC within groups | "
                   "silent groups' std | share > 0.01 |"), "|---|---|---:|---:|---:|---:|---:|---:|"]
        for policy, by_seed in anchors.items():
            values = [[d[key] for d in by_seed.values() if math.isfinite(d[key])]
                      for key in ("silent_share", "auroc", "auroc_within_groups", "silent_calibrated_std_median",
                                  "silent_share_spread_over_0.01")]
            cells = [_fmt(*mean_se(v)) if v else "—" for v in values]
            groups = sum(d["groups"] for d in by_seed.values())
            lines.append(f"| `{policy}` | {','.join(map(str, sorted(by_seed)))} | {groups} | {' | '.join(cells)} |")
    if protocol:
        lines += ["", ("Full LIBERO-Long protocol (greedy, 10 tasks x init states 0-49, including tasks and init "
                       "states never trained on):"), "",
                  "| policy | trials | success | per task (0-9) |", "|---|---:|---:|---|"]
        lines += [f"| `{p['policy']}` | {p['trials']} | {p['success']:.3f} | "
                  f"{' / '.join(f'{v:.2f}' for v in p['by_task'].values())} |" for p in protocol]
    return "\n".join(lines)


def plot_curves(summary: dict[str, Any], path: Path) -> Path:
    """One panel per compared pair (WMRL and real GRPO with the same settings): held-out success
    against training simulator CPU-seconds, mean ± SE over seeds; each curve starts at its BC policies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = [(policy, c["real"]) for policy, c in summary["comparisons"].items()] or [
        (policy,) for policy, s in summary["policies"].items() if "curve" in s]
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 4), sharey=True, squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        for policy in pair:
            s = summary["policies"][policy]
            draw_curve(ax, s["curve"], f"{policy} ({len(s['seeds'])} seeds)")
        ax.set(title=" vs ".join(pair), xlabel="training simulator CPU-s")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("greedy held-out success")
    fig.suptitle("MiniVLA on LIBERO-Long, held-out init states 40-49")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def _of_seeds(rows: list[dict[str, Any]], curves: dict[str, list[dict[str, Any]]], seeds: Sequence[int] | None):
    if seeds is None:
        return rows, curves
    keep = set(seeds)
    curves = {p: [c for c in cs if c["seed"] in keep] for p, cs in curves.items()}
    return [r for r in rows if r["seed"] in keep], {p: cs for p, cs in curves.items() if cs}


def _keep_seeds(by_policy: dict[str, dict[int, Any]], seeds: Sequence[int] | None) -> dict[str, dict[int, Any]]:
    """Results keyed by policy, then seed, with only ``seeds`` (all when None)."""
    if seeds is None:
        return by_policy
    kept = {p: {s: v for s, v in by_seed.items() if s in seeds} for p, by_seed in by_policy.items()}
    return {p: by_seed for p, by_seed in kept.items() if by_seed}


def stage_report(args: argparse.Namespace) -> None:
    """Write the results files from every run; with ``--seeds``, only print the view of those seeds."""
    from wmrl_envs.libero.tasks import sampled_init_states
    from wmrl_envs.provenance import provenance

    rows, curves = _of_seeds(*collect_rows(args.runs), args.seeds)
    if not rows:
        raise SystemExit(f"no evaluated runs under {args.runs}: run the bc, finetune and eval stages first")
    summary = summarise(rows, curves)
    protocol = collect_protocol(args.runs) if args.seeds is None else []
    fresh_rows, fresh_curves = _of_seeds(*collect_rows(args.runs, FRESH_PREFIX), args.seeds)
    fresh = None
    if fresh_rows:
        trials = {r["trials"] // len(r["tasks"]) for r in fresh_rows}
        if len(trials) != 1:
            raise SystemExit(f"the sampled-placement evaluations differ in trials per task ({sorted(trials)}): "
                             "rerun them with one --fresh N")
        fresh = {"init_states": list(sampled_init_states(trials.pop())), "rows": fresh_rows,
                 "summary": summarise(fresh_rows, fresh_curves), "curves": fresh_curves}
    pooled_rows = pool_rows(rows, fresh_rows)
    pooled = {"rows": pooled_rows, "summary": summarise(pooled_rows, {})} if pooled_rows else None
    training = _keep_seeds(collect_training_success(args.runs), args.seeds)
    drift = _keep_seeds(collect_drift(args.runs), args.seeds)
    anchors = _keep_seeds(collect_anchor_groups(args.runs), args.seeds)
    markdown = report_markdown(rows, summary, protocol, fresh, pooled, training, drift, anchors)
    if args.seeds is not None:
        print(f"seeds {' '.join(map(str, args.seeds))} only (nothing written)\n\n{markdown}")
        return
    payload = {"meta": {**provenance(), "runs": str(args.runs), "heldout_init_states": list(HELDOUT),
                        "greedy": True},
               "rows": rows, "summary": summary, "curves": curves, "protocol": protocol, "fresh": fresh,
               "pooled": pooled, "training_success": training, "drift": drift, "anchor_groups": anchors}
    md = write_result("libero_vla", __spec__.name, payload, markdown)
    print(md.read_text())
    print(f"wrote {md.with_suffix('.json')}, {md} and {plot_curves(summary, md.with_suffix('.png'))}")


# ------------------------------------------------------------------ command line
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/libero"), help="folder of every stage's outputs")
    tasks = argparse.ArgumentParser(add_help=False)
    tasks.add_argument("--tasks", type=int, nargs="+", default=list(DEFAULT_TASKS), help="tasks trained and evaluated")
    workers = argparse.ArgumentParser(add_help=False)
    workers.add_argument("--sim-workers", type=int, default=1,
                         help="simulation workers the episodes run on (1: this process)")
    workers.add_argument("--executor", choices=("local", "ray"), default="local",
                         help="where the workers run: local processes, or Ray actors (joins RAY_ADDRESS, else "
                              "starts a Ray on this machine)")
    sub = parser.add_subparsers(dest="stage", required=True)

    def add_bc(p: argparse.ArgumentParser) -> None:
        p.add_argument("--demos", type=Path, nargs="*", default=None, help="episode files (default: the data cache)")
        p.add_argument("--epochs", type=int, default=30)
        p.add_argument("--hidden", type=int, default=256)
        p.add_argument("--blocks", type=int, default=2)

    def add_finetune(p: argparse.ArgumentParser) -> None:
        p.add_argument("--steps", type=int, default=8)
        p.add_argument("--curve-every", type=int, default=4, help="steps between policy snapshots for the curves")
        p.add_argument("--tasks-per-step", type=int, default=4)
        p.add_argument("--group-size", type=int, default=4)
        p.add_argument("--anchor-fraction", type=float, default=0.25)
        p.add_argument("--wm-horizon", type=int, default=260)
        p.add_argument("--learning-rate", type=float, default=3e-5)
        p.add_argument("--kl-coef", type=float, default=0.0, help="KL penalty to the BC policy")
        p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of training rollouts")
        p.add_argument("--update-epochs", type=int, default=1,
                       help="clipped-surrogate passes over each batch (PPO epochs); one pass is <1%% of a run's CPU")
        p.add_argument("--advantage", choices=("std", "mean"), default="std",
                       help="group advantage: 'std' divides by the group's std (GRPO), 'mean' does not (Dr.GRPO), so "
                            "small score spreads in a group stay small")
        p.add_argument("--wm-reward", choices=("truncate", "shaped"), default="truncate",
                       help="world-model groups: stop at --wm-horizon and score P(success) (truncate), or run to the "
                            "end and add the calibrated rise of P(success | prefix) to the success (shaped)")
        p.add_argument("--images", action="store_true", help="also read the camera (obs_mode both; ~30x slower)")
        p.add_argument("--train", default="", metavar="REGEX",
                       help="train only the parameters whose names match, e.g. 'bias|norm' (default: all); see "
                            "bench/libero_gradient_noise.py for each tensor's gradient noise scale")

    bc = sub.add_parser("bc", parents=[tasks])
    add_bc(bc)
    bc.add_argument("--seed", type=int, default=0)
    pr = sub.add_parser("probe", parents=[tasks])
    pr.add_argument("--policy", default="bc-s0")
    pr.add_argument("--temperature", type=float, default=1.0)
    pr.add_argument("--inits", type=int, nargs="*", default=list(range(0, 40, 5)), help="training init states")
    pr.add_argument("--samples", type=int, default=2, help="episodes per (task, init state)")
    pr.add_argument("--group-size", type=int, default=4)
    ft = sub.add_parser("finetune", parents=[tasks, workers])
    ft.add_argument("--mode", choices=METHODS, required=True)
    ft.add_argument("--seed", type=int, default=0)
    ft.add_argument("--name", default=None, help="run folder (default: <mode>-s<seed>)")
    ft.add_argument("--init", default=None, help="run folder of the starting policy (default: bc-s<seed>)")
    add_finetune(ft)
    ev = sub.add_parser("eval", parents=[tasks, workers])
    ev.add_argument("--policy", default="bc-s0", help="run folder under --runs")
    ev.add_argument("--step", type=int, default=None, help="evaluate the snapshot of this training step")
    ev.add_argument("--protocol", action="store_true", help="the full protocol: 10 tasks x init states 0-49")
    ev.add_argument("--fresh", type=int, default=0, metavar="N",
                    help="instead of states 40-49, N sampled placements per task (init states 1000..)")
    dr = sub.add_parser("drift", parents=[tasks])
    dr.add_argument("--policy", required=True, help="run folder under --runs (a fine-tune, unless --start is given)")
    dr.add_argument("--step", type=int, default=None, help="the snapshot of this training step")
    dr.add_argument("--start", default=None, help="compare with this run folder's policy instead of the fine-tune's "
                    "start (e.g. another BC seed, for scale); --tasks then picks the states")
    dr.add_argument("--states", type=int, default=4000, help="demonstration states compared")
    dr.add_argument("--demos", type=Path, nargs="*", default=None, help="episode files (default: the data cache)")
    rp = sub.add_parser("report")
    rp.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="print the view of these seeds only, writing nothing (default: write every seed's results)")
    al = sub.add_parser("all", parents=[tasks, workers])
    al.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    add_bc(al)
    add_finetune(al)
    args = parser.parse_args()
    setup_threads()
    if getattr(args, "executor", None) == "ray":
        import ray

        ray.init()  # this script drives the run: it joins RAY_ADDRESS's cluster, or starts one here
    if getattr(args, "demos", "") is None:
        from wmrl_envs.paths import wmrl_home

        args.demos = sorted((wmrl_home() / "libero").glob("*.npz"))
    {"bc": stage_bc, "probe": stage_probe, "finetune": stage_finetune, "eval": stage_eval, "drift": stage_drift,
     "report": stage_report, "all": stage_all}[args.stage](args)


if __name__ == "__main__":
    main()
