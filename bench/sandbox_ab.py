"""The warm executor's CPU per median corpus run in two checkouts, side by side.

Each round runs, in one checkout and then the other (alternating which goes first), a fresh
process that starts the warm executor, runs the median corpus script once to warm it, and then
``--runs`` times, measuring the CPU-seconds of its whole process tree (zygote, supervisors and
runs included) as ``bench/sandbox_overhead.py`` does. Reports mean ± SE per run over all runs, and
the ratio. Used to check that a sandbox change costs no CPU (issue 51)::

    git worktree add /tmp/before <commit>
    python -m bench.sandbox_ab --before /tmp/before --after . [--rounds 4] [--runs 5]

Writes ``bench/results/<name>.json`` and ``.md`` (``--name``, default ``sandbox_ab``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import mean_se, write_result

# Run inside the checkout under test: its own wmrl_envs and its own bench.sandbox_overhead.
MEASURE = """
import json, sys
from bench.sandbox_overhead import TreeCpu, warm_scripts
from wmrl_envs.sandbox import ExecutionStatus, make_executor
with TreeCpu() as tree:
    scripts, task, _ = warm_scripts()
    executor = make_executor("warm")
    assert executor.run(scripts["median_corpus"], task).status is ExecutionStatus.OK
    cpu = []
    for _ in range(int(sys.argv[1])):
        before = tree.usage()
        result = executor.run(scripts["median_corpus"], task)
        assert result.status is ExecutionStatus.OK, result
        cpu.append(tree.usage() - before)
    executor.close()
print(json.dumps(cpu))
"""


def measure(checkout: Path, runs: int) -> list[float]:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(runs)], cwd=checkout, check=True,
                          capture_output=True, text=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the baseline")
    parser.add_argument("--after", type=Path, default=Path("."), help="checkout of the change")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5, help="measured runs per process")
    parser.add_argument("--name", default="sandbox_ab")
    args = parser.parse_args(argv)
    cpu: dict[str, list[float]] = {"before": [], "after": []}
    for round_index in range(args.rounds):
        order = ["before", "after"] if round_index % 2 == 0 else ["after", "before"]
        for side in order:
            cpu[side] += measure(getattr(args, side).resolve(), args.runs)
    stats = {side: dict(zip(("mean", "se"), mean_se(values)), n=len(values)) for side, values in cpu.items()}
    ratio = stats["after"]["mean"] / stats["before"]["mean"]
    lines = ["| checkout | CPU-s per median corpus run (mean ± SE) | runs |", "|---|---|---|"]
    for side, s in stats.items():
        lines.append(f"| {side} (`{getattr(args, side)}`) | {s['mean']:.3f} ± {s['se']:.3f} | {s['n']} |")
    lines += ["", f"after / before: {ratio:.3f}"]
    config = vars(args) | {"before": str(args.before), "after": str(args.after)}
    write_result(args.name, __spec__.name, {"cpu_s": cpu, "stats": stats, "ratio": ratio, "config": config},
                 "\n".join(lines))


if __name__ == "__main__":
    main()
