"""How well world models predict how a script ends: status, exception, validity and score.

The ground truth is every executed row of the corpora with a recorded outcome
(``assets/world_models/{corpus,dsbench_corpus,outcome_corpus,handwritten_corpus}.csv``): grammar
solutions, hand-written ones (``agents/code/handwritten.py``) and mutants of both
(``wmrl_envs/mutations.py``), each run in the sandbox. Fidelity is
measured on the held-out tasks' rows, which no fit ever saw; the proofs' precision on every row.

World models compared, on the same rows:

* ``surrogate (before)``: the score-only surrogate as it shipped before outcomes (the artefact of
  commit ``--before``), which predicts every script valid; its score ranks validity for AUC;
* ``proofs + before``: the static proofs (``wmrl_envs/analysis/proofs.py``), with the old
  surrogate's score for what they do not settle;
* ``surrogate (outcome)``: the shipped surrogate: proofs, then the status head; its score is the
  score head's where the likeliest outcome is valid, ``P(valid) x`` it elsewhere (``gated``);
  beside it the ``expected`` rule, ``P(valid) x`` the score head's everywhere;
* ``llm holistic`` / ``llm decomposed`` (``--llm-sample N``): SmolLM2-135M-Instruct through
  llama.cpp, on a sample, as the paper's baseline form.

Metrics (the field's): status accuracy; exception-class match on failures that raised; AUC and
ECE (10 equal-width bins) of P(valid); Spearman and pairwise accuracy (pairs within a task) on
valid scripts; reward MAE; cost per script. Per source (grammar, hand-written, mutated), per suite and per
held-out task. Writes ``bench/results/world_model_fidelity.{json,md}``.

    python -m bench.world_model_fidelity [--before 1c24862]
    python -m bench.world_model_fidelity --llm-sample 20 --name world_model_fidelity_llm  # about 20 min
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

from agents.code.handwritten import STYLE_KEY, render_solution
from bench.common import RESULTS, rerun_command
from bench.world_model_metrics import ece, pairwise_accuracy
from wmrl_envs import outcome
from wmrl_envs.analysis.proofs import Prover
from wmrl_envs.provenance import provenance
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models.build import corpus as corpus_lib
from wmrl_envs.world_models.surrogate import SurrogateWorldModel

REPO = Path(__file__).resolve().parents[1]
CORPORA = [REPO / "assets" / "world_models" / n
           for n in ("corpus.csv", "dsbench_corpus.csv", "outcome_corpus.csv", "handwritten_corpus.csv")]
#: Where a row's script comes from; ``mutated`` covers mutants of grammar and hand-written scripts.
SOURCES = ("mutated", "grammar", "handwritten")
#: The last commit whose surrogate predicted a score only.
BEFORE = "1c24862"
TARGETS = {"status_accuracy": 0.90, "auc_valid": 0.95, "exception_match": 0.80, "ece_valid": 0.05}


def load_rows() -> pd.DataFrame:
    """Every row with a recorded outcome, its script and its source (:data:`SOURCES`)."""
    frames = []
    for path in CORPORA:
        frame = corpus_lib.read_corpus(path)
        frames.append(frame[frame["outcome"] != ""].assign(corpus=path.name))
    rows = pd.concat(frames, ignore_index=True)
    tasks = {tid: get_task(tid) for tid in rows["task_id"].unique()}
    items = corpus_lib.corpus_items(rows)
    rows["script"] = [i.script(tasks[i.task_id].spec, render_solution) for i in items]
    rows["suite"] = [tasks[t].spec.suite for t in rows["task_id"]]
    handwritten = np.array([f'"{STYLE_KEY}"' in c for c in rows["choices"]])
    rows["source"] = np.where(rows["mutation"] != "none", "mutated", np.where(handwritten, "handwritten", "grammar"))
    rows["exception"] = pd.Series([e if isinstance(e, str) and e else None for e in rows["exception"]], dtype=object,
                                  index=rows.index)
    rows.attrs["tasks"] = tasks
    return rows


# ----------------------------------------------------------------------------- predictions


def predict_surrogate(model: SurrogateWorldModel, rows: pd.DataFrame, tasks: dict) -> dict[str, np.ndarray]:
    start, cpu = time.perf_counter(), time.process_time()
    predictions = model.predict([tasks[t] for t in rows["task_id"]], list(rows["script"]))
    cost = (time.perf_counter() - start) / max(len(rows), 1)
    cpu_cost = (time.process_time() - cpu) / max(len(rows), 1)
    return {"status": np.array([p.status for p in predictions], dtype=object),
            "exception": np.array([p.exception for p in predictions], dtype=object),
            "p_valid": np.array([p.p_valid for p in predictions], dtype=float),
            "score": np.array([p.score for p in predictions], dtype=float),
            "proved": np.array([p.proved for p in predictions]), "cost_s": cost, "cpu_s": cpu_cost}


def before_model(commit: str, folder: Path) -> SurrogateWorldModel:
    """The score-only surrogate artefact of ``commit``, loaded without proofs."""
    for suffix in (".joblib", ".json"):
        blob = subprocess.run(["git", "show", f"{commit}:assets/world_models/surrogate{suffix}"], cwd=REPO,
                              check=True, capture_output=True).stdout
        (folder / f"surrogate{suffix}").write_bytes(blob)
    return SurrogateWorldModel(folder / "surrogate.joblib", prove=False)


def as_before(p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the score-only surrogate said: nothing about failure; its score ranks validity."""
    n = len(p["score"])
    return {**p, "status": np.full(n, outcome.VALID, dtype=object), "exception": np.full(n, None, dtype=object),
            "p_valid": p["score"], "proved": np.zeros(n, dtype=bool), "calibrated_p": False}


def with_proofs(before: dict[str, np.ndarray], rows: pd.DataFrame, tasks: dict) -> dict[str, np.ndarray]:
    """The proofs settle what they prove; the old surrogate answers the rest."""
    prover = Prover()
    start = time.perf_counter()
    proofs = [prover.prove(tasks[t], s) for t, s in zip(rows["task_id"], rows["script"])]
    cost = (time.perf_counter() - start) / max(len(rows), 1) + before["cost_s"]
    proved = np.array([p is not None for p in proofs])
    return {"status": np.array([p.status if p else outcome.VALID for p in proofs], dtype=object),
            "exception": np.array([p.exception if p else None for p in proofs], dtype=object),
            "p_valid": np.where(proved, 0.0, 1.0), "score": np.where(proved, 0.0, before["score"]),
            "proved": proved, "cost_s": cost}


def llm_predictions(style: str, rows: pd.DataFrame, tasks: dict, mask: np.ndarray, threads: int) -> dict:
    """The LLM outcome world model's answers on the masked rows (the others are left unscored).

    An unreadable answer counts as "valid" with P(valid) 1 and score 0.5 (the model said
    nothing usable); the parse rate is reported beside it.
    """
    from wmrl_envs.world_models.llm_outcome import LLMOutcomeWorldModel

    model = LLMOutcomeWorldModel.from_options(style, "llamacpp", {"n_threads": threads})
    picks = np.flatnonzero(mask)
    try:
        start = time.perf_counter()
        predictions = model.predict([tasks[rows["task_id"].iloc[i]] for i in picks],
                                    [rows["script"].iloc[i] for i in picks])
        cost = (time.perf_counter() - start) / max(len(picks), 1)
    finally:
        model.close()
    n = len(rows)
    out = {"status": np.full(n, outcome.VALID, dtype=object), "exception": np.full(n, None, dtype=object),
           "p_valid": np.ones(n), "score": np.full(n, 0.5), "proved": np.zeros(n, dtype=bool), "cost_s": cost,
           "parse_rate": float(np.mean([p.parsed for p in predictions]))}
    for i, p in zip(picks, predictions):
        if p.parsed:
            out["status"][i], out["exception"][i] = p.status, p.exception
            out["p_valid"][i], out["score"][i] = p.p_valid, p.score
    return out


# ----------------------------------------------------------------------------- metrics


def metrics(pred: dict[str, np.ndarray], rows: pd.DataFrame, mask: np.ndarray) -> dict[str, float]:
    truth_status = rows["outcome"].to_numpy(object)[mask]
    truth_exception = rows["exception"].to_numpy(object)[mask]
    valid = truth_status == outcome.VALID
    real = rows["real_score"].to_numpy(float)[mask]
    status, exception = pred["status"][mask], pred["exception"][mask]
    p_valid, score = pred["p_valid"][mask], pred["score"][mask]
    raised = np.array([e is not None for e in truth_exception])
    out = {"rows": int(mask.sum()), "failures": int((~valid).sum()),
           "status_accuracy": float(np.mean(status == truth_status)),
           "exception_match": float(np.mean(exception[raised] == truth_exception[raised])) if raised.any() else None,
           "auc_valid": float(roc_auc_score(valid, p_valid)) if 0 < valid.sum() < len(valid) else None,
           "ece_valid": ece(p_valid, valid.astype(float)) if pred.get("calibrated_p", True) else None,
           "reward_mae": float(np.mean(np.abs(score - real)))}
    if valid.sum() > 2:
        task_ids = rows["task_id"].to_numpy(object)[mask][valid]
        out["spearman_valid"] = float(spearmanr(score[valid], real[valid]).statistic)
        out["pairwise_valid"] = pairwise_accuracy(score[valid], real[valid], task_ids)
    return out


def proof_precision(rows: pd.DataFrame, tasks: dict) -> dict[str, object]:
    """Every proof against the run, over every row of every split."""
    prover = Prover()
    start = time.process_time()
    proofs = [prover.prove(tasks[t], s) for t, s in zip(rows["task_id"], rows["script"])]
    prove_cpu_s = (time.process_time() - start) / max(len(rows), 1)
    proved = np.array([p is not None for p in proofs])
    wrong_failure = wrong_status = wrong_exception = 0
    by_label: dict[str, Counter] = defaultdict(Counter)
    for proof, row in zip(proofs, rows.itertuples()):
        label = row.outcome + (f" ({row.exception})" if row.exception else "")
        if row.outcome != outcome.VALID:
            by_label[label]["failures"] += 1
        if proof is None:
            continue
        if row.outcome == outcome.VALID:
            wrong_failure += 1
            continue
        by_label[label]["proved"] += 1
        wrong_status += proof.status != row.outcome
        wrong_exception += proof.exception != row.exception
    return {"rows": len(rows), "valid_rows": int((rows["outcome"] == outcome.VALID).sum()),
            "proofs": int(sum(p is not None for p in proofs)), "false_proofs": wrong_failure,
            "status_mismatches": int(wrong_status), "exception_mismatches": int(wrong_exception),
            # What skipping them saves: their recorded execution CPU-s against the prover's.
            "proved_execution_cpu_s_mean": float(rows["cpu_s"].to_numpy(float)[proved].mean()) if proved.any() else 0.0,
            "prove_cpu_s_per_script": prove_cpu_s,
            "by_outcome": {k: {"failures": v["failures"], "proved": v["proved"],
                               "share": round(v["proved"] / v["failures"], 3)} for k, v in sorted(by_label.items())}}


# ----------------------------------------------------------------------------- report


def _fmt(value) -> str:
    return "–" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.3f}"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = ["### World-model fidelity: how a script ends, not only its score", "",
             f"{m['cores']} cores, {m['ram_gib']} GiB RAM, {m['date'][:10]}, commit `{m['commit'][:10]}`. "
             f"Held-out tasks only ({report['heldout_rows']} executed rows: grammar solutions, hand-written "
             "solutions (`agents/code/handwritten.py`) and mutants of both); no fit saw them.", "",
             "| world model | rows | status acc. | exception match | AUC(valid) | ECE(valid) | Spearman (valid) "
             "| pairwise (valid) | reward MAE | ms / script (CPU) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, block in report["models"].items():
        for part in (*SOURCES, "all"):
            r = block[part]
            lines.append(f"| {name}, {part} | {r['rows']} | {_fmt(r['status_accuracy'])} | "
                         f"{_fmt(r['exception_match'])} | {_fmt(r['auc_valid'])} | {_fmt(r['ece_valid'])} | "
                         f"{_fmt(r.get('spearman_valid'))} | {_fmt(r.get('pairwise_valid'))} | "
                         f"{_fmt(r['reward_mae'])} | {1000 * block['cost_s']:.1f} ({1000 * block['cpu_s']:.1f}) |")
    lines += ["", "Spearman on valid held-out grammar scripts, by suite (no regression allowed):", "",
              "| world model | " + " | ".join(report["suites"]) + " |", "|---|" + "---:|" * len(report["suites"])]
    for name, block in report["models"].items():
        lines.append(f"| {name} | " + " | ".join(_fmt(block["by_suite"][s]["grammar"].get("spearman_valid"))
                                                 for s in report["suites"]) + " |")
    p = report["proofs"]
    lines += ["", f"**Proofs** over all {p['rows']} executed rows (every split, {p['valid_rows']} valid): "
              f"{p['proofs']} proofs, **{p['false_proofs']} false** (a proved failure that ran valid), "
              f"{p['status_mismatches']} with another status, {p['exception_mismatches']} with another exception. "
              f"A proved failure is not executed: its run cost {p['proved_execution_cpu_s_mean']:.2f} CPU-s on average, "
              f"its proof {1000 * p['prove_cpu_s_per_script']:.1f} ms.", "",
              "| executed outcome | failures | proved | share |", "|---|---:|---:|---:|"]
    for label, r in p["by_outcome"].items():
        lines.append(f"| {label} | {r['failures']} | {r['proved']} | {r['share']:.0%} |")
    t = report["targets"]
    lines += ["", "Targets (surrogate (outcome), held-out tasks): " + "; ".join(
        f"{k} {t[k]['value']:.3f} {'>=' if k != 'ece_valid' else '<='} {t[k]['target']} on {t[k]['rows']} rows "
        f"({'met' if t[k]['met'] else 'MISSED'})" for k in TARGETS) + ". ECE on the mutated rows alone (all of "
              "them fail, so it is their mean P(valid)) is in the table.", "", f"Rerun: `{report['command']}`"]
    return "\n".join(lines) + "\n"


def evaluate(name: str, pred: dict[str, np.ndarray], rows: pd.DataFrame, heldout: np.ndarray) -> dict:
    block = {"cost_s": pred["cost_s"], "cpu_s": pred.get("cpu_s", pred["cost_s"]),
             "parse_rate": pred.get("parse_rate", 1.0)}
    source = rows["source"].to_numpy()
    block["all"] = metrics(pred, rows, heldout)
    for part in SOURCES:
        block[part] = metrics(pred, rows, heldout & (source == part))
    suites = rows["suite"].to_numpy()
    block["by_suite"] = {s: {"all": metrics(pred, rows, heldout & (suites == s)),
                             "grammar": metrics(pred, rows, heldout & (suites == s) & (source == "grammar"))}
                         for s in sorted(set(suites[heldout]))}
    task_ids = rows["task_id"].to_numpy()
    block["by_task"] = {t: metrics(pred, rows, heldout & (task_ids == t)) for t in sorted(set(task_ids[heldout]))}
    return block


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE, help="commit whose score-only surrogate is the 'before' row")
    parser.add_argument("--llm-sample", type=int, default=0, help="held-out rows the LLM world models score (0: none)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--name", default="world_model_fidelity", help="results file name")
    args = parser.parse_args()

    rows = load_rows()
    tasks = rows.attrs["tasks"]
    heldout = (rows["split"] == "heldout").to_numpy()
    report: dict = {"models": {}}
    with tempfile.TemporaryDirectory() as folder:
        old = predict_surrogate(before_model(args.before, Path(folder)), rows, tasks)
    before = as_before(old)
    now = predict_surrogate(SurrogateWorldModel(), rows, tasks)
    expected = predict_surrogate(SurrogateWorldModel(reward="expected"), rows, tasks)
    for name, pred in (("surrogate (before)", before), ("proofs + before", with_proofs(old, rows, tasks)),
                       ("surrogate (outcome)", now), ("surrogate (outcome, expected reward)", expected)):
        report["models"][name] = evaluate(name, pred, rows, heldout)
    if args.llm_sample:
        picks = np.sort(np.random.default_rng(0).choice(np.flatnonzero(heldout), size=args.llm_sample, replace=False))
        sample = np.zeros(len(rows), dtype=bool)
        sample[picks] = True
        for style in ("holistic", "decomposed"):
            pred = llm_predictions(style, rows, tasks, sample, threads=args.threads)
            report["models"][f"llm {style} (n={args.llm_sample})"] = evaluate(style, pred, rows, sample)
    # Status and exception on the mutated scripts; AUC and ECE of P(valid) need valid scripts too,
    # so they are read on the held-out rows the mutants come from (grammar solutions and mutants).
    shipped = report["models"]["surrogate (outcome)"]
    read = {"status_accuracy": shipped["mutated"], "exception_match": shipped["mutated"],
            "auc_valid": shipped["all"], "ece_valid": shipped["all"]}
    report["targets"] = {k: {"value": read[k][k], "target": v, "rows": "mutated" if read[k] is shipped["mutated"]
                             else "all", "met": read[k][k] is not None and (read[k][k] <= v if k == "ece_valid"
                                                                          else read[k][k] >= v)}
                         for k, v in TARGETS.items()}
    machine = provenance()
    report.update(heldout_rows=int(heldout.sum()), suites=sorted(set(rows["suite"])),
                  proofs=proof_precision(rows, tasks), machine=machine,
                  corpora={p.name: corpus_lib.corpus_sha256(p) for p in CORPORA},
                  command=rerun_command(__spec__.name, machine["argv"]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    text = markdown(report)
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
