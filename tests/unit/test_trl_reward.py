"""The TRL reward function (trainers/integrations/trl.py) on hand-written completions, scored for real.

Anchors run in the bubblewrap sandbox and the world model is the shipped surrogate. The
infrastructure failure is real too: the task's public folder is missing, so the sandbox
cannot start the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, render_response
from wmrl_envs.errors import ConfigError
from wmrl_envs.tasks import list_tasks

pytest.importorskip("trl")  # the trl extra: scripts/setup.sh installs it, so under CI this runs

from trainers.integrations.trl import (
    TRLVersionError,
    WMRLReward,
    build_dataset,
    check_trl_version,
    make_code_core,
    prompt_uid,
)

pytestmark = pytest.mark.trl

ROOT = Path(__file__).resolve().parents[2]
G = 2
ANCHOR_FRACTION = 0.5
SEED = 0
CRASH = "The plan is to fail.\n\n```python\nraise RuntimeError('boom')\n```\n"
NO_CODE = "I would train a model but I will not write code."


@pytest.fixture(scope="module")
def tasks():
    # The two smallest train tasks keep the anchor executions quick.
    return sorted(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))[:2]


@pytest.fixture(scope="module")
def broken(tasks, tmp_path_factory):
    """A copy of a real task whose public folder is gone: its runs are infrastructure failures."""
    task = tasks[0]
    spec = dataclasses.replace(task.spec, id=f"{task.id}-nodata")
    return dataclasses.replace(task, spec=spec, public_dir=tmp_path_factory.mktemp("gone") / "public")


def respond(task, name: str) -> str:
    return render_response(task.spec, REFERENCE_SOLUTIONS[name])


def as_messages(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


class State:
    """The one field of TRL's TrainerState the reward reads."""

    def __init__(self, global_step: int) -> None:
        self.global_step = global_step


def uids(tasks) -> dict[str, str]:
    return {row["task_id"]: row["prompt_uid"] for row in build_dataset(tasks)}


def test_rows_group_by_step_and_prompt_and_bad_batches_are_refused(tasks):
    reward = WMRLReward(make_code_core(ANCHOR_FRACTION, SEED), tasks, num_generations=G)
    uid = uids(tasks)
    a, b = tasks
    texts = [respond(a, "constant"), NO_CODE, respond(b, "linear"), CRASH]
    groups = reward.groups(texts, [a.id, a.id, b.id, b.id], [uid[a.id]] * 2 + [uid[b.id]] * 2, step=7)
    assert [g.group_id for g in groups] == [(7, uid[a.id]), (7, uid[b.id])]
    assert [g.task.id for g in groups] == [a.id, b.id]
    assert groups[0].scripts[1] is None and "raise RuntimeError" in groups[1].scripts[1]
    with pytest.raises(ConfigError, match="span two processes"):
        reward.groups(texts[:3], [a.id] * 3, [uid[a.id]] * 3, step=0)
    with pytest.raises(ConfigError, match="do not share one prompt"):
        reward.groups(texts, [a.id, b.id, a.id, b.id], [uid[a.id], uid[b.id]] * 2, step=0)
    with pytest.raises(ConfigError, match="num_generations must be >= 2"):
        WMRLReward(reward.core, tasks, num_generations=1)


def test_dataset_rows_are_the_lm_policy_prompts_with_stable_uids(tasks):
    from agents.code.lm_policy import CausalLMPolicyConfig, build_messages

    rows = list(build_dataset(tasks))
    assert [r["task_id"] for r in rows] == [t.id for t in tasks]
    for row, task in zip(rows, tasks):
        assert row["prompt"] == build_messages(task, CausalLMPolicyConfig())
        assert row["prompt_uid"] == prompt_uid(task.id, row["prompt"])
    assert len({r["prompt_uid"] for r in rows}) == len(rows)


def test_fused_batch_anchor_world_model_and_infra_failure(tasks, broken):
    core = make_code_core(ANCHOR_FRACTION, SEED, workers=2)
    a, b = tasks
    uid = uids([a, b, broken])
    # A step whose groups fall on the streams this test needs, by the schedule's own rule.
    step = next(s for s in range(200)
                if core.streams([(s, uid[a.id]), (s, uid[b.id]), (s, uid[broken.id])])
                == ["anchor", "world_model", "anchor"])
    reward = WMRLReward(core, [a, b, broken], num_generations=G)
    rows = [(a, respond(a, "linear")), (a, CRASH), (b, respond(b, "constant")), (b, NO_CODE),
            (broken, respond(broken, "constant")), (broken, respond(broken, "linear"))]
    metrics: dict[str, float] = {}
    extra: dict[str, list] = {}
    out = reward(prompts=[[{"role": "user", "content": "task"}]] * len(rows),
                 completions=[as_messages(text) for _, text in rows], completion_ids=[[0]] * len(rows),
                 task_id=[t.id for t, _ in rows], prompt_uid=[uid[t.id] for t, _ in rows],
                 trainer_state=State(step), log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
    record = reward.last
    assert record.streams == ["anchor", "anchor", "world_model", "world_model", "anchor", "anchor"]
    assert record.group_ids[0] == (step, uid[a.id])
    # Anchors: real scores; the crashing script scores 0 and is no infrastructure failure.
    assert isinstance(out[0], float) and 0.0 < out[0] <= 1.0
    assert out[1] == 0.0
    # World-model rows: a calibrated estimate in range, and 0 for a response without code.
    assert isinstance(out[2], float) and 0.0 <= out[2] <= 1.0 and out[3] == 0.0
    # The sandbox could not start: no reward (TRL drops the rows), and nothing reached the calibrator.
    assert out[4] is None and out[5] is None
    assert record.scored.tolist() == [True, True, True, True, False, False]
    assert core.calibrator.n_pairs == 2  # the two executed anchors of the good task
    assert metrics["calibration/n_pairs"] == 2.0 and "fusion/w_anchor" in metrics and "fusion/c" in metrics
    assert metrics["cost/executions"] == 4.0 and metrics["cost/execution_s"] > 0
    assert metrics["cost/world_model_s"] > 0 and metrics["reward/dropped"] == 2.0
    assert metrics["anchors/group_share"] == pytest.approx(2 / 3)
    assert extra["wmrl/stream"] == record.streams and len(extra["wmrl/fusion_weight"]) == len(rows)
    assert extra["wmrl/real_score"][2] is None and extra["wmrl/real_score"][1] == 0.0
    assert all(w == record.w_anchor for w, s in zip(record.fusion_weights, record.streams) if s == "anchor")
    # A second batch at the next step adds the new anchors' pairs to the same calibrator.
    nxt = next(s for s in range(step + 1, step + 200) if core.streams([(s, uid[a.id])]) == ["anchor"])
    reward(prompts=[None] * G, completions=[respond(a, "constant"), respond(a, "linear")], task_id=[a.id] * G,
           prompt_uid=[uid[a.id]] * G, trainer_state=State(nxt))
    assert core.calibrator.n_pairs == 4
    core.close()


def test_the_trainer_refuses_another_trl_minor():
    assert check_trl_version("1.16.3") == "1.16.3"
    with pytest.raises(TRLVersionError, match="1.16"):
        check_trl_version("1.17.0")
    assert check_trl_version().startswith("1.16.")  # the installed one


def test_two_processes_take_the_same_anchor_decisions_and_keep_one_calibrator(tasks, tmp_path):
    """Two processes (torch.distributed on gloo), each with its own core and its own hash seed."""
    uid = uids(tasks)
    core = make_code_core(ANCHOR_FRACTION, SEED)
    ids = [(s, uid[t.id]) for s in range(12) for t in tasks]
    decisions = core.streams(ids)
    assert set(decisions) == {"anchor", "world_model"}
    step = next(s for s in range(200) if core.streams([(s, uid[t.id]) for t in tasks]) == ["anchor", "anchor"])
    crash = [CRASH, CRASH.replace("boom", "bang")]  # quick runs that still give the calibrator pairs
    code = textwrap.dedent(f"""
        import json, sys
        import torch.distributed as dist
        from trainers.integrations.trl import WMRLReward, make_code_core
        from wmrl_envs.tasks import get_task
        rank = int(sys.argv[1])
        dist.init_process_group("gloo", init_method="file://{tmp_path / 'rendezvous'}", rank=rank, world_size=2)
        task = get_task({[t.id for t in tasks]!r}[rank])
        uid = {uid!r}[task.id]
        reward = WMRLReward(make_code_core({ANCHOR_FRACTION}, {SEED}, workers=1), [task], num_generations=2)
        class State:
            global_step = {step}
        out = reward(prompts=[None] * 2, completions={crash!r}, task_id=[task.id] * 2, prompt_uid=[uid] * 2,
                     trainer_state=State())
        print(json.dumps({{"rewards": out, "streams": reward.last.streams, "group_ids": reward.last.group_ids,
                          "decisions": reward.core.streams({ids!r}), "scoring": reward.core.state_dict()}}))
        dist.destroy_process_group()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(rank)], cwd=ROOT, stdout=subprocess.PIPE,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": str(101 + rank)},
                              stderr=subprocess.PIPE, text=True) for rank in range(2)]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    # Every process decides every (step, prompt_uid) group as this one does...
    assert all(r["decisions"] == decisions for r in results)
    assert [r["group_ids"] for r in results] == [[[step, uid[t.id]]] * 2 for t in tasks]
    # ...each got its own rows back, on its group's stream...
    assert all(r["rewards"] == [0.0, 0.0] and r["streams"] == ["anchor", "anchor"] for r in results)
    # ...and both calibrators took every process's pairs, in the same order: one calibrator for the run.
    first, second = (r["scoring"] for r in results)
    shared = ("calibrator", "c", "schedule", "disagreement")
    assert {k: first[k] for k in shared} == {k: second[k] for k in shared}
    assert first["calibrator"]["task_ids"] == [tasks[0].id] * 2 + [tasks[1].id] * 2
    # What a process executed (the scorer's reusable outcomes) stays its own: each ran its own task.
    assert [{o[0] for o in r["scoring"]["scorer"]["experience"]["outcomes"]} for r in results] == [
        {tasks[0].data_key}, {tasks[1].data_key}]
