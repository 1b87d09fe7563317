"""Small fitted models kept as JSON files under ``assets/world_models/`` (one read and write for all).

A file holds the model's dataclass fields and a ``format`` number; a file of another format, or
none at all, is a :class:`~wmrl_envs.errors.ConfigError` that says how to rebuild it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError


def read_artefact(path: Path, what: str, fmt: int, rebuild: str) -> dict[str, Any]:
    """The fields of the ``what`` file at ``path`` (its ``format`` checked against ``fmt`` and dropped)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no {what} at {path}: build it with {rebuild}") from None
    if data.get("format") != fmt:
        raise ConfigError(f"{path}: {what} format {data.get('format')!r}, this version reads {fmt}")
    return {k: v for k, v in data.items() if k != "format"}


def write_artefact(path: Path, fmt: int, fields: dict[str, Any]) -> Path:
    """Write ``fields`` (JSON-ready: tuples as lists) with their ``format`` to ``path``."""
    path.write_text(json.dumps({"format": fmt, **fields}, indent=1, sort_keys=True) + "\n")
    return path
