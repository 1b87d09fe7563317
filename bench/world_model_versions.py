"""Does the world model answer alike under another Python? Each script's answers, side by side.

The surrogate's heads were fitted on CPython 3.11's tokens and syntax trees; a user's interpreter
may be newer (3.12 tokenizes an f-string into parts, 3.13's ``ast.dump`` leaves out empty fields).
This bench writes, under one interpreter, what the world model reads and answers for each script
(its tokens, features, keys, proof and prediction), then compares two such files:

    python -m bench.world_model_versions pairs runs/versions/pairs.json.xz
    python -m bench.world_model_versions answer runs/versions/pairs.json.xz runs/versions/py311.json.xz
    PYTHONPATH=. /path/to/python3.13 -m bench.world_model_versions answer runs/versions/pairs.json.xz \\
        runs/versions/py313.json.xz
    python -m bench.world_model_versions compare runs/versions/py311.json.xz runs/versions/py313.json.xz

``pairs`` needs the grammar policy (torch); ``answer`` needs only the world model's packages, so a
bare virtual environment of another interpreter runs it (``PYTHONPATH`` the checkout,
``WMRL_ASSETS_DIR`` and ``WMRL_LEADERBOARDS_DIR`` its ``assets`` and ``leaderboards``). The
scripts: fresh grammar scripts of the MLE train tasks, their mutants (in-sample: the world model
was fitted on these tasks and operators), and the first frozen set's hand-written scripts on their
tasks (a used set: nothing here judges a model's quality on it).

With ``PYTHONPATH`` a worktree of another commit, ``answer`` gives that commit's answers (run the
file itself: ``python /path/to/bench/world_model_versions.py answer ...``). The Python 3.13 of the
committed reading was built from Debian's source (``python3.13_3.13.5.orig.tar.xz`` from
deb.debian.org: ``./configure --prefix=/opt/py313 && make && make install``), with a virtual
environment of the world model's packages at the versions of the project's own.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import lzma
import platform
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: What ``answer`` writes per script, in the order ``compare`` reports them.
PARTS = ("tokens", "features", "keys", "proof", "prediction")


def write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8") as out:
        json.dump(payload, out)


def read_json(path: Path) -> Any:
    with lzma.open(path, "rt", encoding="utf-8") as src:
        return json.load(src)


def make_pairs(n_grammar: int, seed: int) -> list[dict[str, str]]:
    """``{set, task, folder, script}`` rows: grammar scripts and their mutants, and the first
    frozen set's hand-written scripts. ``folder`` is the task's folder, which ``answer`` loads."""
    import random

    import torch

    from bench.oos import SETS
    from bench.oos.rows import handwritten_rows
    from trainers.evaluate import select_tasks
    from trainers.policies import make_policy
    from wmrl_envs.mutations import OPERATORS, MutationNotApplicable, mutate
    from wmrl_envs.scoring.code import extract_code

    tasks = select_tasks("wmrl/MLEDojo-v0", "mle", "train", None)
    prompts = [tasks[i % len(tasks)] for i in range(-(-n_grammar // 4))]
    rollouts = make_policy("grammar", seed=seed).generate(prompts, 4, list(range(len(prompts))),
                                                          torch.Generator().manual_seed(seed))
    rows = []
    choose = random.Random(seed)
    for i, rollout in enumerate(rollouts[:n_grammar]):
        task, script = prompts[i // 4], extract_code(str(rollout.response))
        rows.append({"set": "grammar", "task": task.id, "folder": str(task.root), "script": script})
        for name in choose.sample(sorted(OPERATORS), 2):  # two operators a script: every operator is drawn
            try:
                mutant = mutate(script, name, task.spec, seed=i)
            except MutationNotApplicable:
                continue
            rows.append({"set": "mutant", "task": task.id, "folder": str(task.root), "script": mutant})
    frozen = SETS["v1"]
    handwritten = handwritten_rows(frozen)
    frozen_tasks = frozen.script_tasks(frozen.script_paths())
    for row in handwritten.itertuples():
        task = frozen_tasks[row.task_id]
        rows.append({"set": "handwritten_v1", "task": task.id, "folder": str(task.root), "script": row.text})
    return rows


def answer(pairs: list[dict[str, str]]) -> dict[str, Any]:
    """What this interpreter's world model reads and answers for each script (:data:`PARTS`)."""
    from wmrl_envs.analysis.code_features import analyse_script
    from wmrl_envs.analysis.proofs import shared_prover
    from wmrl_envs.analysis.script import code_key, shape_key
    from wmrl_envs.provenance import git_state
    from wmrl_envs.tasks import load_task
    from wmrl_envs.world_models.status_head import code_tokens
    from wmrl_envs.world_models.surrogate import SurrogateWorldModel

    tasks = {folder: load_task(folder) for folder in sorted({p["folder"] for p in pairs})}
    model, prover = SurrogateWorldModel.load(), shared_prover()
    rows = []
    for pair in pairs:
        task, script = tasks[pair["folder"]], pair["script"]
        analysis = analyse_script(script)
        folded = ast.unparse(analysis.tree) if analysis.tree is not None else None
        prediction = dataclasses.asdict(model.predict([task], [script])[0])
        rows.append({
            "tokens": code_tokens(script),
            "features": repr((sorted(analysis.features.items()), analysis.embedding_text, folded,
                              sorted(analysis.column_refs), sorted(analysis.string_constants))),
            "keys": [code_key(script), shape_key(script)],
            "proof": repr(prover.prove(task, script)),
            "prediction": {k: v for k, v in prediction.items() if k not in ("cost_s", "cpu_s")},
        })
    commit, dirty = git_state()
    return {"python": platform.python_version(), "commit": commit, "dirty": dirty, "sets": [p["set"] for p in pairs],
            "has_fstring": [_has_fstring(p["script"]) for p in pairs], "answers": rows}


def _has_fstring(script: str) -> bool:
    try:
        return any(isinstance(node, ast.JoinedStr) for node in ast.walk(ast.parse(script)))
    except (SyntaxError, ValueError):
        return False


def _check(proof: str) -> str:
    """The check a proof's text names (``None`` for no proof)."""
    found = re.search(r"check='(\w+)'", proof)
    return found.group(1) if found else proof[:40]


def compare(first: dict[str, Any], second: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Per set and in all: how many scripts' answers differ, part by part, and by how much the
    predictions move (status, P(valid), score)."""
    import numpy as np

    if first["sets"] != second["sets"]:
        raise SystemExit("the two answer files were written for different pairs")
    sets = first["sets"]
    report: dict[str, Any] = {"pythons": [first["python"], second["python"]],
                              "commits": [first.get("commit"), second.get("commit")],
                              "dirty": [first.get("dirty"), second.get("dirty")], "rows": []}
    for name in [*dict.fromkeys(sets), "all"]:
        idx = [i for i, s in enumerate(sets) if name in ("all", s)]
        a, b = [first["answers"][i] for i in idx], [second["answers"][i] for i in idx]
        row: dict[str, Any] = {"set": name, "scripts": len(idx),
                               "with_fstring": sum(first["has_fstring"][i] for i in idx)}
        for part in PARTS:
            row[f"{part}_differ"] = sum(x[part] != y[part] for x, y in zip(a, b))
        pa, pb = [x["prediction"] for x in a], [y["prediction"] for y in b]
        row["status_differ"] = sum(x["status"] != y["status"] for x, y in zip(pa, pb))
        for field in ("p_valid", "score"):
            gap = np.abs(np.array([x[field] for x in pa], float) - np.array([y[field] for y in pb], float))
            row[f"{field}_gap_max"] = float(np.nanmax(gap)) if len(gap) else 0.0
            row[f"{field}_gap_mean"] = float(np.nanmean(gap)) if len(gap) else 0.0
        report["rows"].append(row)
    moved = Counter((_check(x["proof"]), _check(y["proof"])) for x, y in zip(first["answers"], second["answers"])
                    if x["proof"] != y["proof"])
    report["proofs_moved"] = [[a, b, n] for (a, b), n in sorted(moved.items(), key=str)]
    head = ("| scripts | n | with an f-string | tokens differ | features differ | keys differ | proofs differ "
            "| predictions differ | status differs | P(valid) gap, mean / max | score gap, mean / max |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
    lines = [f"| {r['set']} | {r['scripts']} | {r['with_fstring']} | {r['tokens_differ']} | {r['features_differ']} "
             f"| {r['keys_differ']} | {r['proof_differ']} | {r['prediction_differ']} | {r['status_differ']} "
             f"| {r['p_valid_gap_mean']:.4f} / {r['p_valid_gap_max']:.4f} "
             f"| {r['score_gap_mean']:.4f} / {r['score_gap_max']:.4f} |" for r in report["rows"]]
    return report, head + "\n".join(lines) + "\n"


def _markdown(report: dict[str, Any], table: str) -> str:
    (one, two), (at_one, at_two) = report["pythons"], report["commits"]
    dirty = " (with uncommitted changes)"
    return (f"### The surrogate world model's answers under Python {one} and {two}\n\n"
            f"Answers of Python {one} written by the code of `{str(at_one)[:10]}`"
            f"{dirty if report['dirty'][0] else ''}, of Python {two} by `{str(at_two)[:10]}`"
            f"{dirty if report['dirty'][1] else ''}. A part differs when its text differs: tokens (the "
            "status head's n-grams), features (with the folded program and the embedding text), keys (the "
            "reuse tables' code and shape keys), proof, prediction (score, P(valid), status, exception, "
            "stage, message). In-sample scripts (grammar and its mutants on the MLE train tasks) and the "
            "first frozen set's hand-written scripts (a used set). How the files were made: the module's "
            "docstring.\n\n" + table + _proofs_moved(report))


def _proofs_moved(report: dict[str, Any]) -> str:
    if not report["proofs_moved"]:
        return ""
    one, two = report["pythons"]
    moves = "; ".join(f"{a} under {one}, {b} under {two}: {n}" for a, b, n in report["proofs_moved"])
    return (f"\nProofs that differ, by the check that made them ({moves}). The prover withholds a "
            "TypeError it would word with the host's CPython when the sandbox's runtime is another "
            "version (its facts record the runtime's; `proofs._python_matches`), and the surrogate "
            "estimates that script instead.\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("pairs", help="write the scripts and their tasks (needs torch)")
    make.add_argument("out", type=Path)
    make.add_argument("--grammar", type=int, default=640, help="fresh grammar scripts")
    make.add_argument("--seed", type=int, default=3)
    run = sub.add_parser("answer", help="this interpreter's answers for each script")
    run.add_argument("pairs", type=Path)
    run.add_argument("out", type=Path)
    both = sub.add_parser("compare", help="two interpreters' answers side by side")
    both.add_argument("first", type=Path)
    both.add_argument("second", type=Path)
    both.add_argument("--name", help="write bench/results/<name>.json and .md")
    args = parser.parse_args(argv)
    if args.command == "pairs":
        write_json(args.out, make_pairs(args.grammar, args.seed))
    elif args.command == "answer":
        write_json(args.out, answer(read_json(args.pairs)))
    else:
        report, table = compare(read_json(args.first), read_json(args.second))
        print(f"Python {report['pythons'][0]} against {report['pythons'][1]}\n\n{table}")
        if args.name:
            from bench.common import write_result

            write_result(args.name, __spec__.name if __spec__ else "bench.world_model_versions", report,
                         _markdown(report, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
