"""The ``wmrl`` command line.

::

    wmrl tasks build|list|show ...          # the built-in task suites
    wmrl eval --split heldout --policy reference:hist_gb,reference:linear -k 4
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from wmrl_envs.errors import ConfigError, WMRLError


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
    from trainers.adapters import CodeTaskAdapter
    from trainers.policies import make_policy
    from trainers.wmrl import WMRLTrainer
    from trainers.wmrl_config import WMRLConfig

    names = {f.name for f in dataclasses.fields(WMRLConfig)}
    config = WMRLConfig(**{k: v for k, v in vars(args).items() if k in names})
    expected = MODE_REWARD.get(config.mode, "fused")
    if args.reward is not None and args.reward != expected:
        raise ConfigError(f"--mode {config.mode} trains on reward={expected!r}, not {args.reward!r}")
    policy = make_policy(config.policy, seed=config.seed)
    adapter = CodeTaskAdapter(config.env_id, config.split, config.task_ids, config.executor, config.workers,
                              config.world_model)
    trainer = WMRLTrainer(config, policy, adapter)
    if args.resume and trainer.resume():
        print(f"resumed {config.output_dir} at step {trainer.step}")
    try:
        trainer.train()
    finally:
        adapter.close()
    from trainers.plots import write_plots

    write_plots(trainer.run_dir, trainer.history, trainer.calibrator.state_dict(), trainer.ledger.totals)
    reports = []
    if args.eval_k > 0:
        from trainers.evaluate import EvalConfig, evaluate
        from trainers.policies import policy_responder

        eval_config = EvalConfig(env_id=config.env_id, split="heldout", k=args.eval_k, executor=config.executor,
                                 workers=config.workers, seed=config.seed,
                                 task_ids=tuple(args.eval_tasks) if args.eval_tasks else None)
        untrained = make_policy(config.policy, seed=config.seed)
        reports = [evaluate(policy_responder(untrained, config.seed), "untrained", eval_config),
                   evaluate(policy_responder(trainer.policy, config.seed), f"trained ({config.mode})", eval_config)]
    md = write_run_summary(trainer, reports)
    print(md.read_text())
    return 0


def write_run_summary(trainer, reports) -> Path:
    """results.md + results.json of a training run: compute ledger, final metrics, held-out table."""
    from trainers.evaluate import markdown_table, write_reports

    run_dir = trainer.run_dir
    write_reports(reports, run_dir, "held-out", {**machine_info(), "config": trainer.config.to_dict(),
                                                 "ledger": trainer.ledger.state_dict(), "warmup": trainer.warmup})
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
    if reports:
        lines += ["", f"## Held-out evaluation (real execution, avg@{reports[0].config.k})", "",
                  markdown_table(reports)]
    lines += ["", "Plots: `reward.png`, `calibration.png`, `cost.png`. Metrics: `metrics.csv`, TensorBoard in `tb/`."]
    md = run_dir / "results.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def cmd_eval(args: argparse.Namespace) -> int:
    from trainers.evaluate import EvalConfig, evaluate, write_reports
    from trainers.policies import responder_from_spec

    config = EvalConfig(env_id=args.env, split=args.split, k=args.k, executor=args.executor,
                        workers=args.workers, task_ids=tuple(args.tasks) if args.tasks else None, seed=args.seed)
    reports = [evaluate(responder_from_spec(p, args.seed), p, config) for p in args.policy.split(",")]
    out = Path(args.out)
    md = write_reports(reports, out, f"Held-out evaluation on {args.env} ({args.split})", machine_info())
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

    ev = sub.add_parser("eval", help="evaluate policies by real execution on a task split")
    ev.add_argument("--env", default="wmrl/MLEDojo-v0", help="environment id (default: %(default)s)")
    ev.add_argument("--split", default="heldout", choices=("train", "heldout"))
    ev.add_argument("--policy", default="reference:constant,reference:linear,reference:hist_gb",
                    help="comma-separated: reference:<name>, grammar (untrained) or a run folder (default: %(default)s)")
    ev.add_argument("-k", type=int, default=4, help="samples per task, avg@k (default: %(default)s)")
    ev.add_argument("--tasks", nargs="*", help="restrict to these task ids")
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
