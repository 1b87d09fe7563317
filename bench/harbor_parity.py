"""Harbor's oracle on the exported held-out tasks, and parity of its reward with ``wmrl grade``.

Issue 48: ``wmrl export harbor`` writes each task as a Harbor task; Harbor's own local runner
(``harbor run -a oracle``, its Docker environment) must run every task's reference solution and
record the grader's score, and that score must equal ``wmrl grade``'s for the same submission.

The bench

1. exports a split with the ``wmrl`` command (``wmrl export harbor``; reference solution
   ``hist_gb``, the script ``wmrl eval --policy reference:hist_gb`` runs);
2. builds the two local base images (``wmrl export harbor-images``) on a Docker engine: the one
   ``--docker-host`` names, or a private one it starts (:class:`~wmrl_envs.sandbox.dockerd.PrivateDockerd`)
   whose data stays in ``$WMRL_HOME/harbor-dockerd`` (about 4 GB), so ``--reuse-images`` can skip
   the build next time;
3. runs ``harbor run -p OUT -a oracle`` from Harbor's venv (``scripts/setup_harbor.sh``), one trial
   at a time;
4. for each task reads what Harbor recorded (``verifier_result.rewards``, the exception if any) and
   the submission it carried to the verifier (``artifacts/app/submission.csv``), grades that same
   file with ``wmrl grade``'s function, and runs the same script through the env with
   ``reward="real"`` (WMRL's sandbox) for its reward.

The oracle passes on a task when Harbor recorded a reward, no exception and ``valid`` 1. Parity
holds when Harbor's reward equals ``wmrl grade``'s to 1e-12. Writes
``bench/results/<name>.json`` and ``.md`` (``--name``, default ``harbor_parity``).

    bash scripts/setup_harbor.sh
    python -m bench.harbor_parity                       # the MLE held-out split, about 15 min on 2 cores
    python -m bench.harbor_parity --tasks titanic-survival --name /tmp/harbor_parity_one
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium as gym

from bench.common import write_result
from trainers.cli import main as wmrl_main
from wmrl_envs.integrations.harbor import HarborImages, harbor_reward
from wmrl_envs.integrations.harbor_image import harbor_env, harbor_venv, image_exists
from wmrl_envs.paths import wmrl_home
from wmrl_envs.sandbox.dockerd import PrivateDockerd
from wmrl_envs.tasks import get_task
from wmrl_envs.tasks.cli import grade_report

TOLERANCE = 1e-12


def run_oracle(dataset: Path, jobs: Path, docker_host: str, venv: Path, concurrency: int) -> tuple[Path, float]:
    """``harbor run -a oracle`` over ``dataset``; the job folder and its wall seconds."""
    argv = [str(venv / "bin" / "harbor"), "run", "-p", str(dataset), "-a", "oracle", "-o", str(jobs),
            "-n", str(concurrency), "-y", "-q"]
    started = time.monotonic()
    done = subprocess.run(argv, env=harbor_env(venv, docker_host), capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    (jobs / "harbor-run.log").write_text(done.stdout + done.stderr)
    runs = sorted(p for p in jobs.iterdir() if (p / "result.json").is_file())
    if done.returncode != 0 or not runs:
        output = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"harbor run exited {done.returncode}; its output ends:\n{output}")
    return runs[-1], wall


def trial_record(trial: Path) -> dict[str, Any]:
    """What Harbor recorded for one trial, and ``wmrl grade`` of the submission it carried."""
    result = json.loads((trial / "result.json").read_text())
    task_id = result["task_name"].split("/", 1)[1]
    rewards = (result.get("verifier_result") or {}).get("rewards")
    exception = result.get("exception_info")
    submission = trial / "artifacts" / "app" / "submission.csv"
    report, _ = grade_report(get_task(task_id), submission)
    wmrl = harbor_reward(report)
    harbor = rewards["reward"] if rewards else None
    return {
        "task": task_id,
        "harbor_reward": harbor,
        "harbor_valid": rewards.get("valid") if rewards else None,
        "harbor_exception": (exception or {}).get("exception_type"),
        "submission_carried": submission.is_file(),
        "wmrl_grade_reward": wmrl["reward"],
        "wmrl_grade_valid": wmrl["valid"],
        "raw_score": report["raw_score"],
        "parity": harbor is not None and abs(harbor - wmrl["reward"]) <= TOLERANCE,
        "oracle_passed": rewards is not None and exception is None and rewards.get("valid") == 1,
        "trial_s": _seconds(result.get("started_at"), result.get("finished_at")),
    }


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def env_rewards(split: str, dataset: Path, task_ids: list[str]) -> dict[str, float]:
    """The env's real reward (WMRL's own sandbox) of each exported task's solution script."""
    env = gym.make(get_task(task_ids[0]).spec.env_id, reward="real", split=split, task_ids=task_ids)
    rewards = {}
    try:
        for task_id in task_ids:
            script = (dataset / task_id / "solution" / "solution.py").read_text()
            env.reset(options={"task_id": task_id, "group_id": task_id})
            _, reward, *_ = env.step(f"The exported reference solution.\n\n```python\n{script}```\n")
            rewards[task_id] = float(reward)
    finally:
        env.close()
    return rewards


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"# Harbor oracle and reward parity ({args.suite} {args.split}, {summary['tasks']} tasks)", "",
             f"`wmrl export harbor --suite {args.suite} --split {args.split}` (reference solution `hist_gb`), then "
             f"`harbor run -a oracle` (harbor {summary['harbor_version']}, Docker environment, offline base images "
             "from `wmrl export harbor-images`). Harbor's reward is what its verifier recorded; `wmrl grade` grades "
             "the submission Harbor carried to the verifier; the env's reward runs the same script in WMRL's sandbox "
             "(`reward=\"real\"`).", "",
             f"- **Oracle passed: {summary['oracle_passed']} of {summary['tasks']} tasks** "
             f"({summary['oracle_pass_rate']:.0%}): a reward recorded, no exception, a valid submission.",
             f"- **Parity with `wmrl grade`: {summary['parity']} of {summary['tasks']}** "
             f"(|difference| <= {TOLERANCE:g}).",
             f"- Equal to the env's real reward: {summary['env_equal']} of {summary['tasks']}.",
             f"- Harbor's run: {summary['harbor_wall_s']:.0f} s wall, {args.concurrency} trial(s) at a time; "
             f"image build "
             f"{summary['image_build_s']:.0f} s.", "",
             "| task | Harbor reward | `wmrl grade` | parity | env (sandbox) | valid | trial s |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        harbor = "-" if row["harbor_reward"] is None else f"{row['harbor_reward']:.6f}"
        trial = "-" if row["trial_s"] is None else f"{row['trial_s']:.0f}"
        parity = "yes" if row["parity"] else "NO"
        lines.append(f"| {row['task']} | {harbor} | {row['wmrl_grade_reward']:.6f} | {parity} "
                     f"| {row['env_reward']:.6f} | {row['harbor_valid']} | {trial} |")
    failed = [row for row in rows if not row["oracle_passed"]]
    if failed:
        lines += ["", "Failed: " + ", ".join(f"{r['task']} ({r['harbor_exception'] or 'no reward'})" for r in failed)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="mle", choices=("mle", "dsbench"))
    parser.add_argument("--split", default="heldout", choices=("train", "heldout"))
    parser.add_argument("--tasks", nargs="*", help="only these task ids (default: the whole split)")
    parser.add_argument("--docker-host", default=None, help="a running engine (default: start a private dockerd)")
    parser.add_argument("--reuse-images", action="store_true",
                        help="keep base images the engine already has instead of rebuilding them from this checkout")
    parser.add_argument("--concurrency", type=int, default=1, help="Harbor's concurrent trials (default: %(default)s)")
    parser.add_argument("--name", default="harbor_parity")
    args = parser.parse_args()

    venv = harbor_venv()
    if not (venv / "bin" / "harbor").exists():
        raise SystemExit(f"no Harbor at {venv}: run `bash scripts/setup_harbor.sh`")
    version = subprocess.run([str(venv / "bin" / "harbor"), "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="wmrl-harbor-parity-") as scratch, contextlib.ExitStack() as stack:
        dataset, jobs = Path(scratch) / "dataset", Path(scratch) / "jobs"
        jobs.mkdir()
        export = ["export", "harbor", "--suite", args.suite, "--split", args.split, str(dataset)]
        if wmrl_main(export + (["--tasks", *args.tasks] if args.tasks else [])) != 0:
            raise SystemExit("wmrl export harbor failed")
        exported = sorted(p.name for p in dataset.iterdir())
        # A private engine keeps its images under WMRL_HOME, so --reuse-images works across runs.
        host = args.docker_host or stack.enter_context(PrivateDockerd(wmrl_home() / "harbor-dockerd")).host
        started = time.monotonic()
        images = HarborImages()
        images_present = image_exists(images.agent, host) and image_exists(images.grader, host)
        if not (args.reuse_images and images_present) and wmrl_main(["export", "harbor-images", "--docker-host",
                                                                     host]) != 0:
            raise SystemExit("wmrl export harbor-images failed")
        build_s = time.monotonic() - started
        job, harbor_wall = run_oracle(dataset, jobs, host, venv, args.concurrency)
        rows = sorted((trial_record(t) for t in job.iterdir() if (t / "result.json").is_file()),
                      key=lambda row: row["task"])
        env = env_rewards(args.split, dataset, [row["task"] for row in rows])
        for row in rows:
            row["env_reward"] = env[row["task"]]
            harbor = row["harbor_reward"]
            row["env_equal"] = harbor is not None and abs(harbor - row["env_reward"]) <= TOLERANCE
    summary = {"tasks": len(exported), "trials": len(rows), "harbor_version": version,
               "oracle_passed": sum(r["oracle_passed"] for r in rows),
               "oracle_pass_rate": sum(r["oracle_passed"] for r in rows) / len(exported),
               "parity": sum(r["parity"] for r in rows), "env_equal": sum(r["env_equal"] for r in rows),
               "harbor_wall_s": harbor_wall, "image_build_s": build_s}
    config = {**vars(args), "solution": "hist_gb", "tolerance": TOLERANCE}
    print(write_result(args.name, __spec__.name, {"config": config, "summary": summary, "rows": rows},
                       markdown(rows, summary, args)).read_text())


if __name__ == "__main__":
    main()
