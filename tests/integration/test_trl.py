"""A real TRL ``GRPOTrainer`` (WMRLGRPOTrainer) trained with the fused WMRL reward on CPU.

The policy is a tiny random Llama (2 layers, hidden 64) with the in-memory toy tokenizer. A
``rollout_func`` answers every prompt with fixed short scripts, so each run costs a pandas
import, and the steps are deterministic. Anchors run in the bubblewrap sandbox and the world
model is the shipped surrogate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainers import grpo
from wmrl_envs.calibration import CalibratorConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import FusionConfig, HashSchedule, sample_weights
from wmrl_envs.tasks import list_tasks

pytest.importorskip("trl")  # the trl extra: scripts/setup.sh installs it, so under CI this runs

import torch
from trl import GRPOConfig

from agents.code.lm_policy import CausalLMPolicy, CausalLMPolicyConfig
from trainers.integrations.trl import (
    IN_FLIGHT_FILE,
    STATE_FILE,
    WMRLGRPOTrainer,
    WMRLReward,
    WMRLStateCallback,
    build_dataset,
    make_code_core,
)

pytestmark = pytest.mark.trl

ROOT = Path(__file__).resolve().parents[2]
G = 2
ANCHOR_FRACTION = 0.5
STEPS = 2
# A least-squares fit on the numeric columns (a real score above the constant's), and a crash (0).
LEAST_SQUARES = """\
import numpy as np
import pandas as pd
train, test = pd.read_csv("data/train.csv"), pd.read_csv("data/test.csv")
X = train.drop(columns=["{id}", "{y}"]).select_dtypes("number").fillna(0.0)
A = np.c_[X.to_numpy(), np.ones(len(X))]
coef = np.linalg.lstsq(A, train["{y}"].to_numpy(), rcond=None)[0]
T = test[X.columns].fillna(0.0).to_numpy()
pd.DataFrame({{"{id}": test["{id}"], "{y}": np.c_[T, np.ones(len(T))] @ coef}}).to_csv("submission.csv", index=False)
"""
CRASH = "raise RuntimeError('no model')\n"
SLOW_RUN_S = 4


@pytest.fixture(scope="module")
def tasks():
    # The two smallest regression tasks of the train split keep the anchor runs quick.
    pool = [t for t in list_tasks(suite="mle", split="train") if t.spec.task_type == "regression"]
    return sorted(pool, key=lambda t: t.spec.meta.get("n_train", 1e9))[:2]


@pytest.fixture(scope="module")
def dataset(tasks):
    return build_dataset(tasks, CausalLMPolicyConfig(max_description_chars=400))


def one_anchor_a_step(dataset, steps: int) -> int:
    """A schedule seed under which every step has one anchor and one world-model group (the rule itself)."""
    uids = list(dataset["prompt_uid"])
    return next(s for s in range(100)
                if all(sorted(HashSchedule(ANCHOR_FRACTION, s).stream((step, u)) for u in uids)
                       == ["anchor", "world_model"] for step in range(steps)))


@pytest.fixture(scope="module")
def seed(dataset):
    return one_anchor_a_step(dataset, STEPS)


def responses(task, slow: bool = False) -> list[str]:
    spec = task.spec
    scripts = [LEAST_SQUARES.format(id=spec.id_column, y=spec.target_columns[0]), CRASH]
    if slow:  # a run that cannot have returned when the step that submitted it looks for it
        scripts[0] = f"import time\ntime.sleep({SLOW_RUN_S})\n" + scripts[0]
    return [f"Member {i}.\n\n```python\n{s}```\n" for i, s in enumerate(scripts)]


def fixed_rollout(tasks, dataset, slow: bool = False):
    """A TRL rollout_func: member ``i`` of each group answers with script ``i``; log-probs are the
    model's own for those tokens (nothing was sampled)."""
    by_prompt = {json.dumps(row["prompt"]): next(t for t in tasks if t.id == row["task_id"]) for row in dataset}

    def rollout(prompts, trainer):
        tok = trainer.processing_class
        prompt_ids, completion_ids = [], []
        for i, prompt in enumerate(prompts):
            text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
            prompt_ids.append(tok(text, add_special_tokens=False)["input_ids"])
            answer = responses(by_prompt[json.dumps(prompt)], slow)[i % G]
            completion_ids.append(tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids,
                "logprobs": token_logprobs(trainer.model, prompt_ids, completion_ids)}

    return rollout


@torch.no_grad()
def token_logprobs(model, prompt_ids, completion_ids) -> list[list[float]]:
    out = []
    for p, c in zip(prompt_ids, completion_ids):
        logits = model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1:-1]
        out.append(torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(c)[:, None]).squeeze(1).tolist())
    return out


class RecordingTrainer(WMRLGRPOTrainer):
    """Keeps each generation batch's weighted advantages and the reward's record of it."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.batches = getattr(self, "batches", []) + [(output["advantages"].clone(), self.last_batch)]
        return output


def make_trainer(tasks, dataset, seed, out: Path, cls=WMRLGRPOTrainer, steps: int = STEPS, slow: bool = False,
                 **trainer_kwargs):
    # Two pairs are enough for the calibrator's map and residual, so step 1 already weights its anchors.
    core = make_code_core(ANCHOR_FRACTION, seed, workers=2, calibration=CalibratorConfig(min_pairs_global=2),
                          fusion=FusionConfig(rule="eta2"))  # a rule that weighs anchors, so the weights are seen
    policy = CausalLMPolicy.tiny_random(hidden_size=64, num_layers=2, seed=0)
    args = GRPOConfig(output_dir=str(out), use_cpu=True, bf16=False, num_generations=G,
                      per_device_train_batch_size=2 * G, max_completion_length=256, max_steps=steps,
                      learning_rate=1e-3, beta=0.0, logging_steps=1, save_steps=1, report_to="none",
                      log_completions=False, seed=0, dataloader_num_workers=0)
    trainer = cls(model=policy.model, reward_funcs=WMRLReward(core, tasks, num_generations=G), args=args,
                  train_dataset=dataset, processing_class=policy.tokenizer,
                  rollout_func=fixed_rollout(tasks, dataset, slow), callbacks=[WMRLStateCallback(core)], **trainer_kwargs)
    return trainer, core


def test_grpo_trainer_trains_on_fused_rewards_and_checkpoints_the_calibrator(tasks, dataset, seed, tmp_path):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer, core = make_trainer(tasks, dataset, seed, tmp_path / "run", RecordingTrainer)
    trainer.train()

    # Both streams every step; the anchors' pairs reached the calibrator (one anchor group of 2 per step).
    assert [sorted(set(record.streams)) for _, record in trainer.batches] == [["anchor", "world_model"]] * STEPS
    assert core.calibrator.n_pairs == STEPS * G
    # Each step's advantages are TRL's group advantages times sample_weights over the batch.
    for advantages, record in trainer.batches:
        ids = [tuple(g) for g in record.group_ids]
        expected = grpo.group_advantages(record.rewards, ids) * torch.as_tensor(
            sample_weights(record.is_anchor, record.w_anchor), dtype=torch.float32)
        assert advantages.tolist() == pytest.approx(expected.tolist(), abs=1e-4)
    # The first residual sets c = 1/eta2, which pins the first weight to 2: with one anchor group and
    # one world-model group of two, the anchors' ±1/sqrt(2) advantages grow by 2*4/6, the others' shrink.
    advantages, record = trainer.batches[0]
    assert record.w_anchor == pytest.approx(2.0)
    anchor = torch.as_tensor(record.is_anchor)
    assert advantages[anchor].abs().tolist() == pytest.approx([2**-0.5 * 4 / 3] * G, rel=1e-3)
    assert advantages[~anchor].abs().tolist() == pytest.approx([2**-0.5 * 2 / 3] * G, rel=1e-3)
    w_last = trainer.batches[-1][1].w_anchor

    logs = [row for row in trainer.state.log_history if "grad_norm" in row]
    assert len(logs) == STEPS and all(row["grad_norm"] > 0 for row in logs)
    for key in ("calibration/n_pairs", "calibration/eta2", "fusion/w_anchor", "fusion/c", "cost/execution_s",
                "cost/world_model_s", "anchors/group_share"):
        assert all(key in row for row in logs), key
    assert logs[-1]["calibration/n_pairs"] == STEPS * G and logs[-1]["cost/execution_s"] > 0
    assert logs[-1]["fusion/w_anchor"] == pytest.approx(w_last)

    # The checkpoint round trip: a new trainer with a fresh core resumes with the same calibrator.
    saved = json.loads((tmp_path / "run" / f"checkpoint-{STEPS}" / STATE_FILE).read_text())
    assert len(saved["calibrator"]["wm_scores"]) == STEPS * G
    resumed, fresh = make_trainer(tasks, dataset, seed, tmp_path / "run")
    assert fresh.calibrator.n_pairs == 0
    resumed.train(resume_from_checkpoint=True)
    assert fresh.calibrator.n_pairs == core.calibrator.n_pairs
    assert fresh.state_dict() == core.state_dict()
    assert fresh.anchor_weight() == pytest.approx(core.anchor_weight())
    core.close()
    fresh.close()


def test_resuming_without_the_scoring_state_is_refused(tmp_path):
    callback = WMRLStateCallback(make_code_core())
    (tmp_path / "checkpoint-3").mkdir()
    with pytest.raises(ConfigError, match="no WMRL scoring state"):
        callback.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=3), None)


def test_a_reward_whose_groups_differ_from_the_config_is_refused(tasks, dataset, tmp_path):
    policy = CausalLMPolicy.tiny_random(hidden_size=32, num_layers=1, seed=0)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, num_generations=2,
                      per_device_train_batch_size=4, max_steps=1, report_to="none")
    with pytest.raises(ConfigError, match="WMRLReward groups 4 rows"):
        WMRLGRPOTrainer(model=policy.model, reward_funcs=WMRLReward(make_code_core(), tasks, num_generations=4),
                        args=args, train_dataset=dataset, processing_class=policy.tokenizer)


def test_the_documented_example_runs(tasks, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "WMRL_TRL_MODEL": "tiny",
           "WMRL_TRL_TASKS": tasks[0].id, "WMRL_TRL_STEPS": "1", "WMRL_TRL_GENERATIONS": "2",
           "WMRL_TRL_MAX_NEW": "8", "WMRL_TRL_OUT": str(tmp_path / "example")}
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "trl_example.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done: 1 steps" in done.stdout
    history = json.loads((tmp_path / "example" / "checkpoint-1" / "trainer_state.json").read_text())["log_history"]
    assert any("calibration/n_pairs" in row for row in history)
    assert (tmp_path / "example" / "checkpoint-1" / STATE_FILE).is_file()  # saved at the end of training


ASYNC_STEPS = 3


class AsyncRecordingTrainer(WMRLGRPOTrainer):
    """Keeps, per generation batch: its step, weighted advantages and record, and for each row the
    loss's reference log-probabilities against the policy's as it stands at that step."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        old = output.get("old_per_token_logps")
        now = self._policy_logps(output) if old is not None else None
        self.batches = getattr(self, "batches", []) + [
            SimpleNamespace(step=self.state.global_step, advantages=output["advantages"].clone(),
                            record=self.last_batch, old=old, now=now, mask=output["completion_mask"].bool())]
        return output


def test_asynchronous_anchors_train_when_they_land_and_a_resume_loses_none(tasks, dataset, tmp_path):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    seed, bound = one_anchor_a_step(dataset, ASYNC_STEPS), 2
    trainer, core = make_trainer(tasks, dataset, seed, tmp_path / "run", AsyncRecordingTrainer, steps=ASYNC_STEPS,
                                 slow=True, max_staleness=bound)
    trainer.train()
    schedule = HashSchedule(ANCHOR_FRACTION, seed)
    submitted = sorted((step, uid) for step in range(ASYNC_STEPS) for uid in dataset["prompt_uid"]
                       if schedule.stream((step, uid)) == "anchor")

    # The step that submits an anchor group trains on without it (its run sleeps); every anchor group
    # trains exactly once, with all its rows, within the bound, and the last step waits for the rest.
    assert trainer.batches[0].record.streams == ["world_model"] * G
    trained = [(b.step, tuple(gid)) for b in trainer.batches
               for gid, stream in zip(b.record.group_ids, b.record.streams) if stream == "anchor"]
    assert sorted({gid for _, gid in trained}) == submitted and len(trained) == G * len(submitted)
    assert all(1 <= step - gid[0] <= bound for step, gid in trained if gid[0] < ASYNC_STEPS - 1)
    assert core.calibrator.n_pairs == ASYNC_STEPS * G
    # A landed row keeps the log-probabilities of the policy that generated it (the loss's ratio is not 1);
    # the step's own rows are scored against the policy as it stands.
    stale = [b for b in trainer.batches if b.old is not None]
    assert stale
    for b in stale:
        for row, (gid, stream) in enumerate(zip(b.record.group_ids, b.record.streams)):
            old, now = b.old[row][b.mask[row]], b.now[row][b.mask[row]]
            if stream == "anchor" and gid[0] < b.step:
                assert not torch.allclose(old, now, atol=1e-6)
            else:
                assert torch.allclose(old, now, atol=1e-6)
    # Each batch's advantages: the group advantages of the rows it trains, times sample_weights.
    for b in trainer.batches:
        ids = [tuple(g) for g in b.record.group_ids]
        expected = grpo.group_advantages(b.record.rewards, ids) * torch.as_tensor(
            sample_weights(b.record.is_anchor, b.record.w_anchor), dtype=torch.float32)
        assert b.advantages.tolist() == pytest.approx(expected.tolist(), abs=1e-4)
    logs = [row for row in trainer.state.log_history if "grad_norm" in row]
    assert max(row.get("anchors/staleness_max", 0) for row in logs) >= 1
    assert sum(row.get("anchors/landed", 0) for row in logs) == len(submitted)

    # Killed after step 1 with the step-0 anchors in flight: a resumed run submits them again and
    # ends with the same calibrator (the same pairs, in the same order).
    held = torch.load(tmp_path / "run" / "checkpoint-1" / IN_FLIGHT_FILE, weights_only=False)
    assert [step for step, _, _ in held] == [0]
    resumed, fresh = make_trainer(tasks, dataset, seed, tmp_path / "run", steps=ASYNC_STEPS, slow=True,
                                  max_staleness=bound)
    resumed.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-1"))
    assert fresh.calibrator.n_pairs == core.calibrator.n_pairs
    assert fresh.state_dict() == core.state_dict()
    core.close()
    fresh.close()


def test_skipped_final_anchors_leave_the_last_steps_of_a_trl_run_unanchored(tasks, dataset, tmp_path):
    """``final_anchors='skip'``: the last ``K`` steps choose no anchor group, so every anchor group
    trains exactly ``K`` steps late, the last step's included, and the calibrator takes only theirs."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    seed, bound = one_anchor_a_step(dataset, ASYNC_STEPS), 1
    trainer, core = make_trainer(tasks, dataset, seed, tmp_path / "run", AsyncRecordingTrainer, steps=ASYNC_STEPS,
                                 max_staleness=bound, final_anchors="skip")
    trainer.train()
    schedule = HashSchedule(ANCHOR_FRACTION, seed)
    chosen = sorted((step, uid) for step in range(ASYNC_STEPS - bound) for uid in dataset["prompt_uid"]
                    if schedule.stream((step, uid)) == "anchor")
    trained = [(b.step, tuple(gid)) for b in trainer.batches
               for gid, stream in zip(b.record.group_ids, b.record.streams) if stream == "anchor"]
    assert chosen and sorted({gid for _, gid in trained}) == chosen and len(trained) == G * len(chosen)
    assert all(step - gid[0] == bound for step, gid in trained)
    # The last step's own groups are all world-model groups, trained at once.
    last = trainer.batches[-1]
    assert {stream for gid, stream in zip(last.record.group_ids, last.record.streams)
            if gid[0] == ASYNC_STEPS - 1} == {"world_model"}
    assert core.calibrator.n_pairs == G * len(chosen)
    core.close()


def test_a_batch_of_anchors_only_waits_for_its_runs_and_trains_on_them(tasks, dataset, tmp_path):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer, core = make_trainer(tasks, dataset, 0, tmp_path / "run", AsyncRecordingTrainer, max_staleness=1)
    core.schedule = HashSchedule(1.0, 0)  # every group an anchor: each step holds its whole batch
    trainer.train()
    # With nothing else to train on, each step waits for its own anchors (staleness 0).
    assert [sorted(set(b.record.streams)) for b in trainer.batches] == [["anchor"]] * STEPS
    assert [{gid[0] for gid in b.record.group_ids} for b in trainer.batches] == [{step} for step in range(STEPS)]
    assert core.calibrator.n_pairs == STEPS * 2 * G
    assert all(row["grad_norm"] > 0 for row in trainer.state.log_history if "grad_norm" in row)
    core.close()


@pytest.mark.parametrize(("change", "refusal"), [
    ({"steps_per_generation": 2, "per_device_train_batch_size": G}, "steps_per_generation"),
    ({"scale_rewards": "batch"}, "scale_rewards"),
])
def test_asynchronous_anchors_refuse_what_they_would_break(tasks, dataset, tmp_path, change, refusal):
    policy = CausalLMPolicy.tiny_random(hidden_size=32, num_layers=1, seed=0)

    def build(change: dict, **trainer_kwargs):
        args = GRPOConfig(**{"output_dir": str(tmp_path), "use_cpu": True, "bf16": False, "num_generations": G,
                             "per_device_train_batch_size": 2 * G, "max_steps": 1, "report_to": "none", **change})
        return WMRLGRPOTrainer(model=policy.model, reward_funcs=WMRLReward(make_code_core(), tasks, num_generations=G),
                               args=args, train_dataset=dataset, processing_class=policy.tokenizer, **trainer_kwargs)

    with pytest.raises(ConfigError, match=refusal):
        build(change, max_staleness=1)
    with pytest.raises(ConfigError, match="max_staleness must be"):
        build({}, max_staleness=-1)
    with pytest.raises(ConfigError, match="final_anchors must be one of"):
        build({}, max_staleness=1, final_anchors="drop")
