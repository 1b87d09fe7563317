"""The verl integration inside verl's own venv (run by tests/integration/test_verl.py, not collected here).

Real verl 0.9.1 throughout: its config files composed with Hydra, its ``RewardLoopWorker``
loading the ``wmrl`` manager by name and scoring a ``DataProto`` the way its reward actors do,
its estimator registry, and its own GRPO estimator as the reference. Anchors run in the
bubblewrap sandbox, the world model is the shipped surrogate, and the calibrator is the
process-wide one (``algorithm.wmrl.calibrator=null``), except in the last check, where two reward
workers share a calibrator actor on a local Ray: Ray's executor is injected by name only
(``executor``) and tested, with the actor, in tests/integration/test_ray.py.

Run: ``$(bash scripts/setup_verl.sh) -m pytest tests/integration/verl_checks.py``.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.reward import resolve_reward_manager_cls

from trainers import grpo
from trainers.integrations import verl as wmrl_verl
from wmrl_envs.calibration import Calibrator
from wmrl_envs.scoring import HashSchedule, sample_weights
from wmrl_envs.scoring.ray_calibrator import RemoteExperience
from wmrl_envs.tasks import list_tasks

pytestmark = pytest.mark.verl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "verl_example.md"
VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"
# Float32 advantages against float64 references: a few ulps of values of order 1.
TOLERANCE = 1e-5
# What the checks change from the example: a sandbox and calibrator of this process, a toy tokenizer.
LOCAL = ["++algorithm.wmrl.executor=bwrap", "++algorithm.wmrl.calibrator=null", "++algorithm.wmrl.anchor_fraction=0.5"]
LINEAR = """\
import numpy as np
import pandas as pd
train, test = pd.read_csv("data/train.csv"), pd.read_csv("data/test.csv")
features = [c for c in train.select_dtypes("number").columns if c not in ("{id}", "{y}")]
design = lambda frame: np.column_stack([frame[features].fillna(0.0).to_numpy(), np.ones(len(frame))])
weights, *_ = np.linalg.lstsq(design(train), train["{y}"].to_numpy(), rcond=None)
pd.DataFrame({{"{id}": test["{id}"], "{y}": design(test) @ weights}}).to_csv("submission.csv", index=False)
"""
CRASH = "import sys\nsys.exit('no model today')\n"


def example_overrides() -> list[str]:
    """The ``key=value`` overrides of the example's command line (its first ```bash block)."""
    block = re.search(r"```bash\n(.*?)```", EXAMPLE.read_text(), re.DOTALL).group(1)
    return [token for token in block.split() if re.fullmatch(r"\+?[a-z_][\w.]*=\S+", token)]


def verl_config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def uids(stream: str, n: int, settings: wmrl_verl.VerlSettings) -> list[str]:
    """``n`` uids the settings' hash schedule puts on ``stream`` (the rule itself decides)."""
    schedule = HashSchedule(settings.anchor_fraction, settings.seed)
    found = (f"uid-{i}" for i in range(10_000))
    return [u for u in found if schedule.stream(wmrl_verl.group_id(u)) == stream][:n]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from agents.code.lm_policy import toy_tokenizer

    path = tmp_path_factory.mktemp("tokenizer")
    toy_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def task():
    # The smallest regression task of the train split keeps the anchor runs quick.
    pool = [t for t in list_tasks(suite="mle", split="train") if t.spec.task_type == "regression"]
    return min(pool, key=lambda t: t.spec.meta.get("n_train", 1e9))


def data_proto(tokenizer, rows: list[tuple[str, str, str]]) -> DataProto:
    """A batch as verl's rollout leaves it: left-padded prompts, right-padded responses, one
    ``(uid, task_id, response)`` per row, and the dataset's non-tensor fields."""
    prompts = [tokenizer(f"Solve task {task_id}.")["input_ids"] for _, task_id, _ in rows]
    responses = [tokenizer(text)["input_ids"] + [tokenizer.eos_token_id] for _, _, text in rows]
    p_len, r_len, pad = max(map(len, prompts)), max(map(len, responses)), tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    attention = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
                              for p, r in zip(prompts, responses)])
    return DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "attention_mask": attention,
                 "input_ids": torch.cat([prompt_ids, response_ids], dim=1)},
        non_tensors={"uid": np.array([u for u, _, _ in rows], dtype=object),
                     "data_source": np.array(["wmrl/MLEDojo-v0"] * len(rows), dtype=object),
                     "reward_model": np.array([{"style": "wmrl", "ground_truth": t} for _, t, _ in rows], dtype=object),
                     "extra_info": np.array([{"task_id": t, "split": "train"} for _, t, _ in rows], dtype=object)})


def response(script: str) -> str:
    return f"A short analysis.\n\n```python\n{script}```\n"


# --------------------------------------------------------------------------- the config keys


def test_example_keys_resolve_to_the_integration():
    config = verl_config(example_overrides())
    assert resolve_reward_manager_cls(config) is wmrl_verl.WMRLRewardManager
    assert core_algos.get_adv_estimator_fn(config.algorithm.adv_estimator) is wmrl_verl.compute_wmrl_grpo_advantage
    settings = wmrl_verl.VerlSettings.from_config(config.algorithm)
    assert settings.executor == "ray" and settings.calibrator == wmrl_verl.CALIBRATOR_ACTOR
    # The importlib route the example names as the alternative for the manager.
    alt = verl_config([o for o in example_overrides() if not o.startswith("reward.reward_manager.")] + [
        "reward.reward_manager.source=importlib", "reward.reward_manager.name=WMRLRewardManager",
        "reward.reward_manager.module.path=pkg://trainers.integrations.verl"])
    assert resolve_reward_manager_cls(alt) is wmrl_verl.WMRLRewardManager


def test_external_modules_variable_registers_both_names_on_import_verl():
    # What every verl process does with VERL_USE_EXTERNAL_MODULES (the example's set-up line),
    # in a fresh interpreter: the import happens inside `import verl` itself.
    code = ("import verl\n"
            "from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls\n"
            "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
            "print(get_reward_manager_cls('wmrl').__name__, get_adv_estimator_fn('wmrl_grpo').__name__)\n")
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "trainers.integrations.verl"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["WMRLRewardManager", "compute_wmrl_grpo_advantage"]


def test_settings_reject_unknown_keys():
    with pytest.raises(wmrl_verl.ConfigError, match="anchor_fractoin"):
        wmrl_verl.VerlSettings.from_config({"wmrl": {"anchor_fractoin": 0.2}})


# --------------------------------------------------------------------------- the reward manager


def test_reward_worker_scores_a_uid_group_through_the_fused_core(tokenizer_dir, task):
    config = verl_config(example_overrides() + LOCAL + [f"actor_rollout_ref.model.path={tokenizer_dir}"])
    settings = wmrl_verl.VerlSettings.from_config(config.algorithm)
    anchor, world = uids("anchor", 1, settings)[0], uids("world_model", 1, settings)[0]
    spec = task.spec
    linear = response(LINEAR.format(id=spec.id_column, y=spec.target_columns[0]))
    rows = [(anchor, task.id, linear), (world, task.id, linear), (anchor, task.id, response(CRASH)),
            (world, task.id, "no code in this answer")]
    worker = RewardLoopWorker(config)  # verl's reward actor body: loads the manager by its config name
    manager = worker.reward_manager
    assert isinstance(manager, wmrl_verl.WMRLRewardManager)
    pairs_before = manager.core.calibrator.n_pairs
    out = asyncio.run(worker.compute_score_batch(data_proto(worker.input_tokenizer, rows)))

    info = [o["reward_extra_info"] for o in out]
    assert [i["stream"] for i in info] == ["anchor", "world_model", "anchor", "world_model"]
    # The anchor pair: executed for real (the linear fit beats the crash) and predicted.
    assert info[0]["real_score"] > 0 and info[2]["real_score"] == 0.0
    assert out[0]["reward_score"] == info[0]["real_score"] and out[2]["reward_score"] == 0.0
    assert all(math.isfinite(info[i]["wm_score_raw"]) for i in (0, 1, 2))
    # Both anchor samples were scored together: their two pairs reached the calibrator.
    assert manager.core.calibrator.n_pairs == pairs_before + 2
    # World-model samples are never run; below min_pairs_global the reward is the clipped raw score.
    assert info[1]["real_score"] is None and out[1]["reward_score"] == pytest.approx(min(max(info[1]["wm_score_raw"], 0), 1))
    assert out[3]["reward_score"] == 0.0 and info[3]["wm_score_raw"] is None  # no code: 0 on every stream
    assert [i["fusion_weight"] for i in info] == [manager.core.anchor_weight(), 1.0, manager.core.anchor_weight(), 1.0]


def test_with_async_anchors_a_world_model_sample_is_answered_while_its_batchs_anchors_run(tokenizer_dir, task):
    config = verl_config(example_overrides() + LOCAL + ["++algorithm.wmrl.async_anchors=true",
                                                        f"actor_rollout_ref.model.path={tokenizer_dir}"])
    settings = wmrl_verl.VerlSettings.from_config(config.algorithm)
    assert settings.async_anchors
    anchor, world = uids("anchor", 1, settings)[0], uids("world_model", 1, settings)[0]
    linear = LINEAR.format(id=task.spec.id_column, y=task.spec.target_columns[0])
    rows = [(anchor, task.id, response("import time\ntime.sleep(2)\n" + linear)), (world, task.id, response(linear))]
    worker = RewardLoopWorker(config)
    manager = worker.reward_manager
    pairs_before = manager.core.calibrator.n_pairs  # the process-wide calibrator: earlier checks fed it
    finished = []

    async def answer(i: int) -> dict:
        out = await manager.run_single(data_proto(worker.input_tokenizer, [rows[i]]))
        finished.append(i)
        return out

    async def both() -> list[dict]:
        return await asyncio.gather(answer(0), answer(1))

    out = asyncio.run(both())
    assert finished == [1, 0]  # the world-model sample did not wait for the anchor's run
    info = [o["reward_extra_info"] for o in out]
    assert [i["stream"] for i in info] == ["anchor", "world_model"]
    assert info[0]["real_score"] > 0 and out[0]["reward_score"] == info[0]["real_score"]
    assert manager.core.calibrator.n_pairs == pairs_before + 1  # the anchor's pair arrived when it landed
    assert manager.score_batch(rows)[0]["reward_score"] == out[0]["reward_score"]  # as a blocking batch scores it


def test_held_out_tasks_are_always_executed(tokenizer_dir):
    config = verl_config(example_overrides() + LOCAL + [f"actor_rollout_ref.model.path={tokenizer_dir}"])
    held_out = min(list_tasks(suite="mle", split="heldout"), key=lambda t: t.spec.meta.get("n_train", 1e9))
    world = uids("world_model", 1, wmrl_verl.VerlSettings.from_config(config.algorithm))[0]
    worker = RewardLoopWorker(config)
    out = asyncio.run(worker.compute_score_batch(data_proto(worker.input_tokenizer,
                                                            [(world, held_out.id, response(CRASH))])))
    assert out[0]["reward_extra_info"]["stream"] == "real" and out[0]["reward_extra_info"]["wm_score_raw"] is None
    assert out[0]["reward_score"] == 0.0


# --------------------------------------------------------------------------- the estimator


def weighted_core(settings: wmrl_verl.VerlSettings):
    """A core whose calibrator holds noisy pairs, so its anchor weight is above 1."""
    calibrator = Calibrator(settings.calibration)
    rng = np.random.default_rng(0)
    wm = rng.uniform(0, 1, 60)
    calibrator.add_pairs(wm, np.clip(wm + rng.normal(0, 0.2, 60), 0, 1), ["t"] * 60)
    core = wmrl_verl.make_core(settings, calibrator=calibrator, scorer=False)
    assert core.anchor_weight() > 1.0
    return core


def rollout(sizes: dict[str, int], seed: int = 0):
    """Scores of uid groups laid out like verl's (interleaved repeats), as token-level rewards."""
    rng = np.random.default_rng(seed)
    index = np.array([u for u, n in sizes.items() for _ in range(n)], dtype=object)
    scores = torch.tensor(rng.uniform(0, 1, len(index)), dtype=torch.float32)
    mask = torch.zeros(len(index), 6)
    for i in range(len(index)):
        mask[i, : 2 + i % 4] = 1
    rewards = torch.zeros_like(mask)
    rewards[torch.arange(len(index)), mask.sum(-1).long() - 1] = scores
    return rewards, mask, index, scores


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_estimator_equals_verl_grpo_without_anchors(norm_by_std):
    settings = wmrl_verl.VerlSettings(anchor_fraction=0.5)
    world = uids("world_model", 3, settings)
    rewards, mask, index, scores = rollout({world[0]: 4, world[1]: 3, world[2]: 1})
    config = OmegaConf.create({"adv_estimator": "wmrl_grpo", "norm_adv_by_std_in_grpo": norm_by_std,
                               "wmrl": {"anchor_fraction": 0.5, "calibrator": None}})
    ours, returns = wmrl_verl.compute_wmrl_grpo_advantage(rewards, mask, index, config=config)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm_by_std)
    assert torch.equal(ours, returns) and torch.equal(ours == 0, mask == 0)
    torch.testing.assert_close(ours, theirs, atol=TOLERANCE, rtol=0)
    # Groups of two or more are trainers/grpo.py's advantages at verl's epsilon.
    mode = "std" if norm_by_std else "mean"
    reference = grpo.group_advantages(scores[:7].double(), list(index[:7]), mode=mode, eps=wmrl_verl.VERL_EPS)
    torch.testing.assert_close(ours[:7, 0].double(), reference, atol=TOLERANCE, rtol=0)


def test_estimator_weights_anchor_rows_only():
    settings = wmrl_verl.VerlSettings(anchor_fraction=0.5, fusion_rule="eta2")  # a rule that weighs anchors
    core = weighted_core(settings)
    anchors, world = uids("anchor", 2, settings), uids("world_model", 2, settings)
    sizes = {anchors[0]: 4, world[0]: 4, anchors[1]: 3, world[1]: 3}
    _, _, index, scores = rollout(sizes, seed=1)
    weighted = wmrl_verl.wmrl_advantages(scores, index, core)
    plain = grpo.group_advantages(scores.double(), list(index), eps=wmrl_verl.VERL_EPS)
    is_anchor = np.isin(index, anchors)
    expected = plain * torch.as_tensor(sample_weights(is_anchor, core.anchor_weight()))
    torch.testing.assert_close(weighted, expected, atol=TOLERANCE, rtol=0)
    # The ratio of an anchor row's factor to a world-model row's is the anchor weight.
    factor = weighted[plain != 0] / plain[plain != 0]
    anchor_factor, world_factor = factor[torch.as_tensor(is_anchor)[plain != 0]], factor[~torch.as_tensor(is_anchor)[plain != 0]]
    torch.testing.assert_close(anchor_factor / world_factor.mean(), torch.full_like(anchor_factor, core.anchor_weight()))


def test_estimator_drops_infrastructure_failures():
    settings = wmrl_verl.VerlSettings(anchor_fraction=0.5)
    world = uids("world_model", 1, settings)[0]
    scores = torch.tensor([0.2, math.nan, 0.9, 0.4], dtype=torch.float64)
    index = [world] * 4
    out = wmrl_verl.wmrl_advantages(scores, index, wmrl_verl.make_core(settings, calibrator=Calibrator(), scorer=False))
    assert out[1] == 0
    keep = [0, 2, 3]
    torch.testing.assert_close(out[keep], grpo.group_advantages(scores[keep], [world] * 3, eps=wmrl_verl.VERL_EPS))


def test_registered_estimator_is_the_configured_core(tokenizer_dir):
    # Through verl's registry and the example's config: the estimator builds its core from
    # algorithm.wmrl, the same settings the reward workers read.
    config = verl_config(example_overrides() + LOCAL)
    fn = core_algos.get_adv_estimator_fn(config.algorithm.adv_estimator)
    settings = wmrl_verl.VerlSettings.from_config(config.algorithm)
    anchors, world = uids("anchor", 1, settings), uids("world_model", 1, settings)
    rewards, mask, index, scores = rollout({anchors[0]: 3, world[0]: 3}, seed=2)
    advantages, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index, config=config.algorithm)
    expected = wmrl_verl.wmrl_advantages(scores, index, wmrl_verl.estimator_core(settings))
    torch.testing.assert_close(advantages[:, 0], expected.float(), atol=TOLERANCE, rtol=0)


# --------------------------------------------------------------------------- the calibrator actor


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_reward_workers_share_the_experience_of_the_calibrator_actor(ray_cluster, tokenizer_dir, task):
    """What one reward worker executed as an anchor, another reuses: one experience for the run."""
    config = verl_config(example_overrides() + ["++algorithm.wmrl.executor=bwrap", "++algorithm.wmrl.anchor_fraction=0.5",
                                                f"++algorithm.wmrl.calibrator=wmrl-calibrator-{os.getpid()}",
                                                f"actor_rollout_ref.model.path={tokenizer_dir}"])
    settings = wmrl_verl.VerlSettings.from_config(config.algorithm)
    anchor, world = uids("anchor", 1, settings)[0], uids("world_model", 1, settings)[0]
    linear = response(LINEAR.format(id=task.spec.id_column, y=task.spec.target_columns[0]))
    first, second = RewardLoopWorker(config), RewardLoopWorker(config)
    assert isinstance(second.reward_manager.core.scorer.experience, RemoteExperience)
    [executed] = asyncio.run(first.compute_score_batch(data_proto(first.input_tokenizer, [(anchor, task.id, linear)])))
    [reused] = asyncio.run(second.compute_score_batch(data_proto(second.input_tokenizer, [(world, task.id, linear)])))
    ran, answered = executed["reward_extra_info"], reused["reward_extra_info"]
    assert ran["stream"] == "anchor" and ran["real_score"] > 0
    assert answered["stream"] == "world_model" and answered["real_score"] is None
    assert answered["wm_score_raw"] == reused["reward_score"] == ran["real_score"]  # reused: no map moves it
    assert second.reward_manager.core.calibrator.n_pairs == 1  # the same actor holds the anchor's pair
