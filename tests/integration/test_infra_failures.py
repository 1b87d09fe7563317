"""Infrastructure failures are never scores (issue 50): an evaluation refuses a mean they would make,
and a training run whose executions never start stops, resumable, instead of training on nothing.

The sandbox fails for real: the executors' default work root (the temp dir) is a folder that does
not exist, so no run folder can be made and every run ends as ``ExecutionStatus.INFRA_ERROR``.
"""

from __future__ import annotations

import csv
import json
import tempfile

import pytest

from trainers.cli import main
from trainers.evaluate import EvalConfig, EvalReport, _task_result, evaluate, select_tasks, write_reports
from trainers.policies import responder_from_spec
from wmrl_envs.errors import InfraFailureError
from wmrl_envs.scoring import CodeScorer, extract_code

TASK = "glass-identification"


@pytest.fixture
def break_sandbox(monkeypatch, tmp_path):
    """Call it to make every executor built afterwards unable to start a run (``monkeypatch.undo()``
    repairs it); returns the missing folder."""
    missing = tmp_path / "no-such-tmp"

    def broken():
        monkeypatch.setattr(tempfile, "tempdir", str(missing))
        # torch makes its compile cache in the temp dir when the optimiser first loads it, which
        # would create the missing folder: keep that cache elsewhere.
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch-cache"))
        return missing
    return broken


def test_an_evaluation_whose_sandbox_cannot_start_raises_and_prints_no_score(tmp_path, capsys, break_sandbox):
    missing = break_sandbox()
    config = EvalConfig(task_ids=(TASK,), k=2, executor="bwrap", workers=1)
    with pytest.raises(InfraFailureError, match=f"2 of 2 samples .*could not create a run folder in {missing}"):
        evaluate(responder_from_spec("reference:constant", 0), "reference:constant", config, progress=False)

    out_dir = tmp_path / "eval"
    code = main(["eval", "--tasks", TASK, "-k", "2", "--policy", "reference:constant", "--executor", "bwrap",
                 "--workers", "1", "--out", str(out_dir)])
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("wmrl: error:")]
    assert code == 2 and len(errors) == 1 and f"no score for reference:constant on task {TASK}" in errors[0]
    assert str(missing) in errors[0] and "Traceback" not in captured.err
    assert "0.000" not in captured.out and not (out_dir / "results.md").exists()


def test_a_few_infra_failures_are_left_out_of_the_mean_and_counted_per_task(tmp_path, break_sandbox):
    task = select_tasks("wmrl/MLEDojo-v0", "mle", "heldout", [TASK])[0]
    script = extract_code(responder_from_spec("reference:constant", 0)(task, 1, 0)[0])
    scorer = CodeScorer(executor="bwrap", workers=1)
    try:
        scored = scorer.execute([task] * 3, [script] * 3)
    finally:
        scorer.close()
    break_sandbox()
    broken = CodeScorer(executor="bwrap", workers=1)
    try:
        scored += broken.execute([task], [script])
    finally:
        broken.close()
    result = _task_result(task, scored)
    assert (len(result.scores), result.infra_failures) == (3, 1)
    assert "could not create a run folder" in result.infra_errors[0]

    report = EvalReport("reference:constant", EvalConfig(task_ids=(TASK,), k=4), [result])  # 1 of 4 <= 0.5
    md = write_reports([report], tmp_path, "partial", {}).read_text()
    saved = json.loads((tmp_path / "results.json").read_text())["reports"][0]
    assert saved["tasks"][0]["infra_failures"] == 1 and saved["summary"]["infra_failures"] == 1
    assert saved["summary"]["score_mean"] == pytest.approx(scored[0].score)  # the three real scores alone
    assert f"| {TASK} | {task.spec.metric} | {scored[0].score:.3f} (1 infra) |" in md
    with pytest.raises(InfraFailureError, match="1 of 4 samples"):  # a stricter threshold refuses the mean
        EvalReport("reference:constant", EvalConfig(task_ids=(TASK,), k=4, max_infra_share=0.2), [result]).summary()


def test_a_run_whose_executions_never_start_stops_resumable_and_exits_non_zero(tmp_path, capsys, monkeypatch,
                                                                              break_sandbox):
    out = tmp_path / "run"
    argv = ["train", "--mode", "wmrl", "--executor", "bwrap", "--workers", "1", "--steps", "4",
            "--tasks-per-step", "2", "--group-size", "2", "--warmup-steps", "1", "--infra-window", "2",
            "--min-anchor-groups", "1",  # every step executes, so every step sees the broken sandbox
            "--tasks", "wine-cultivar", "auto-fuel-economy", "--eval-k", "0", "--output-dir", str(out),
            "--no-tensorboard", "--checkpoint-every", "0", "--seed", "0"]
    missing = break_sandbox()
    code = main(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("wmrl: error:")]
    assert not missing.exists()  # still broken when the run ended
    assert code == 2 and len(errors) == 1
    assert "training stopped after step 2" in errors[0] and f"could not create a run folder in {missing}" in errors[0]
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert len(rows) == 2 and all(float(r["execution/infra_failures"]) == float(r["execution/runs"]) > 0
                                  for r in rows)
    assert all(float(r["execution/infra_share"]) == 1.0 for r in rows)

    monkeypatch.undo()  # the sandbox works again: the run goes on from its checkpoint
    code = main(argv + ["--resume"])
    assert code == 0 and f"resumed {out} at step 2" in capsys.readouterr().out
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == [0, 1, 2, 3] and float(rows[-1]["execution/infra_share"]) == 0.0
