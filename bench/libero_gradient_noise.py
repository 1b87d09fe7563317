"""How much of a GRPO update on LIBERO is signal: the gradient noise scale of MiniVLA fine-tuning.

For each starting policy (``--policies``, run folders of ``bench/libero_vla.py``), one batch of
``--groups`` groups of 4 episodes on training init states is executed in the simulator *and*
scored by the success model (every group an anchor), so the same episodes give a policy
gradient under real rewards and one under calibrated world-model rewards. Per group ``j`` the
gradient ``g_j`` of the GRPO surrogate is taken at the starting policy; then:

* **noise scale** ``B = tr(Sigma) / |E g|^2`` (McCandlish et al. 2018, "An Empirical Model of
  Large-Batch Training", B_simple), in groups, from unbiased estimates of both terms over the
  groups, with a jackknife SE. A batch of ``b`` groups has signal-to-noise ``|E g|^2 / (tr(Sigma)
  / b)`` = ``b / B``: below ``B`` groups an update is mostly noise, and reaching a given
  improvement takes about ``1 + B / b`` times the steps a noiseless gradient would;
* **agreement of two half batches**: the cosine of their gradients, and the share of weights on
  which their signs agree (Adam's first step moves each weight by the learning rate in its sign);
* **a state-value baseline** (``--baseline-every``): each action's advantage is ``R - V(s_t)``,
  with ``V`` the success model's P(success | states so far) at the state the action was taken
  in, instead of one group-relative advantage spread over all 3,640 action tokens. A baseline
  that depends only on the states so far leaves the expected gradient unbiased, so its noise
  scale compares directly with the mean-only (Dr.GRPO) advantage's, whose expected gradient is
  the same up to the factor ``(G - 1) / G``; their expected cosine checks that;
* **world model against real**: the cosine of the two expected gradients (cross-group terms
  only, so unbiased by either stream's own noise), and each stream's noise scale;
* **by parameter tensor**: the noise scale of each weight matrix and bias alone, i.e. of an
  update that trains only that tensor;
* **the step along Adam's first update** (the update the LIBERO fine-tunes take): the change of
  the clipped surrogate with KL 0.05 to the start, and KL(old || new), at learning rates up to
  ``1e-4``: on the batch the step came from (in-sample, an optimistic view), and with the step
  taken from one half of the groups and scored on the other half (out-of-sample: what the
  update does for episodes it did not see).

``--shaped`` measures, on the same saved batches, the noise scale of the shaped reward of
``wmrl train --wm-reward shaped`` (the success plus the rise ``Phi_T - Phi_0`` of the success
model's P(success | states so far), ``wmrl_envs/scoring/shaping.py``) against the sparse success,
each with its 2-SE bounds (``bench/results/libero_gradient_noise_shaped.{json,md}``)::

    python -m bench.libero_gradient_noise --policies bc-s6 bc-s3 bc-s7 --groups 32 --shaped

``--temperature T`` samples the batch from the tempered policy (log-probs and gradients are the
tempered policy's too): a lower temperature samples closer to the greedy actions the evaluation
takes. The batch is saved (``<run>/gradient-batch-g<groups>[-t<T>].pt``), so the analysis reruns
without the simulator. Results: ``<run>/gradient-noise-g<groups>[-t<T>].json`` per policy, and ``bench/results/
libero_gradient_noise.{json,md}`` (mean ± SE over policies)::

    python -m bench.libero_gradient_noise --policies bc-s6 bc-s3 bc-s7 --groups 32
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench.common import auroc, mean_se, setup_threads, write_result

if TYPE_CHECKING:
    import torch

GROUP_SIZE = 4
#: Adam learning rates probed along its first step (the fine-tunes use 1e-4).
PROBE_LEARNING_RATES = (3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3)
#: Parameters the probed step trains, by a regular expression over their names: all of them, or
#: only the biases and LayerNorm parameters, whose noise scales are the smallest.
TRAINED = {"all": "", "biases and norms": r"bias|norm"}
KL_COEF = 0.05


def _terms(total_sq: float, row_sq: float, n: int) -> tuple[float, float]:
    """Unbiased ``|E g|^2`` and ``tr(Sigma)`` from ``|sum g_j|^2``, ``sum |g_j|^2`` and ``n``."""
    return (total_sq - row_sq) / (n * (n - 1)), (row_sq - total_sq / n) / (n - 1)


def noise_scale_terms(grads: torch.Tensor) -> tuple[float, float]:
    """Unbiased ``|E g|^2`` and ``tr(Sigma)`` from per-group gradients ``[n, P]`` (n >= 2)."""
    n = grads.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 groups, got {n}")
    total = grads.sum(0)
    return _terms(float(total @ total), float((grads * grads).sum()), n)


def noise_scale(grads: torch.Tensor) -> dict[str, float]:
    """``B = tr(Sigma) / |E g|^2`` in groups, with jackknife SEs over groups, and both terms.

    ``B`` is infinite when the signal estimate is not positive (no resolvable direction). A ratio
    with a noisy denominator has a wild jackknife, so ``noise_scale_groups_lower`` is the sturdier
    figure: ``tr(Sigma) / (|E g|^2 + 2 SE)``, B with the signal two SEs above its estimate.
    SEs are NaN with fewer than 3 groups (and B's when a leave-one-out B is infinite)."""
    n = grads.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 groups, got {n}")
    total = grads.sum(0)
    row_norms = (grads * grads).sum(1)
    row_sq = float(row_norms.sum())
    signal, trace = _terms(float(total @ total), row_sq, n)
    ratios, signals = [], []
    for k in range(n) if n > 2 else ():  # without group k: the sums lose g_k
        without = total - grads[k]
        s, t = _terms(float(without @ without), row_sq - float(row_norms[k]), n - 1)
        signals.append(s)
        ratios.append(t / s if s > 0 else math.inf)
    signal_se, ratio_se = _jackknife_se(signals), _jackknife_se(ratios)
    return {"signal_norm2": signal, "signal_norm2_se": signal_se, "trace_cov": trace,
            "noise_scale_groups": trace / signal if signal > 0 else math.inf, "noise_scale_groups_se": ratio_se,
            "noise_scale_groups_lower": trace / (signal + 2 * signal_se) if signal + 2 * signal_se > 0 else math.inf,
            "groups": n, "groups_with_gradient": int((row_norms > 0).sum())}


def _jackknife_se(leave_one_out: list[float]) -> float:
    n = len(leave_one_out)
    if n < 3 or not all(map(math.isfinite, leave_one_out)):
        return math.nan
    values = np.array(leave_one_out)
    return float(math.sqrt((n - 1) / n * ((values - values.mean()) ** 2).sum()))


def expected_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine of ``E a`` and ``E b`` from per-group gradients ``[n, P]`` of the same groups, using
    only cross-group products (``j != k``), so neither stream's own noise inflates it."""
    n = a.shape[0]
    cross = (float(a.sum(0) @ b.sum(0)) - float((a * b).sum())) / (n * (n - 1))
    sa, sb = noise_scale_terms(a)[0], noise_scale_terms(b)[0]
    return cross / math.sqrt(sa * sb) if sa > 0 and sb > 0 else math.nan


def half_batch_agreement(grads: torch.Tensor) -> dict[str, float]:
    """The first half of the groups against the second: gradient cosine and sign agreement."""
    import torch

    half = grads.shape[0] // 2
    a, b = grads[:half].mean(0), grads[half:2 * half].mean(0)
    both = (a != 0) & (b != 0)
    return {"half_batch_cosine": float(torch.nn.functional.cosine_similarity(a, b, dim=0)),
            "half_batch_sign_agreement": float((torch.sign(a) == torch.sign(b))[both].float().mean())}


# ------------------------------------------------------------------ measuring one policy
def collect_batch(runs: Path, policy_name: str, groups: int, seed: int, tasks: list[int],
                  temperature: float = 1.0) -> dict:
    """One batch of all-anchor groups from the policy: rollouts, real and world-model scores.

    Saved as ``<run>/gradient-batch-g<groups>[-t<T>].pt`` (the simulator time is the expensive part), so
    the analysis reruns from it; only whole groups with both scores are kept."""
    import torch

    out = runs / policy_name / f"gradient-batch-g{groups}{temperature_suffix(temperature)}.pt"
    if out.exists():
        return torch.load(out, weights_only=False)  # our own file, written below
    print(f"{policy_name}: {groups} groups of {GROUP_SIZE} episodes, executed and scored", flush=True)
    from trainers.families.libero import LiberoAdapter
    from trainers.wmrl import WMRLTrainer
    from trainers.wmrl_config import WMRLConfig

    path = runs / policy_name / "policy.pt"
    config = WMRLConfig.from_flat(
        mode="wmrl", env_id="wmrl/LIBERO-Long-v0", policy="vla", policy_path=str(path), steps=2,
        tasks_per_step=groups, group_size=GROUP_SIZE, warmup_steps=1, warmup_anchor_fraction=1.0,
        anchor_fraction=1.0, max_anchor_fraction=1.0, calibration_min_pairs_global=8, seed=seed,
        output_dir=tempfile.mkdtemp(prefix="wmrl-gradient-noise-"), checkpoint_every=0,
        tensorboard=False)  # the trainer only collects here: its run folder stays empty
    adapter = LiberoAdapter(task_ids=tasks, seed=seed, obs_mode="state")
    trainer = WMRLTrainer(config, load_policy(runs, policy_name, temperature), adapter)
    try:
        outcomes = trainer.collect(0)  # every group an anchor: executed and scored
    finally:
        adapter.close()
        Path(config.output_dir).rmdir()
    whole = [o for o in outcomes
             if np.isfinite(o.scored.real).all() and np.isfinite(o.scored.wm_raw).all()]
    wm_raw = np.concatenate([o.scored.wm_raw for o in whole])
    task_ids = [o.scored.task_id for o in whole for _ in o.rollouts]
    batch = {"rollouts": [r for o in whole for r in o.rollouts],
             "group_ids": [o.group_id for o in whole for _ in o.rollouts],
             "real": np.concatenate([o.scored.real for o in whole]), "wm_raw": wm_raw,
             "calibrated": trainer.calibrator.calibrate(wm_raw, task_ids), "seed": seed}
    tmp = out.with_suffix(".tmp")
    torch.save(batch, tmp)
    tmp.replace(out)
    return batch


def state_values(rollouts, every: int, model) -> list[np.ndarray]:
    """A success model's P(success | states so far) at every step of each rollout, read every
    ``every`` steps and held in between: ``V`` at step ``t`` sees states ``0..t`` only (the state
    action ``t`` is taken in, and earlier ones), so as a baseline it leaves the gradient unbiased."""
    from agents.vla.policy import MiniVLAPolicy

    values = []
    for rollout in rollouts:
        episode = MiniVLAPolicy.states_trajectory(rollout)
        steps = episode.steps + 1  # one state per action
        values.append(np.repeat(model.predict([episode.prefix(t) for t in range(0, steps, every)]), every)[:steps])
    return values


def state_baseline_advantages(real: np.ndarray, values: list[np.ndarray], tokens_per_step: int) -> list[np.ndarray]:
    """Per-token advantages ``R_i - V_i(s_t)``, each step's value repeated over its action tokens."""
    return [np.repeat(r - v, tokens_per_step) for r, v in zip(real, values)]


#: Steps at which the report shows how well the value predicts the episode's outcome.
VALUE_STEPS = (0, 100, 200, 300, 400)


def value_auroc_by_step(real: np.ndarray, values: list[np.ndarray]) -> dict[str, float]:
    """AUROC of ``V(s_t)`` for the episode's real outcome at each of :data:`VALUE_STEPS`, over
    the episodes still running then (an episode that succeeded earlier has ended)."""
    out = {}
    for t in VALUE_STEPS:
        alive = [i for i, v in enumerate(values) if len(v) > t]
        out[str(t)] = auroc(real[alive], np.array([values[i][t] for i in alive])) if alive else math.nan
    return out


def temperature_suffix(temperature: float) -> str:
    """File-name suffix of a batch drawn at ``temperature`` (none at 1, the fine-tunes' default)."""
    return "" if temperature == 1.0 else f"-t{temperature:g}"


def load_policy(runs: Path, policy_name: str, temperature: float = 1.0):
    from agents.vla.policy import MiniVLAPolicy

    policy = MiniVLAPolicy.load(runs / policy_name / "policy.pt")
    policy.config.temperature = temperature
    return policy


def measure(policy, policy_name: str, batch: dict, baseline_every: int) -> dict:
    """Every figure of the module docstring from one saved batch, at the policy that drew it."""
    import torch

    from trainers import grpo
    from wmrl_envs.libero.reward_model import load_reward_model

    rollouts, group_ids, real = batch["rollouts"], batch["group_ids"], batch["real"]
    params = [p for p in policy.parameters() if p.requires_grad]
    groups_in_order = list(dict.fromkeys(group_ids))
    members = {gid: [i for i, g in enumerate(group_ids) if g == gid] for gid in groups_in_order}

    def per_group_of(advantages: list[torch.Tensor]) -> torch.Tensor:
        return per_group_gradients(policy, rollouts, group_ids, advantages)

    def per_group(rewards: np.ndarray, advantage: str) -> torch.Tensor:
        return per_group_of(list(grpo.group_advantages(rewards, group_ids, mode=advantage)))

    real_grads = per_group(real, "std")
    real_mean_grads = per_group(real, "mean")
    values = state_values(rollouts, baseline_every, load_reward_model())
    tokens_per_step = rollouts[0].logp.numel() // len(values[0])
    baseline_grads = per_group_of([torch.as_tensor(a, dtype=torch.float32)
                                   for a in state_baseline_advantages(real, values, tokens_per_step)])
    blocks, offset = {}, 0
    for name, p in policy.named_parameters():
        if p.requires_grad:
            blocks[name] = noise_scale(real_grads[:, offset:offset + p.numel()])["noise_scale_groups"]
            offset += p.numel()
    wm_grads = {mode: per_group(batch["calibrated"], mode) for mode in ("std", "mean")}
    advantages = grpo.group_advantages(real, group_ids, mode="std")
    half = len(groups_in_order) // 2
    first = [i for gid in groups_in_order[:half] for i in members[gid]]
    second = [i for gid in groups_in_order[half:2 * half] for i in members[gid]]
    everything = list(range(len(rollouts)))

    names = [name for name, p in policy.named_parameters() if p.requires_grad]

    def profile(pattern: str, gradient: torch.Tensor, on: list[int]) -> list[dict[str, float]]:
        trained = [bool(re.search(pattern, name)) for name in names]
        return adam_step_profile(policy, params, trained, [rollouts[i] for i in on], advantages[on], gradient)

    steps = {}
    for subset, pattern in TRAINED.items():
        in_sample = profile(pattern, real_grads.sum(0), everything)
        held_out = [profile(pattern, real_grads[:half].sum(0), second),
                    profile(pattern, real_grads[half:2 * half].sum(0), first)]
        steps[subset] = [{"learning_rate": a["learning_rate"], "kl_old_new": a["kl_old_new"],
                          "loss_change": a["loss_change"],
                          "loss_change_other_half": (b["loss_change"] + c["loss_change"]) / 2}
                         for a, b, c in zip(in_sample, *held_out)]
    return {
        "policy": policy_name, "seed": batch["seed"], "temperature": policy.config.temperature,
        "groups": len(groups_in_order), "episodes": len(rollouts),
        "parameters": int(real_grads.shape[1]), "real_success": float(real.mean()),
        "silent_share_real": float(np.mean([real[idx].std() == 0 for idx in members.values()])),
        "real": {**noise_scale(real_grads), **half_batch_agreement(real_grads), "by_parameter": blocks},
        "real_mean_advantage": {**noise_scale(real_mean_grads), **half_batch_agreement(real_mean_grads)},
        "real_state_baseline": {**noise_scale(baseline_grads), **half_batch_agreement(baseline_grads),
                                "expected_cosine_with_mean_advantage": expected_cosine(baseline_grads, real_mean_grads),
                                "baseline_every": baseline_every,
                                "value_at_start": float(np.mean([v[0] for v in values])),
                                "value_auroc_by_step": value_auroc_by_step(real, values)},
        "world_model": {mode: {**noise_scale(g), "expected_cosine_with_real": expected_cosine(g, real_grads)}
                        for mode, g in wm_grads.items()},
        "adam_first_step": steps,
    }


def per_group_gradients(policy, rollouts, group_ids, advantages) -> torch.Tensor:
    """``[groups, P]``: one gradient of the GRPO surrogate per group (in first-seen order) at the
    policy's trained parameters, from each sample's advantage (a scalar or one per token)."""
    import torch

    from agents.base import pad_logps

    params = [p for p in policy.parameters() if p.requires_grad]
    rows = []
    for gid in dict.fromkeys(group_ids):
        idx = [i for i, g in enumerate(group_ids) if g == gid]
        adv = [advantages[i] for i in idx]
        if not any(float(a.abs().sum()) for a in adv):
            rows.append(torch.zeros(sum(p.numel() for p in params)))
            continue
        group_adv = torch.stack(adv) if adv[0].dim() == 0 else pad_logps(adv)[0]
        loss, _ = surrogate_loss(policy, [rollouts[i] for i in idx], group_adv, kl_coef=0.0)
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
    return torch.stack(rows)


def noise_scale_bounds(stats: dict[str, float]) -> tuple[float, float]:
    """B with the signal two SEs above and below its estimate: ``tr(Sigma) / (|E g|^2 +- 2 SE)``
    (infinite where that signal is not positive)."""
    signal, se, trace = stats["signal_norm2"], stats["signal_norm2_se"], stats["trace_cov"]
    return tuple(trace / s if s > 0 else math.inf for s in (signal + 2 * se, signal - 2 * se))  # type: ignore[return-value]


def shaped_rewards(rollouts, real: np.ndarray, model) -> dict[str, np.ndarray]:
    """The shaped reward of each episode (``wmrl_envs/scoring/shaping.py``): its success plus the
    rise of the success model's potential, ``Phi_T - Phi_0``, raw and through a calibrator fitted
    on the batch's own (``Phi_T``, success) pairs (in-sample, as the batch's calibrated scores).
    ``Phi_T`` is read at the last state the policy acted in, one step before the episode's end:
    a saved rollout keeps the states its policy read."""
    from agents.vla.policy import MiniVLAPolicy
    from wmrl_envs.calibration import Calibrator, CalibratorConfig
    from wmrl_envs.scoring.shaping import shaped_return

    start, end = np.array([model.potentials(MiniVLAPolicy.states_trajectory(r)) for r in rollouts]).T
    tasks = [r.task_id for r in rollouts]
    calibrator = Calibrator(CalibratorConfig(min_pairs_global=8))
    calibrator.add_pairs(end, real, tasks)
    return {"potential_start": start, "potential_end": end,
            "shaped": shaped_return(real, calibrator.calibrate(end, tasks), calibrator.calibrate(start, tasks)),
            "shaped_raw": shaped_return(real, end, start)}


#: The rewards the shaped measurement compares, and how the report names them.
SHAPED_REWARDS = {"sparse": "sparse (success)", "shaped": "shaped (calibrated)", "shaped_raw": "shaped (raw)"}


def measure_shaped(policy, policy_name: str, batch: dict, model, fine_tune_groups: int = 16) -> dict:
    """The gradient noise scale of the shaped reward against the sparse one, on one saved batch:
    GRPO's advantage (std) over the same groups, at the policy that drew it; ``model`` is the
    success model whose readings are the potential."""
    from trainers import grpo

    rollouts, group_ids, real = batch["rollouts"], batch["group_ids"], batch["real"]
    rewards = {"sparse": real, **shaped_rewards(rollouts, real, model)}
    grads = {name: per_group_gradients(policy, rollouts, group_ids,
                                       list(grpo.group_advantages(rewards[name], group_ids, mode="std")))
             for name in SHAPED_REWARDS}
    members = [[i for i, g in enumerate(group_ids) if g == gid] for gid in dict.fromkeys(group_ids)]
    out = {"policy": policy_name, "seed": batch["seed"], "temperature": policy.config.temperature,
           "groups": len(members), "episodes": len(rollouts), "real_success": float(real.mean()),
           "potential_end_auroc": auroc(real, rewards["potential_end"]),
           "potential_start_mean": float(rewards["potential_start"].mean()), "fine_tune_groups": fine_tune_groups}
    for name in SHAPED_REWARDS:
        stats = noise_scale(grads[name])
        lower, upper = noise_scale_bounds(stats)
        out[name] = {**stats, "noise_scale_groups_lower": lower, "noise_scale_groups_upper": upper,
                     "silent_share": float(np.mean([np.ptp(rewards[name][m]) == 0 for m in members])),
                     "expected_cosine_with_sparse": expected_cosine(grads[name], grads["sparse"])}
    b_sparse, b_shaped = out["sparse"]["noise_scale_groups"], out["shaped"]["noise_scale_groups"]
    # Steps to the same progress at the fine-tunes' batch, shaped over sparse (McCandlish et al.: 1 + B / b).
    out["steps_ratio_at_fine_tune_batch"] = ((1 + b_shaped / fine_tune_groups) / (1 + b_sparse / fine_tune_groups)
                                             if math.isfinite(b_shaped) and math.isfinite(b_sparse) else math.nan)
    return out


def shaped_report(results: list[dict]) -> str:
    """B of the shaped reward against the sparse one, per policy and over policies."""

    def b(stats: dict) -> str:
        return (f"{stats['noise_scale_groups']:.0f} [{stats['noise_scale_groups_lower']:.0f}, "
                f"{stats['noise_scale_groups_upper']:.0f}]")

    lines = ["# Gradient noise scale on LIBERO-Long: the shaped reward against the sparse one", "",
             (f"One batch per policy ({results[0]['groups']} groups of {GROUP_SIZE} episodes, training init states, "
              f"temperature {', '.join(sorted({format(r['temperature'], 'g') for r in results}))}), every episode executed "
              "to its end. Sparse: the simulator's success. Shaped: the success plus the rise of the success "
              "model's P(success | states so far), Phi_T - Phi_0 (gamma 1), calibrated on the batch's own "
              "(Phi_T, success) pairs, or raw. GRPO's advantage (std) over the same groups, gradients at the "
              "start. B in groups, with the signal 2 SE above and below its estimate in brackets (infinite where "
              "that signal is not positive). The cosine of the expected gradients uses cross-group products only "
              "(unbiased terms, so its ratio can leave [-1, 1] when the signals are this weak); the steps ratio is "
              f"(1 + B_shaped/b) / (1 + B_sparse/b) at b = {results[0]['fine_tune_groups']} groups, n/a where "
              "either B is infinite."), "",
             "| policy | episodes | success | AUROC of Phi_T | silent groups: sparse / shaped | "
             + " | ".join(f"B, {label}" for label in SHAPED_REWARDS.values())
             + f" | cos(E g_shaped, E g_sparse) | steps at {results[0]['fine_tune_groups']} groups, shaped / sparse |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(SHAPED_REWARDS) + "---:|---:|"]
    for r in results:
        lines.append(f"| {r['policy']} | {r['episodes']} | {r['real_success']:.2f} | {r['potential_end_auroc']:.2f} | "
                     f"{r['sparse']['silent_share']:.2f} / {r['shaped']['silent_share']:.2f} | "
                     + " | ".join(b(r[name]) for name in SHAPED_REWARDS)
                     + f" | {_or_na(r['shaped']['expected_cosine_with_sparse'])} | "
                     f"{_or_na(r['steps_ratio_at_fine_tune_batch'])} |")
    summary = "; ".join(f"{label} {_mean_se([r[name]['noise_scale_groups_lower'] for r in results])}"
                        for name, label in SHAPED_REWARDS.items())
    lines += ["", f"Mean over policies of B's lower bound: {summary}."]
    return "\n".join(lines)


def _or_na(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def surrogate_loss(policy, rollouts, advantages, kl_coef: float):
    """The GRPO clipped surrogate at the policy, with the rollout policy as the KL reference."""
    from agents.base import pad_logps
    from trainers import grpo

    logp, mask = policy.log_probs(rollouts)
    old, _ = pad_logps([r.logp for r in rollouts])
    return grpo.clipped_surrogate_loss(logp, old, advantages, mask=mask, aggregation="sequence",
                                       ref_logp=old, kl_coef=kl_coef)


def adam_step_profile(policy, params, trained, rollouts, advantages, gradient) -> list[dict[str, float]]:
    """The clipped surrogate (KL 0.05 to the start) and KL(old || new) on ``rollouts`` after
    Adam's first step, ``-lr * sign(gradient)`` on the ``trained`` parameters (flags, one per
    parameter), at each of :data:`PROBE_LEARNING_RATES`."""
    import torch

    start = [p.detach().clone() for p in params]
    signs, offset = [], 0
    for p, moves in zip(params, trained):
        sign = torch.sign(gradient[offset:offset + p.numel()]).reshape(p.shape)
        signs.append(sign if moves else torch.zeros_like(sign))
        offset += p.numel()

    def evaluate() -> tuple[float, float]:
        with torch.no_grad():
            loss, stats = surrogate_loss(policy, rollouts, advantages, kl_coef=KL_COEF)
        return float(loss), stats["policy/approx_kl"]

    loss0, _ = evaluate()
    profile = []
    try:
        for lr in PROBE_LEARNING_RATES:
            with torch.no_grad():
                for p, p0, s in zip(params, start, signs):
                    p.copy_(p0 - lr * s)
            loss, kl = evaluate()
            profile.append({"learning_rate": lr, "loss_change": loss - loss0, "kl_old_new": kl})
    finally:
        with torch.no_grad():
            for p, p0 in zip(params, start):
                p.copy_(p0)
    return profile


# ------------------------------------------------------------------ report
def _mean_se(values: list[float]) -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "n/a"
    mean, se = mean_se(values)
    return f"{mean:.3g} ± {se:.2g}" if math.isfinite(se) else f"{mean:.3g}"


def report(results: list[dict]) -> str:
    def over_policies(get) -> str:
        return _mean_se([get(r) for r in results])

    temperatures = sorted({r.get("temperature", 1.0) for r in results})
    intro = (f"One batch per starting policy, sampled at temperature {', '.join(f'{t:g}' for t in temperatures)}; "
             f"every group of {GROUP_SIZE} both executed and scored by the success model; gradients at the start. "
             "Mean ± SE over policies.")
    header = ("| policy | episodes | silent groups (real) | noise scale B, groups (real; ± jackknife SE; lower: "
              "signal +2 SE) | half-batch cosine | half-batch sign agreement | B, world model (std adv.) | "
              "cos(E g_wm, E g_real) std / mean adv. |")
    lines = ["# Gradient noise scale of GRPO on LIBERO-Long (MiniVLA, state input)", "", intro, "", header,
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        real, wm = r["real"], r["world_model"]
        lines.append(
            f"| {r['policy']} | {r['episodes']} | {r['silent_share_real']:.2f} | "
            f"{real['noise_scale_groups']:.0f} ± {real['noise_scale_groups_se']:.0f} (lower "
            f"{real['noise_scale_groups_lower']:.0f}) | {real['half_batch_cosine']:.3f} | "
            f"{real['half_batch_sign_agreement']:.3f} | {wm['std']['noise_scale_groups']:.0f} ± "
            f"{wm['std']['noise_scale_groups_se']:.0f} | {wm['std']['expected_cosine_with_real']:.2f} / "
            f"{wm['mean']['expected_cosine_with_real']:.2f} |")
    summary = (f"Mean over policies: B (real) {over_policies(lambda r: r['real']['noise_scale_groups'])} groups "
               f"(lower bounds {over_policies(lambda r: r['real']['noise_scale_groups_lower'])}); B (world model) "
               f"{over_policies(lambda r: r['world_model']['std']['noise_scale_groups'])}; cos(E g_wm, E g_real) "
               f"{over_policies(lambda r: r['world_model']['std']['expected_cosine_with_real'])}; half-batch sign "
               f"agreement {over_policies(lambda r: r['real']['half_batch_sign_agreement'])}.")
    steps_intro = ("Adam's first step (clipped surrogate with KL 0.05 to the start, change from the start; negative "
                   "is better): taken from the whole batch and scored on it (in-sample), and taken from one half of "
                   "the groups and scored on the other (out-of-sample, both ways averaged):")
    lines += ["", summary, "", steps_intro]
    for subset in TRAINED:
        lines += ["", f"Trained: {subset}", "",
                  "| learning rate | loss change, in-sample | loss change, other half | KL(old ‖ new) per token |",
                  "|---:|---:|---:|---:|"]
        for k, lr in enumerate(PROBE_LEARNING_RATES):
            steps = [r["adam_first_step"][subset][k] for r in results]
            lines.append(f"| {lr:g} | {_mean_se([s['loss_change'] for s in steps])} | "
                         f"{_mean_se([s['loss_change_other_half'] for s in steps])} | "
                         f"{_mean_se([s['kl_old_new'] for s in steps])} |")
    if all("real_state_baseline" in r for r in results):
        lines += ["", baseline_table(results)]
    names = list(results[0]["real"]["by_parameter"])
    by_name = {n: [r["real"]["by_parameter"][n] for r in results] for n in names}
    blocks_intro = ("Noise scale of each parameter tensor alone (real rewards; an update training only that "
                    "tensor), smallest first; n/a where no batch resolves a direction:")
    lines += ["", blocks_intro, "", "| tensor | B, groups | policies with finite B |", "|---|---:|---:|"]
    finite_mean = {n: np.mean([v for v in vs if math.isfinite(v)] or [math.inf]) for n, vs in by_name.items()}
    for n in sorted(names, key=lambda n: finite_mean[n]):
        vs = by_name[n]
        lines.append(f"| {n} | {_mean_se(vs)} | {sum(map(math.isfinite, vs))}/{len(vs)} |")
    return "\n".join(lines)


def baseline_table(results: list[dict]) -> str:
    """Noise scale of the real-reward gradient under three advantages: GRPO's, the mean-only one,
    and the state-value baseline (same expected gradient as mean-only, up to scale)."""
    intro = ("Real rewards, three advantages of the same episodes: GRPO's `(R - mean_g) / std_g`, the mean-only "
             "`R - mean_g` (Dr.GRPO), and the state-value baseline `R - V(s_t)` per action (V: the success "
             "model's P(success | states so far)). B in groups (lower: signal +2 SE); the last columns check the "
             "baseline: the cosine of its expected gradient with the mean-only one's (1 when both are resolved "
             "and unbiased), and the AUROC of V for the outcome at steps " + ", ".join(map(str, VALUE_STEPS)) + ". "
             "Noise at equal signal: tr(Sigma) of the state baseline over that of the mean-only advantage, whose "
             f"expected gradient is (G - 1) / G = {(GROUP_SIZE - 1) / GROUP_SIZE:g} of the baseline's, so its "
             "tr(Sigma) is divided by that squared; below 1 the baseline removes noise, and B falls by the same factor.")
    lines = [intro, "", "| policy | B, GRPO | B, mean-only | B, state baseline | noise at equal signal, state "
             "baseline / mean-only | sign agreement of half batches (mean-only / state baseline) | "
             "cos(E g_baseline, E g_mean) | AUROC of V by step |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]

    def b(stats: dict) -> str:
        return f"{stats['noise_scale_groups']:.0f} (lower {stats['noise_scale_groups_lower']:.0f})"

    ratios = [noise_ratio_at_equal_signal(r) for r in results]
    for r, ratio in zip(results, ratios):
        mean, base = r["real_mean_advantage"], r["real_state_baseline"]
        aurocs = " / ".join(f"{v:.2f}" for v in base["value_auroc_by_step"].values())
        lines.append(f"| {r['policy']} | {b(r['real'])} | {b(mean)} | {b(base)} | {ratio:.2f} | "
                     f"{mean['half_batch_sign_agreement']:.3f} / {base['half_batch_sign_agreement']:.3f} | "
                     f"{base['expected_cosine_with_mean_advantage']:.2f} | {aurocs} |")
    lower = {name: _mean_se([r[key]["noise_scale_groups_lower"] for r in results])
             for name, key in (("GRPO", "real"), ("mean-only", "real_mean_advantage"),
                               ("state baseline", "real_state_baseline"))}
    lines += ["", "Mean over policies: lower bounds of B " + ", ".join(f"{k} {v}" for k, v in lower.items())
              + f"; noise at equal signal, state baseline / mean-only, {_mean_se(ratios)}."]
    return "\n".join(lines)


def noise_ratio_at_equal_signal(result: dict) -> float:
    """tr(Sigma) of the state-baseline gradient over the mean-only one's rescaled to the same
    expected gradient (the mean-only advantage shrinks it by (G - 1) / G)."""
    shrink = (GROUP_SIZE - 1) / GROUP_SIZE
    return result["real_state_baseline"]["trace_cov"] / (result["real_mean_advantage"]["trace_cov"] / shrink**2)


def main() -> None:
    from wmrl_envs.libero.reward_model import load_reward_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/libero"), help="bench/libero_vla.py's run folders")
    parser.add_argument("--policies", nargs="+", default=["bc-s6", "bc-s3", "bc-s7"])
    parser.add_argument("--groups", type=int, default=32, help="groups of 4 episodes per policy's batch")
    parser.add_argument("--tasks", type=int, nargs="+", default=[0, 2, 3, 5, 7])
    parser.add_argument("--seed", type=int, default=100, help="seeds the batch's tasks, init states and sampling")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the batch")
    parser.add_argument("--baseline-every", type=int, default=20,
                        help="steps between the success model's readings of V(s_t) for the state-value baseline")
    parser.add_argument("--shaped", action="store_true",
                        help="measure B of the shaped reward (success + calibrated rise of P(success | prefix)) "
                             "against the sparse success on the same batches, instead of the figures above")
    parser.add_argument("--result", default=None,
                        help="name of the bench/results/<name>.{json,md} files written (default: "
                             "libero_gradient_noise, with --shaped libero_gradient_noise_shaped)")
    args = parser.parse_args()
    if args.groups < 4:
        raise SystemExit("--groups must be at least 4 (two halves of two groups)")
    if not args.temperature > 0:
        raise SystemExit(f"--temperature must be > 0, got {args.temperature}")
    if args.baseline_every < 1:
        raise SystemExit(f"--baseline-every must be at least 1, got {args.baseline_every}")
    setup_threads()
    result = args.result or ("libero_gradient_noise_shaped" if args.shaped else "libero_gradient_noise")
    if args.shaped:
        shaped = []
        for name in args.policies:
            out = args.runs / name / f"gradient-noise-shaped-g{args.groups}{temperature_suffix(args.temperature)}.json"
            if not out.exists():
                batch = collect_batch(args.runs, name, args.groups, args.seed, args.tasks, args.temperature)
                policy = load_policy(args.runs, name, args.temperature)
                out.write_text(json.dumps(measure_shaped(policy, name, batch, load_reward_model()), indent=2,
                                          default=float))
            shaped.append(json.loads(out.read_text()))
        md = write_result(result, __spec__.name, {"policies": args.policies, "groups": args.groups,
                                                  "temperature": args.temperature, "results": shaped},
                          shaped_report(shaped))
        print(md.read_text())
        return
    results = []
    for name in args.policies:
        out = args.runs / name / f"gradient-noise-g{args.groups}{temperature_suffix(args.temperature)}.json"
        measured = json.loads(out.read_text()) if out.exists() else None
        if measured is None or measured.get("real_state_baseline", {}).get("baseline_every") != args.baseline_every:
            batch = collect_batch(args.runs, name, args.groups, args.seed, args.tasks, args.temperature)
            policy = load_policy(args.runs, name, args.temperature)
            out.write_text(json.dumps(measure(policy, name, batch, args.baseline_every),
                                      indent=2, default=float))
        results.append(json.loads(out.read_text()))
    md = write_result(result, __spec__.name, {"policies": args.policies, "groups": args.groups,
                                    "temperature": args.temperature, "results": results}, report(results))
    print(md.read_text())


if __name__ == "__main__":
    main()
