"""How much a grammar policy's choices depend on the task.

A policy that answers every task with the same choices has learnt a good *average* solution,
not a task-conditioned one. :func:`choice_task_dependence` measures, per slot, the mutual
information between the task and the chosen option, ``I(T; C) = H(C) - H(C | T)`` in bits,
with tasks weighted equally and options estimated from ``samples`` draws per task.

The plug-in estimate is biased upwards by about ``(|C| - 1)(|T| - 1) / (2 N ln 2)`` bits for N
draws in all; compare policies at the same ``samples`` (an untrained, near-uniform policy
shows that floor).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from agents.code.grammar import SLOTS


def _entropy_bits(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def choice_task_dependence(policy, tasks: Sequence, samples: int = 64, seed: int = 0) -> dict[str, float]:
    """``{slot: I(task; choice) in bits}`` from ``samples`` sampled solutions per task."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        rollouts = policy.generate(list(tasks), samples, list(range(len(tasks))), generator)
    out = {}
    for slot, options in SLOTS.items():
        counts = np.zeros((len(tasks), len(options)))
        for r in rollouts:
            counts[r.group_id, options.index(r.meta["choices"][slot])] += 1
        conditional = np.mean([_entropy_bits(row) for row in counts])
        out[slot] = max(_entropy_bits(counts.sum(axis=0)) - conditional, 0.0)  # rounding can dip below 0
    return out


def dependence_markdown(rows: dict[str, dict[str, float]], samples: int, n_tasks: int) -> str:
    """A table of per-slot task dependence for each named policy (``{policy: {slot: bits}}``)."""
    slots = list(SLOTS)
    lines = ["| policy | " + " | ".join(slots) + " |", "|---|" + "---|" * len(slots)]
    lines += [f"| {name} | " + " | ".join(f"{bits[s]:.3f}" for s in slots) + " |" for name, bits in rows.items()]
    ceiling = " | ".join(f"{np.log2(len(SLOTS[s])):.2f}" for s in slots)
    lines.append(f"| *most possible* | {ceiling} |")
    return (f"Mutual information between task and choice, in bits, per slot ({samples} samples on each of "
            f"{n_tasks} tasks; the plug-in estimate is biased up by about (options - 1)(tasks - 1) / "
            f"(2 N ln 2), which the untrained policy shows).\n\n" + "\n".join(lines) + "\n")
