"""The benchmarks' execution memo (``bench.training.MemoScorer``): a (task, script) runs once per
benchmark, and every later execution of it, through :meth:`CodeScorer.execute` as through a
training batch, replays the first run's outcome. Real sandbox."""

from __future__ import annotations

from bench.training import ExecutionMemo, MemoScorer
from trainers.policies import responder_from_spec
from wmrl_envs.scoring import extract_code
from wmrl_envs.tasks import get_task


def test_an_execution_repeated_through_execute_is_replayed_not_run(tmp_path):
    task = get_task("diabetes-progression")
    script = extract_code(responder_from_spec("reference:linear", 0)(task, 1, 0)[0])
    memo = ExecutionMemo(tmp_path / "memo.jsonl")
    scorer = MemoScorer(memo, executor="auto", workers=1)
    try:
        first = scorer.execute([task], [script])[0]
        assert scorer.ran == 1 and scorer.reused == 0
        again = scorer.execute([task, task], [script, script])
    finally:
        scorer.close()
    assert scorer.ran == 1 and scorer.reused == 2  # the memo answered both: nothing ran a second time
    assert first.executed and not first.infra_failure
    assert [s.real_score for s in again] == [first.real_score] * 2
    assert [s.status for s in again] == [first.status] * 2
    reloaded = ExecutionMemo(tmp_path / "memo.jsonl")  # the memo is on disk: another process replays it
    assert ExecutionMemo.key(task.id, script) in reloaded.entries
