"""The surrogate world model's CPU a script, in a scorer's order, and a digest of what it answers.

A scorer proves a batch's scripts, then the surrogate predicts the batch (it asks the same shared
prover, a cache hit, then reads the features and the status head). This bench does that on fresh
grammar scripts of the MLE train tasks (in-sample: the world model was fitted on these tasks), and
prints the CPU a script and a digest of the keys, proofs, features and predictions, so that two
commits can be compared for speed and for identical answers:

    python -m bench.world_model_cpu                      # this checkout
    PYTHONPATH=/path/to/worktree python bench/world_model_cpu.py   # another commit's code

It imports nothing from ``bench``, so the second form runs another commit's world model. Run the
two one at a time on an idle machine, and alternate them: the machine's speed drifts between runs.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import time

#: A scorer's batch in the main job: 8 tasks of 4 scripts.
BATCH = 32


def fresh_scripts(n: int, seed: int) -> list[tuple[object, str]]:
    """``n`` (task, script) pairs the untrained grammar policy writes for the MLE train tasks."""
    import torch

    from trainers.evaluate import select_tasks
    from trainers.policies import make_policy
    from wmrl_envs.scoring.code import extract_code

    tasks = select_tasks("wmrl/MLEDojo-v0", "mle", "train", None)
    prompts = [tasks[i % len(tasks)] for i in range(-(-n // 4))]
    rollouts = make_policy("grammar", seed=seed).generate(prompts, 4, list(range(len(prompts))),
                                                          torch.Generator().manual_seed(seed))
    return [(prompts[i // 4], extract_code(str(r.response))) for i, r in enumerate(rollouts)][:n]


def score(pairs: list[tuple[object, str]]) -> tuple[float, dict[str, str]]:
    """CPU-seconds a script of proving and predicting, batch by batch, and the answers' digests."""
    from wmrl_envs.analysis.proofs import shared_prover
    from wmrl_envs.analysis.script import code_key, shape_key
    from wmrl_envs.world_models.surrogate import SurrogateWorldModel

    model, prover = SurrogateWorldModel.load(), shared_prover()
    digests = {name: hashlib.sha256() for name in ("keys", "proofs", "predictions")}
    spent = 0.0
    for start in range(0, len(pairs), BATCH):
        batch = pairs[start:start + BATCH]
        started = time.process_time()
        proofs = [prover.prove(task, script) for task, script in batch]
        predictions = model.predict([task for task, _ in batch], [script for _, script in batch])
        keys = [(code_key(script), shape_key(script)) for _, script in batch]  # as the reuse lookups key
        spent += time.process_time() - started
        digests["keys"].update(repr(keys).encode())
        digests["proofs"].update(repr(proofs).encode())
        for prediction in predictions:
            answer = {k: v for k, v in dataclasses.asdict(prediction).items() if k not in ("cost_s", "cpu_s")}
            digests["predictions"].update(repr(sorted(answer.items())).encode())
    return spent / len(pairs), {name: d.hexdigest()[:16] for name, d in digests.items()}


def features_digest(pairs: list[tuple[object, str]]) -> str:
    """A digest of every script's analysis: features, folded program, embedding text and read sets."""
    from wmrl_envs.analysis.code_features import analyse_script

    digest = hashlib.sha256()
    for _, script in pairs:
        a = analyse_script(script)
        digest.update(repr((sorted(a.features.items()), a.embedding_text, sorted(a.column_refs),
                            sorted(a.string_constants), sorted(a.read_paths), sorted(a.string_keys),
                            ast.dump(a.tree) if a.tree is not None else None)).encode())
    return digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", type=int, default=640, help="fresh grammar scripts to score")
    parser.add_argument("--seed", type=int, default=3, help="the grammar policy's seed")
    args = parser.parse_args(argv)
    if args.scripts < 1:
        parser.error("--scripts must be at least 1")
    pairs = fresh_scripts(args.scripts, args.seed)
    per_script, digests = score(pairs)
    digests["features"] = features_digest(pairs)
    print(f"{len(pairs)} scripts (MLE train tasks, in-sample), batches of {BATCH}: "
          f"{1000 * per_script:.2f} ms CPU a script")
    print("digests: " + ", ".join(f"{name} {value}" for name, value in digests.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
