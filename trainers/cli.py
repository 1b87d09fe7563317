"""The ``wmrl`` command line.

::

    wmrl tasks build|list|show ...          # the built-in task suites
    wmrl grade --task titanic-survival submission.csv [--json]
    wmrl train --env wmrl/MLEDojo-v0 --mode wmrl --policy grammar ...
    wmrl train --env wmrl/LIBERO-Long-v0 --mode wmrl --policy vla --policy-path runs/libero/bc/policy.pt ...
    wmrl eval --split heldout --policy reference:hist_gb,reference:linear -k 4
    wmrl eval --env wmrl/LIBERO-Long-v0 --trials 50 --policy scripted,runs/libero/bc
    wmrl serve --env wmrl/MLEDojo-v0 --reward fused --port 8000 --max-sessions 4
    wmrl export harbor --suite mle --split heldout datasets/wmrl-mle
    wmrl export harbor-images [--docker-host unix:///path/docker.sock]
    wmrl export openenv-image [--docker-host unix:///path/docker.sock]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from agents.code.grammar import REFERENCE_SOLUTIONS, render_script
from trainers.evaluate import DEFAULT_MAX_INFRA_SHARE
from trainers.families import get_family
from trainers.plots import write_plots
from trainers.wmrl_config import GROUPS, PRESETS, WMRLConfig, flat_fields
from wmrl_envs.errors import ConfigError, WMRLError
from wmrl_envs.extras import requires_extra
from wmrl_envs.integrations.harbor import (
    DEFAULT_AGENT_IMAGE,
    DEFAULT_GRADER_IMAGE,
    NETWORK_CHOICES,
    HarborImages,
    export_tasks,
)
from wmrl_envs.integrations.harbor_image import build_images, checkout_root
from wmrl_envs.integrations.openenv_image import DEFAULT_SPACE_BASE_IMAGE, build_space_base_image
from wmrl_envs.provenance import provenance
from wmrl_envs.sandbox import DEFAULT_EXECUTOR, EXECUTOR_HELP
from wmrl_envs.tasks import SPLIT_CHOICES, SPLITS, list_tasks
from wmrl_envs.tasks.cli import add_grade_parser, add_tasks_parser
from wmrl_envs.world_models.base import DEFAULT_WORLD_MODEL


class DeprecatedAlias(argparse.Action):
    """An old flag spelling that still works and says which flag replaces it."""

    def __init__(self, *args, new_flag: str, **kwargs) -> None:
        self.new_flag = new_flag
        super().__init__(*args, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"wmrl: warning: {option_string} is deprecated and will be removed in the next release; "
              f"use {self.new_flag}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_field_arg(parser: argparse.ArgumentParser, f: dataclasses.Field, flag_name: str) -> None:
    """One ``--flag-name`` option for a dataclass field, typed from its default, help from metadata."""
    flag = "--" + flag_name.replace("_", "-")
    help_text = f.metadata.get("help", "") + " (default: %(default)s)"
    default = f.default if f.default is not dataclasses.MISSING else None
    if isinstance(default, bool):
        parser.add_argument(flag, dest=flag_name, action=argparse.BooleanOptionalAction, default=default,
                            help=help_text)
    elif f.name == "task_ids":
        # One name for a task list in every command; the old spelling still works for a release.
        parser.add_argument("--tasks", dest=flag_name, nargs="*", default=None, help=help_text)
        parser.add_argument(flag, dest=flag_name, nargs="*", action=DeprecatedAlias, new_flag="--tasks",
                            help=argparse.SUPPRESS)
    else:
        text = str(f.type)
        kind = type(default) if default is not None else (
            float if "float" in text else int if "int" in text else str)
        parser.add_argument(flag, dest=flag_name, type=kind, default=default, help=help_text)


def add_config_args(parser: argparse.ArgumentParser) -> None:
    """Flags for every :class:`~trainers.wmrl_config.WMRLConfig` field: run-level, then each group's."""
    for f in dataclasses.fields(WMRLConfig):
        if f.name not in GROUPS:
            add_field_arg(parser, f, f.name)
    for name, (_, f) in flat_fields().items():
        if name != "env_id":
            add_field_arg(parser, f, name)


def cmd_train(args: argparse.Namespace) -> int:
    with requires_extra("torch", "wmrl train"):
        from trainers.policies import make_policy  # noqa: PLC0415 - torch is the optional [torch] extra; requires_extra names it
        from trainers.wmrl import WMRLTrainer  # noqa: PLC0415 - torch is the optional [torch] extra; requires_extra names it

    names = set(flat_fields()) | {f.name for f in dataclasses.fields(WMRLConfig) if f.name not in GROUPS}
    config = WMRLConfig.from_flat(**{k: v for k, v in vars(args).items() if k in names})
    family = config.family
    profile = get_family(family.env_id)
    if profile.check_train is not None:
        profile.check_train(config, args.eval_k)
    policy = make_policy(family.policy, seed=config.seed, path=family.policy_path)
    adapter = profile.make_adapter(config)
    trainer = WMRLTrainer(config, policy, adapter)
    if args.resume and trainer.resume():
        print(f"resumed {config.output_dir} at step {trainer.step}")
    try:
        with heap_frozen():
            trainer.train()
    finally:
        adapter.close()
        trainer.core.close()

    write_plots(trainer.run_dir, trainer.history, trainer.calibrator.state_dict(), trainer.ledger.totals)
    evaluation = None
    if args.eval_k > 0:
        untrained = make_policy(family.policy, seed=config.seed, path=family.policy_path)
        evaluation = profile.heldout(config, untrained, trainer.policy, args.eval_k, args.eval_tasks)
    md = write_run_summary(trainer, evaluation)
    print(md.read_text())
    return 0


@contextmanager
def heap_frozen() -> Iterator[None]:
    """Leave the objects alive now out of the garbage collector's walks until the block ends.

    They live as long as the run (the policy, the libraries, the tasks), while scoring builds and
    drops thousands of syntax trees a step, and each full collection walked every one of them again:
    the main job's world-model CPU is 0.86 of what it was without this
    (``bench/results/world_model_cpu_main_job.md``). Unfrozen after, so that a process that trains
    more than once (a test session) can collect them then.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def write_run_summary(trainer, evaluation: tuple[str, str, list[dict]] | None) -> Path:
    """results.md + results.json of a training run: compute ledger, final metrics, held-out table."""
    run_dir = trainer.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = {**provenance(), "config": trainer.config.to_dict(), "ledger": trainer.ledger.state_dict(),
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
    with requires_extra("torch", "wmrl eval"):  # every family's module imports torch
        profile = get_family(args.env)
    return profile.evaluate(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from wmrl_envs.integrations.openenv import serve  # noqa: PLC0415 - the optional [openenv] extra (fastapi, uvicorn), for wmrl serve only

    serve(args.env, host=args.host, port=args.port, max_sessions=args.max_sessions, reward=args.reward,
          split=args.split, task_ids=args.tasks, max_turns=args.max_turns, executor=args.executor,
          workers=args.workers, world_model=args.world_model, anchor_fraction=args.anchor_fraction,
          anchor_seed=args.anchor_seed, **({"fusion_rule": args.fusion_rule} if args.fusion_rule else {}))
    return 0


def cmd_export_harbor(args: argparse.Namespace) -> int:
    tasks = [t for t in list_tasks(suite=args.suite, split=args.split) if not args.tasks or t.id in args.tasks]
    missing = sorted(set(args.tasks or ()) - {t.id for t in tasks})
    if missing or not tasks:
        raise ConfigError(f"no {args.suite} {args.split} task(s) {missing or ''}".rstrip())
    choices = REFERENCE_SOLUTIONS[args.solution]
    folders = export_tasks(tasks, Path(args.out), lambda task: render_script(task.spec, choices, seed=0),
                           HarborImages(args.agent_image, args.grader_image), args.network)
    print(f"wrote {len(folders)} Harbor task(s) to {args.out}; run them with `harbor run -p {args.out} -a oracle` "
          f"once the images {args.agent_image} and {args.grader_image} exist (wmrl export harbor-images)")
    return 0


def cmd_export_harbor_images(args: argparse.Namespace) -> int:
    images = build_images(Path(args.source) if args.source else checkout_root(), args.docker_host,
                          HarborImages(args.agent_image, args.grader_image))
    print(f"built {images.agent} and {images.grader}")
    return 0


def cmd_export_openenv_image(args: argparse.Namespace) -> int:
    source = Path(args.source) if args.source else checkout_root()
    build_space_base_image(args.tag, source, args.docker_host, agent=args.agent_image)
    print(f"built {args.tag}; build the Space on it with "
          f"`docker build -f environments/wmrl_code/server/Dockerfile environments/wmrl_code`")
    return 0


def add_export_parser(sub) -> None:
    """``wmrl export harbor`` (task folders), ``wmrl export harbor-images`` (their local base images)
    and ``wmrl export openenv-image`` (the OpenEnv Space's base image)."""
    export = sub.add_parser("export", help="write tasks in another stack's format (Harbor), or build the local "
                                           "base images of Harbor tasks and of the OpenEnv Space")
    kinds = export.add_subparsers(dest="export_command", required=True)
    harbor = kinds.add_parser("harbor", help="write each task as a Harbor task folder (docs/hubs.md)",
                              description="Each task: instruction.md, task.toml, environment/ (public files only), "
                                          "tests/ (the grader and the private answers, in the verifier's own image) "
                                          "and solution/ (a reference solution script). Real execution only.")
    harbor.add_argument("out", help="the dataset folder to write (one folder per task)")
    harbor.add_argument("--suite", default="mle", choices=("mle", "dsbench"),
                        help="built-in suite (default: %(default)s)")
    harbor.add_argument("--split", default="heldout", choices=SPLITS, help="task split (default: %(default)s)")
    harbor.add_argument("--tasks", nargs="*", help="only these task ids")
    harbor.add_argument("--network", default="compose", choices=NETWORK_CHOICES,
                        help="how a task goes without network: compose (network_mode none in a docker-compose.yaml, "
                             "offline) or harbor (task.toml's no-network; Harbor's sidecar needs Docker Hub) "
                             "(default: %(default)s)")
    harbor.add_argument("--solution", default="hist_gb", choices=sorted(REFERENCE_SOLUTIONS),
                        help="the reference solution solve.sh runs (the grammar's, as reference:<name>; "
                             "default: %(default)s)")
    images = kinds.add_parser("harbor-images", help="build the exported tasks' two base images offline from this host",
                              description="docker import of this host's userland and agent runtime (the agent image), "
                                          "then that plus a venv with this WMRL checkout (the grader image).")
    images.add_argument("--docker-host", default=None, help="the engine's address (default: the docker CLI's)")
    images.add_argument("--source", default=None, help="the WMRL checkout the grader installs (default: this one)")
    for parser in (harbor, images):
        parser.add_argument("--agent-image", default=DEFAULT_AGENT_IMAGE, help="(default: %(default)s)")
        parser.add_argument("--grader-image", default=DEFAULT_GRADER_IMAGE, help="(default: %(default)s)")
    harbor.set_defaults(func=cmd_export_harbor)
    images.set_defaults(func=cmd_export_harbor_images)
    space = kinds.add_parser("openenv-image", help="build the OpenEnv Space's base image offline from this host",
                             description="The Harbor agent image (this host's userland and agent runtime) plus a venv "
                                         "with this WMRL checkout and its openenv extra, and the built-in tasks: "
                                         "the base environments/wmrl_code/server/Dockerfile builds on (docs/hubs.md).")
    space.add_argument("--docker-host", default=None, help="the engine's address (default: the docker CLI's)")
    space.add_argument("--source", default=None, help="the WMRL checkout the image installs (default: this one)")
    space.add_argument("--tag", default=DEFAULT_SPACE_BASE_IMAGE, help="(default: %(default)s)")
    space.add_argument("--agent-image", default=None,
                       help="an agent image already built (wmrl export harbor-images) to build on; "
                            "default: build one as TAG-agent")
    space.set_defaults(func=cmd_export_openenv_image)


def build_parser(preset: str | None = None) -> argparse.ArgumentParser:
    """The ``wmrl`` parser; ``preset`` names a :data:`~trainers.wmrl_config.PRESETS` entry whose
    settings become ``wmrl train``'s defaults, so explicit flags still override them."""
    parser = argparse.ArgumentParser(prog="wmrl", description="WMRL: world-model RL for research agents")
    sub = parser.add_subparsers(dest="command", required=True)

    add_tasks_parser(sub)
    add_grade_parser(sub)

    tr = sub.add_parser("train", help="post-train a policy with WMRL or a baseline mode")
    add_config_args(tr)
    tr.add_argument("--preset", choices=sorted(PRESETS), default=preset,
                    help="start from a named set of settings, e.g. paper: the reference release's corrections "
                         "(docs/robustness.md lists what differs); explicit flags override it")
    if preset is not None:
        tr.set_defaults(**PRESETS[preset])
    tr.add_argument("--env", dest="env_id", default="wmrl/MLEDojo-v0", help="environment id (default: %(default)s)")
    tr.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    tr.add_argument("--eval-k", type=int, default=4, help="held-out samples per task after training; 0 skips")
    tr.add_argument("--eval-tasks", nargs="*", help="restrict the held-out evaluation to these task ids")
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser("eval", help="evaluate policies by real execution (code) or simulation (LIBERO)",
                        description="Code envs: avg@k by sandboxed execution against the split's leaderboards. "
                                    "LIBERO-Long: the paper protocol, trial k of every task from init state "
                                    "--init-start + k, success from the simulator (--trials 50 is the full protocol).")
    ev.add_argument("--env", default="wmrl/MLEDojo-v0", help="environment id (default: %(default)s)")
    ev.add_argument("--split", default="heldout", choices=SPLIT_CHOICES,
                    help="task split (code envs; lite: the held-out tasks of the lite selection)")
    ev.add_argument("--policy", default=None,
                    help="comma-separated. Code envs: reference:<name>, grammar (untrained) or a run folder "
                         "(default: reference:constant,reference:linear,reference:hist_gb). LIBERO-Long: "
                         "scripted[:clean|noisy|sloppy], a MiniVLA run folder or policy.pt (default: scripted)")
    ev.add_argument("-k", type=int, default=4, help="code envs: samples per task, avg@k (default: %(default)s)")
    ev.add_argument("--trials", type=int, default=50,
                    help="LIBERO-Long: episodes per task, one per init state (default: %(default)s, the protocol)")
    ev.add_argument("--init-start", type=int, default=0,
                    help="LIBERO-Long: init state of the first trial (default: %(default)s; 40 = held-out inits; "
                         "1000 and up = sampled placements, in no LIBERO file)")
    ev.add_argument("--obs-mode", default="state", choices=("state", "pixels", "both"),
                    help="LIBERO-Long: observations the policy sees (default: %(default)s)")
    ev.add_argument("--tasks", nargs="*", help="restrict to these task ids (LIBERO: indices or names)")
    ev.add_argument("--executor", default=DEFAULT_EXECUTOR, help=EXECUTOR_HELP)
    ev.add_argument("--workers", type=int, default=None, help="parallel executions (default: one per core)")
    ev.add_argument("--max-infra-share", type=float, default=DEFAULT_MAX_INFRA_SHARE,
                    help="code envs: the largest share of a task's samples that may fail for infrastructure reasons "
                         "(left out of its mean); more stops the evaluation with an error (default: %(default)s)")
    ev.add_argument("--sim-workers", type=int, default=1,
                    help="LIBERO-Long: simulation workers the episodes are spread over (default: %(default)s, this "
                         "process; with --executor ray, Ray actors)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", default="runs/eval", help="output folder (default: %(default)s)")
    ev.set_defaults(func=cmd_eval)

    sv = sub.add_parser("serve", help="serve a code env to OpenEnv clients (needs the openenv extra)",
                        description="An OpenEnv server: concurrent sessions over one env id, all scored by one "
                                    "shared scoring core (one calibrator). Clients: "
                                    "openenv.GenericEnvClient(base_url=URL).sync(); see docs/examples/openenv_example.py.")
    sv.add_argument("--env", default="wmrl/MLEDojo-v0", help="code environment id (default: %(default)s)")
    # The env checks the mode (wmrl_envs.scoring.REWARD_MODES) before the server starts; importing the
    # scoring core here would slow down every `wmrl` command's parser.
    sv.add_argument("--reward", default="fused", help="reward mode: real, world_model or fused (default: %(default)s)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to bind (default: %(default)s; clients run code in this machine's sandbox)")
    sv.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    sv.add_argument("--max-sessions", type=int, default=4, help="concurrent sessions (default: %(default)s)")
    sv.add_argument("--split", default="train", choices=SPLITS,
                    help="tasks a reset without task_id draws from (default: %(default)s)")
    sv.add_argument("--tasks", nargs="*", help="restrict that pool to these task ids")
    sv.add_argument("--max-turns", type=int, default=1, help="responses per episode (default: %(default)s)")
    sv.add_argument("--executor", default=DEFAULT_EXECUTOR, help=EXECUTOR_HELP)
    sv.add_argument("--workers", type=int, default=None, help="parallel executions (default: one per core)")
    sv.add_argument("--world-model", default=DEFAULT_WORLD_MODEL, help="world model name (default: %(default)s)")
    sv.add_argument("--anchor-fraction", type=float, default=0.1,
                    help="fused: share of anchor groups (default: %(default)s)")
    sv.add_argument("--anchor-seed", type=int, default=0, help="fused: seed of the anchor hash (default: %(default)s)")
    sv.add_argument("--fusion-rule", help="fused: the anchor-weight rule, none, eta2, sampling or paper "
                                          "(default: the env's, none)")
    sv.set_defaults(func=cmd_serve)
    add_export_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--preset", choices=sorted(PRESETS))
    known, _ = first.parse_known_args(sys.argv[1:] if argv is None else argv)
    args = build_parser(known.preset).parse_args(argv)
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
