"""The ``wmrl`` command line.

::

    wmrl tasks build|list|show ...          # the built-in task suites
    wmrl train --env wmrl/MLEDojo-v0 --mode wmrl --reward fused --policy grammar ...
    wmrl train --env wmrl/LIBERO-Long-v0 --mode wmrl --policy vla --policy-path runs/libero/bc/policy.pt ...
    wmrl eval --split heldout --policy reference:hist_gb,reference:linear -k 4
    wmrl eval --env wmrl/LIBERO-Long-v0 --trials 50 --policy scripted,runs/libero/bc
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from wmrl_envs.errors import ConfigError, WMRLError
from wmrl_envs.libero.tasks import ENV_ID as LIBERO_ENV_ID, HELDOUT_INIT_STATES


def machine_info() -> dict[str, object]:
    """Git commit, date and machine facts recorded with every result (DESIGN §10)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"commit": commit, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cores": os.cpu_count(), "ram_gib": round(mem_gib, 1), "python": platform.python_version(),
            "argv": sys.argv[1:]}


MODE_REWARD = {"real": "real", "world_model": "world_model"}  # every wmrl mode trains on the fused reward


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type, skip: Sequence[str] = ()) -> None:
    """One ``--field-name`` option per dataclass field, typed from its default, help from metadata."""
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata.get("help", "") + " (default: %(default)s)"
        if isinstance(f.default, bool):
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=f.default,
                                help=help_text)
        elif f.name == "task_ids":
            parser.add_argument(flag, dest=f.name, nargs="*", default=None, help=help_text)
        else:
            kind = type(f.default) if f.default is not None else (float if "float" in str(f.type) else
                                                                    int if "int" in str(f.type) else str)
            parser.add_argument(flag, dest=f.name, type=kind, default=f.default, help=help_text)


def cmd_train(args: argparse.Namespace) -> int:
    from trainers.adapters import make_adapter
    from trainers.policies import make_policy
    from trainers.wmrl import WMRLTrainer
    from trainers.wmrl_config import WMRLConfig

    names = {f.name for f in dataclasses.fields(WMRLConfig)}
    config = WMRLConfig(**{k: v for k, v in vars(args).items() if k in names})
    expected = MODE_REWARD.get(config.mode, "fused")
    if args.reward is not None and args.reward != expected:
        raise ConfigError(f"--mode {config.mode} trains on reward={expected!r}, not {args.reward!r}")
    if config.env_id == LIBERO_ENV_ID and args.eval_k > len(HELDOUT_INIT_STATES):
        raise ConfigError(f"LIBERO-Long holds out {len(HELDOUT_INIT_STATES)} init states: --eval-k must be <= "
                          f"{len(HELDOUT_INIT_STATES)}")
    policy = make_policy(config.policy, seed=config.seed, path=config.policy_path)
    adapter = make_adapter(config)
    trainer = WMRLTrainer(config, policy, adapter)
    if args.resume and trainer.resume():
        print(f"resumed {config.output_dir} at step {trainer.step}")
    try:
        trainer.train()
    finally:
        adapter.close()
    from trainers.plots import write_plots

    write_plots(trainer.run_dir, trainer.history, trainer.calibrator.state_dict(), trainer.ledger.totals)
    evaluation = None
    if args.eval_k > 0:
        untrained = make_policy(config.policy, seed=config.seed, path=config.policy_path)
        evaluation = (heldout_libero if config.env_id == LIBERO_ENV_ID else heldout_code)(
            config, untrained, trainer.policy, args.eval_k, args.eval_tasks)
    md = write_run_summary(trainer, evaluation)
    print(md.read_text())
    return 0


def heldout_code(config, untrained, trained, k: int, task_ids) -> tuple[str, str, list[dict]]:
    """Held-out avg@k of the untrained and trained code policy: (title, Markdown, JSON payload)."""
    from trainers.evaluate import EvalConfig, evaluate, markdown_table
    from trainers.policies import policy_responder

    eval_config = EvalConfig(env_id=config.env_id, split="heldout", k=k, executor=config.executor,
                             workers=config.workers, seed=config.seed,
                             task_ids=tuple(task_ids) if task_ids else None)
    reports = [evaluate(policy_responder(untrained, config.seed), "untrained", eval_config),
               evaluate(policy_responder(trained, config.seed), f"trained ({config.mode})", eval_config)]
    return f"Held-out evaluation (real execution, avg@{k})", markdown_table(reports), [r.to_dict() for r in reports]


def heldout_libero(config, untrained, trained, k: int, task_ids) -> tuple[str, str, list[dict]]:
    """Greedy success of the starting and trained VLA on held-out init states 40..40+k-1."""
    from agents.vla.policy import VLAEpisodePolicy
    from wmrl_envs.libero.evaluate import comparison_markdown, evaluate_libero
    from wmrl_envs.libero.tasks import N_TASKS, task_index

    tasks = [task_index(t) for t in (task_ids or config.task_ids or range(N_TASKS))]
    inits = list(HELDOUT_INIT_STATES[:k])
    reports = [evaluate_libero(VLAEpisodePolicy(p, greedy=True, seed=config.seed), trials=k, tasks=tasks,
                               init_states=inits, name=name).to_dict()
               for p, name in ((untrained, "start"), (trained, f"trained ({config.mode})"))]
    title = f"Held-out evaluation (simulator success, init states {inits[0]}-{inits[-1]}, greedy actions)"
    return title, comparison_markdown(reports), reports


def write_run_summary(trainer, evaluation: tuple[str, str, list[dict]] | None) -> Path:
    """results.md + results.json of a training run: compute ledger, final metrics, held-out table."""
    run_dir = trainer.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = {**machine_info(), "config": trainer.config.to_dict(), "ledger": trainer.ledger.state_dict(),
            "warmup": trainer.warmup}
    (run_dir / "results.json").write_text(json.dumps({"meta": meta, "reports": evaluation[2] if evaluation else []},
                                                     indent=2, default=str))
    totals = trainer.ledger.totals
    total_cpu = trainer.ledger.total_cpu_s()
    lines = [f"# WMRL run `{run_dir.name}` (mode {trainer.config.mode}, {trainer.step} steps)", "",
             "## Compute (from the ledger)", "", "| category | CPU-s | wall-s | count | share of CPU |",
             "|---|---|---|---|---|"]
    for cat, e in totals.items():
        share = e.cpu_s / total_cpu if total_cpu else 0.0
        lines.append(f"| {cat} | {e.cpu_s:.1f} | {e.wall_s:.1f} | {e.count} | {share:.0%} |")
    lines.append(f"| **total** | {total_cpu:.1f} | {trainer.ledger.total_wall_s():.1f} | | |")
    last = trainer.history[-1] if trainer.history else {}
    lines += ["", "## Final training metrics", ""]
    lines += [f"- `{k}`: {v:.4g}" for k, v in sorted(last.items()) if isinstance(v, float)]
    if evaluation:
        lines += ["", f"## {evaluation[0]}", "", evaluation[1]]
    board = ", TensorBoard in `tb/`" if trainer.config.tensorboard else ""
    lines += ["", f"Plots: `reward.png`, `calibration.png`, `cost.png`. Metrics: `metrics.csv`{board}."]
    md = run_dir / "results.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def cmd_eval(args: argparse.Namespace) -> int:
    if args.env == LIBERO_ENV_ID:
        return eval_libero(args)
    from trainers.evaluate import EvalConfig, evaluate, write_reports
    from trainers.policies import responder_from_spec

    config = EvalConfig(env_id=args.env, split=args.split, k=args.k, executor=args.executor,
                        workers=args.workers, task_ids=tuple(args.tasks) if args.tasks else None, seed=args.seed)
    policies = args.policy or "reference:constant,reference:linear,reference:hist_gb"
    reports = [evaluate(responder_from_spec(p, args.seed), p, config) for p in policies.split(",")]
    out = Path(args.out)
    md = write_reports(reports, out, f"Held-out evaluation on {args.env} ({args.split})", machine_info())
    print(md.read_text())
    print(f"wrote {md} and {out / 'results.json'}")
    return 0


def eval_libero(args: argparse.Namespace) -> int:
    """The LIBERO-Long protocol: every task, trial k from init state init_start + k, sim success."""
    from trainers.policies import libero_episode_policy
    from wmrl_envs.libero.evaluate import comparison_markdown, evaluate_libero
    from wmrl_envs.libero.tasks import N_TASKS, task_index

    tasks = [task_index(t) for t in (args.tasks or range(N_TASKS))]
    inits = list(range(args.init_start, args.init_start + args.trials))
    reports = []
    for spec in (args.policy or "scripted").split(","):
        report = evaluate_libero(libero_episode_policy(spec, args.seed), trials=args.trials, tasks=tasks,
                                 init_states=inits, obs_mode=args.obs_mode, name=spec)
        reports.append(report.to_dict())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": machine_info(), "reports": reports}, indent=2))
    steps = [r["simulation_steps"] for r in reports]
    hours = [f"{r['wall_s'] / 3600:.2f}" for r in reports]
    md = out / "results.md"
    md.write_text(f"# LIBERO-Long evaluation ({args.trials} trials per task, init states {inits[0]}-{inits[-1]})\n\n"
                  + comparison_markdown(reports, {"sim steps": steps, "wall h": hours})
                  + "\n\nSuccess is the simulator's success check within 520 steps after 10 wait steps.\n")
    print(md.read_text())
    print(f"wrote {md} and {out / 'results.json'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wmrl", description="WMRL: world-model RL for research agents")
    sub = parser.add_subparsers(dest="command", required=True)

    from wmrl_envs.tasks.cli import add_tasks_parser

    add_tasks_parser(sub)

    tr = sub.add_parser("train", help="post-train a policy with WMRL or a baseline mode")
    from trainers.wmrl_config import WMRLConfig

    add_dataclass_args(tr, WMRLConfig, skip=("env_id",))
    tr.add_argument("--env", dest="env_id", default="wmrl/MLEDojo-v0", help="environment id (default: %(default)s)")
    tr.add_argument("--reward", choices=("real", "world_model", "fused"), default=None,
                    help="reward the env serves; implied by --mode, checked when given")
    tr.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    tr.add_argument("--eval-k", type=int, default=4, help="held-out samples per task after training; 0 skips")
    tr.add_argument("--eval-tasks", nargs="*", help="restrict the held-out evaluation to these task ids")
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser("eval", help="evaluate policies by real execution (code) or simulation (LIBERO)",
                        description="Code envs: avg@k by sandboxed execution against the split's leaderboards. "
                                    "LIBERO-Long: the paper protocol, trial k of every task from init state "
                                    "--init-start + k, success from the simulator (--trials 50 is the full protocol).")
    ev.add_argument("--env", default="wmrl/MLEDojo-v0", help="environment id (default: %(default)s)")
    ev.add_argument("--split", default="heldout", choices=("train", "heldout"), help="task split (code envs)")
    ev.add_argument("--policy", default=None,
                    help="comma-separated. Code envs: reference:<name>, grammar (untrained) or a run folder "
                         "(default: reference:constant,reference:linear,reference:hist_gb). LIBERO-Long: "
                         "scripted[:clean|noisy|sloppy], a MiniVLA run folder or policy.pt (default: scripted)")
    ev.add_argument("-k", type=int, default=4, help="code envs: samples per task, avg@k (default: %(default)s)")
    ev.add_argument("--trials", type=int, default=50,
                    help="LIBERO-Long: episodes per task, one per init state (default: %(default)s, the protocol)")
    ev.add_argument("--init-start", type=int, default=0,
                    help="LIBERO-Long: init state of the first trial (default: %(default)s; 40 = held-out inits)")
    ev.add_argument("--obs-mode", default="state", choices=("state", "pixels", "both"),
                    help="LIBERO-Long: observations the policy sees (default: %(default)s)")
    ev.add_argument("--tasks", nargs="*", help="restrict to these task ids (LIBERO: indices or names)")
    ev.add_argument("--executor", default="bwrap", help="sandbox backend (default: %(default)s)")
    ev.add_argument("--workers", type=int, default=None, help="parallel executions (default: one per core)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", default="runs/eval", help="output folder (default: %(default)s)")
    ev.set_defaults(func=cmd_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except WMRLError as exc:  # user-facing errors: one clear line, no traceback
        print(f"wmrl: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `wmrl tasks list --json | head` closed the pipe: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
