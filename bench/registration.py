"""What a registered experiment checks before it runs: that it runs what was registered.

A registration (``bench/results/<name>_registration.md``) fixes an experiment's settings in its
first fenced ``json`` block, written before any run. A bench that runs it computes its settings
from the code (defaults resolved), refuses to run when they differ from the block, and refuses
to mix an archived run made under other settings with the registered ones
(``bench/oos_training_screen.py``, ``bench/confirmation.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def settings_block(found: Mapping[str, Any]) -> str:
    """``found`` as the registration's JSON block: a key a line, a long mapping a key a line inside."""
    lines = []
    for key, value in found.items():
        if isinstance(value, Mapping) and len(json.dumps(value)) > 100:
            inner = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
            lines.append(f" {json.dumps(key)}: {{\n{inner}\n }}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}"


def differing(left: Any, right: Any, prefix: str = "") -> list[str]:
    """The dotted keys where two settings differ (the whole value where either is not a mapping)."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return [d for key in sorted(set(left) | set(right), key=str)
                for d in differing(left.get(key), right.get(key), f"{prefix}{key}.")]
    return [] if left == right else [prefix.rstrip(".") or "(all)"]


def registered_settings(text: str, where: str = "the registration") -> dict[str, Any]:
    """The settings a registration fixes: its first fenced ``json`` block."""
    match = re.search(r"^```json\n(.*?)^```", text, re.S | re.M)
    if match is None:
        raise SystemExit(f"{where} has no ```json block of settings")
    return json.loads(match.group(1))


def check_registration(text: str, current: dict[str, Any], where: str = "the registration") -> None:
    """Refuse to run unless the registration fixes exactly ``current``."""
    differ = differing(registered_settings(text, where), current)
    if differ:
        raise SystemExit(f"the bench's settings differ from {where}'s in {', '.join(differ)}: what runs must "
                         "be what was registered. Register anew or run the registered code.")


def pending_runs(planned: Iterable[str], finished: Mapping[str, dict[str, Any]], current: dict[str, Any],
                 archive: Path | str = "the archive") -> list[str]:
    """The planned runs the archive does not hold yet, in plan order. A run it holds that was made
    under other settings stops the bench: it cannot be mixed with these, nor silently redone."""
    planned = list(planned)
    for name in planned:
        if name in finished:
            differ = differing(finished[name].get("settings"), current)
            if differ:
                raise SystemExit(f"{Path(archive).name}: {name} was run under other settings ({', '.join(differ)})")
    return [name for name in planned if name not in finished]
