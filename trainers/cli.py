"""The ``wmrl`` command line.

::

    wmrl tasks build|list|show ...          # the built-in task suites
    wmrl eval --split heldout --policy reference:hist_gb,reference:linear -k 4
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from wmrl_envs.errors import WMRLError


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


def _responder(spec: str):
    """Turn a ``--policy`` item into a responder: ``reference:<name>`` or a policy checkpoint."""
    kind, _, arg = spec.partition(":")
    if kind == "reference":
        from agents.code.grammar import reference_responder

        return reference_responder(arg)
    from agents.code.checkpoint import responder_from_spec  # lazy: needs torch

    return responder_from_spec(spec)


def cmd_eval(args: argparse.Namespace) -> int:
    from trainers.evaluate import EvalConfig, evaluate, write_reports

    config = EvalConfig(env_id=args.env, split=args.split, k=args.k, executor=args.executor,
                        workers=args.workers, task_ids=tuple(args.tasks) if args.tasks else None, seed=args.seed)
    reports = [evaluate(_responder(p), p, config) for p in args.policy.split(",")]
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

    ev = sub.add_parser("eval", help="evaluate policies by real execution on a task split")
    ev.add_argument("--env", default="wmrl/MLEDojo-v0", help="environment id (default: %(default)s)")
    ev.add_argument("--split", default="heldout", choices=("train", "heldout"))
    ev.add_argument("--policy", default="reference:constant,reference:linear,reference:hist_gb",
                    help="comma-separated: reference:<name> or a checkpoint path (default: %(default)s)")
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


if __name__ == "__main__":
    sys.exit(main())
