"""Success of the scripted (privileged-state) controller on every LIBERO-Long task.

The controller is the demonstration source for behaviour cloning, so its per-task success
bounds what BC can learn. Trial ``k`` starts from init state ``k`` of the task.

    python -m bench.libero_scripted [--trials 10] [--save data/libero/scripted.npz]

Writes ``bench/results/libero_scripted.json`` and ``.md``.
"""

from __future__ import annotations

import argparse

from bench.common import setup_threads, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="episodes per task (init states 0..trials-1)")
    parser.add_argument("--tasks", type=int, nargs="*", default=list(range(10)))
    parser.add_argument("--save", default=None, help="also save every episode's trajectory to this .npz")
    parser.add_argument("--name", default="libero_scripted",
                        help="results file bench/results/<name>.{json,md} (the BC data set: libero_scripted_train)")
    args = parser.parse_args()
    setup_threads()

    from wmrl_envs.libero.evaluate import evaluate_libero
    from wmrl_envs.libero.scripted import ScriptedPolicy
    from wmrl_envs.libero.trajectory import save_trajectories

    report = evaluate_libero(ScriptedPolicy(), trials=args.trials, tasks=args.tasks, name="scripted",
                             keep_trajectories=args.save is not None)
    if args.save:
        save_trajectories(args.save, report.trajectories)
    md = (f"### Scripted controller on LIBERO-Long (privileged state)\n\n{report.to_markdown()}\n\n"
          f"{report.simulation_steps} simulator steps, {report.simulation_s:.0f} s of simulation, "
          f"{report.wall_s:.0f} s wall.")
    print(write_result(args.name, __spec__.name, {"config": vars(args), **report.to_dict()}, md).read_text())


if __name__ == "__main__":
    main()
