"""Shared test set-up: one thread everywhere (2 threads under contention ran 10-25x slower here)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import torch
except ImportError:  # torch is optional for the env-only tests
    pass
else:
    torch.set_num_threads(1)
