"""MiniVLA on LIBERO-Long: behaviour cloning, then WMRL versus real-reward GRPO fine-tuning.

Stages (each writes under ``runs/libero/`` and is skipped when its output exists):

* ``bc``: behaviour-clone MiniVLA from the scripted controller's successes on init states
  0-39 (from ``scripts/build_libero_reward_model.py --stage collect`` and
  ``bench/libero_scripted.py --save``).
* ``finetune --mode wmrl|real``: the shared :class:`~trainers.wmrl.WMRLTrainer` from the BC
  policy, with :class:`~trainers.families.libero.LiberoAdapter`, for the same number of
  updates in both modes; the ledger records simulator steps.
* ``eval --policy NAME``: success per task on held-out init states (40 onward by default).
* ``report``: the table of every evaluated policy with the simulator steps it consumed.

    python bench/libero_vla.py bc
    python bench/libero_vla.py finetune --mode wmrl --steps 8 --tasks 0 1 7
    python bench/libero_vla.py finetune --mode real --steps 8 --tasks 0 1 7
    python bench/libero_vla.py eval --policy bc --trials 10   # likewise wmrl, real
    python bench/libero_vla.py report

The full protocol (50 trials per task, init states 0-49) on a bigger machine:
``python bench/libero_vla.py eval --policy bc --trials 50 --init-start 0``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from libero_common import setup_threads, write_result

RUNS = Path("runs/libero")


def stage_bc(args: argparse.Namespace) -> None:
    from agents.vla.bc import BCConfig, behaviour_clone
    from agents.vla.policy import VLAConfig
    from wmrl_envs.libero.trajectory import load_trajectories

    out = RUNS / args.name / "policy.pt"
    if out.exists():
        print(f"{out} exists")
        return
    # Every successful scripted episode of the training init states, clean or noisy: noisy
    # successes widen the states seen, and cross-entropy learns the mode of the noisy actions.
    demos = [t for p in args.demos for t in load_trajectories(p)
             if t.success and t.source.startswith("scripted") and t.init_state < 40]
    config = BCConfig(epochs=args.epochs)
    policy, losses = behaviour_clone(demos, config, VLAConfig(hidden=args.hidden, blocks=args.blocks), progress=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    policy.save(out)
    (out.parent / "bc.json").write_text(json.dumps({"demos": len(demos), "steps": int(sum(d.steps for d in demos)),
                                                    "config": vars(config), "hidden": args.hidden,
                                                    "blocks": args.blocks, "losses": losses}, indent=2))
    print(f"wrote {out} from {len(demos)} demonstrations")


def stage_finetune(args: argparse.Namespace) -> None:
    from agents.vla.policy import MiniVLAPolicy
    from trainers.families.libero import LiberoAdapter
    from trainers.wmrl import WMRLTrainer
    from trainers.wmrl_config import WMRLConfig

    run = RUNS / (args.name or args.mode)
    if (run / "policy.pt").exists():
        print(f"{run / 'policy.pt'} exists")
        return
    policy = MiniVLAPolicy.load(RUNS / args.init / "policy.pt")
    policy.config.temperature = args.temperature
    config = WMRLConfig.from_flat(
        mode=args.mode, env_id="wmrl/LIBERO-Long-v0", policy="vla", policy_path=str(RUNS / args.init / "policy.pt"),
        steps=args.steps, tasks_per_step=args.tasks_per_step, group_size=args.group_size,
        warmup_steps=min(2, args.steps - 1), anchor_fraction=args.anchor_fraction, learning_rate=args.learning_rate,
        calibration_min_pairs_global=8, seed=args.seed, output_dir=str(run), checkpoint_every=1, tensorboard=False)
    adapter = LiberoAdapter(task_ids=args.tasks, wm_horizon=args.wm_horizon, seed=args.seed)
    trainer = WMRLTrainer(config, policy, adapter)
    trainer.resume()
    try:
        trainer.train()
    finally:
        adapter.close()
    policy.save(run / "policy.pt")
    (run / "ledger.json").write_text(json.dumps(trainer.ledger.metrics(), indent=2))


def stage_eval(args: argparse.Namespace) -> None:
    from agents.vla.policy import MiniVLAPolicy, VLAEpisodePolicy
    from wmrl_envs.libero.evaluate import evaluate_libero
    from wmrl_envs.libero.trajectory import save_trajectories

    out = RUNS / args.policy / f"eval-{args.init_start}-{args.trials}.json"
    if out.exists():
        print(f"{out} exists")
        return
    policy = MiniVLAPolicy.load(RUNS / args.policy / "policy.pt")
    inits = list(range(args.init_start, args.init_start + args.trials))
    report = evaluate_libero(VLAEpisodePolicy(policy, greedy=True), trials=args.trials, tasks=args.tasks,
                             init_states=inits, name=args.policy, keep_trajectories=True)
    save_trajectories(out.with_suffix(".npz"), report.trajectories)
    out.write_text(json.dumps(report.to_dict(), indent=2))
    print(report.to_markdown())


def stage_report(args: argparse.Namespace) -> None:
    """Success per task of every evaluated policy on the tasks they share, with training sim cost."""
    from wmrl_envs.libero.evaluate import comparison_markdown

    found = {}
    for name in args.policies:
        evals = sorted((RUNS / name).glob(f"eval-{args.init_start}-*.json"))
        if evals:
            ledger_path = RUNS / name / "ledger.json"
            found[name] = (json.loads(evals[-1].read_text()),
                           json.loads(ledger_path.read_text()) if ledger_path.exists() else {})
    if not found:
        raise SystemExit(f"no evaluations from init state {args.init_start} under {RUNS}: run the eval stage first")
    shared = set.intersection(*({t["task_index"] for t in report["tasks"]} for report, _ in found.values()))
    reports = []
    for name, (report, _) in found.items():
        tasks = [t for t in report["tasks"] if t["task_index"] in shared]
        successes = [s for t in tasks for s in t["successes"]]
        reports.append({**report, "policy": name, "tasks": tasks, "success_rate": sum(successes) / len(successes)})
    ledgers = [ledger for _, ledger in found.values()]
    extra = {"training sim steps": [int(ledger.get("cost/simulation_count", 0)) for ledger in ledgers],
             # CPU seconds: wall seconds depend on what else shared the machine during training.
             "training sim CPU-s": [f"{ledger.get('cost/simulation_cpu_s', 0.0):.0f}" for ledger in ledgers],
             "training total CPU-s": [f"{ledger.get('cost/total_cpu_s', 0.0):.0f}" for ledger in ledgers]}
    trials = {r["trials"] for r in reports}
    md = "\n".join([
        f"### MiniVLA on LIBERO-Long (state input, greedy actions, held-out init states from {args.init_start}, "
        f"{'/'.join(map(str, sorted(trials)))} trials per task)", "",
        comparison_markdown(reports, extra)])
    payload = {name: {"eval": report, "ledger": ledger} for name, (report, ledger) in found.items()}
    print(write_result("libero_vla", {"config": vars(args), **payload}, md).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    bc = sub.add_parser("bc")
    bc.add_argument("--demos", type=Path, nargs="*", default=None, help="episode files (default: the data cache)")
    bc.add_argument("--epochs", type=int, default=30)
    bc.add_argument("--hidden", type=int, default=256)
    bc.add_argument("--blocks", type=int, default=2)
    bc.add_argument("--name", default="bc", help="run folder under runs/libero")
    ft = sub.add_parser("finetune")
    ft.add_argument("--mode", choices=("wmrl", "real"), required=True)
    ft.add_argument("--name", default=None, help="run folder under runs/libero (default: the mode)")
    ft.add_argument("--init", default="bc", help="run folder of the policy to start from")
    ft.add_argument("--steps", type=int, default=8)
    ft.add_argument("--tasks", type=int, nargs="*", default=None)
    ft.add_argument("--tasks-per-step", type=int, default=4)
    ft.add_argument("--group-size", type=int, default=4)
    ft.add_argument("--anchor-fraction", type=float, default=0.25)
    ft.add_argument("--wm-horizon", type=int, default=260)
    ft.add_argument("--learning-rate", type=float, default=3e-5)
    ft.add_argument("--temperature", type=float, default=1.0)
    ft.add_argument("--seed", type=int, default=0)
    ev = sub.add_parser("eval")
    ev.add_argument("--policy", default="bc", help="run folder under runs/libero (bc, wmrl, real)")
    ev.add_argument("--trials", type=int, default=10)
    ev.add_argument("--init-start", type=int, default=40)
    ev.add_argument("--tasks", type=int, nargs="*", default=list(range(10)))
    rp = sub.add_parser("report")
    rp.add_argument("--policies", nargs="*", default=["bc", "wmrl", "real"], help="run folders to tabulate")
    rp.add_argument("--init-start", type=int, default=40, help="first init state of the evaluations to tabulate")
    args = parser.parse_args()
    setup_threads()
    if args.stage == "bc" and args.demos is None:
        from wmrl_envs.paths import wmrl_home

        args.demos = sorted((wmrl_home() / "libero").glob("*.npz"))
    {"bc": stage_bc, "finetune": stage_finetune, "eval": stage_eval, "report": stage_report}[args.stage](args)


if __name__ == "__main__":
    main()
