"""The compute ledger: every comparison of methods reads its compute from here (docs/architecture.md §4).

Compute is counted in resource-seconds, not elapsed time: ten sandbox runs of 3 s each cost
30 execution-seconds whether they ran in parallel or not. Each category records CPU-seconds
(what the work consumed) and wall-seconds (how long the work units took, summed), plus a
count of units (responses generated, scripts scored, scripts executed, simulator steps).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("generation", "world_model", "execution", "simulation", "update")


@dataclass
class Entry:
    cpu_s: float = 0.0
    wall_s: float = 0.0
    count: int = 0

    def add(self, cpu_s: float, wall_s: float, count: int) -> None:
        self.cpu_s += float(cpu_s)
        self.wall_s += float(wall_s)
        self.count += int(count)


@dataclass
class ComputeLedger:
    """Cumulative and per-step compute by category."""

    totals: dict[str, Entry] = field(default_factory=lambda: {c: Entry() for c in CATEGORIES})
    steps: list[dict[str, Any]] = field(default_factory=list)
    _current: dict[str, Entry] = field(default_factory=lambda: {c: Entry() for c in CATEGORIES})

    def add(self, category: str, cpu_s: float, wall_s: float, count: int = 1) -> None:
        """Charge work done outside this process (e.g. sandbox runs) to ``category``."""
        if category not in self.totals:
            raise KeyError(f"unknown ledger category {category!r}; known: {CATEGORIES}")
        self.totals[category].add(cpu_s, wall_s, count)
        self._current[category].add(cpu_s, wall_s, count)

    @contextmanager
    def measure(self, category: str, count: int = 1) -> Iterator[None]:
        """Charge this process's CPU and wall time inside the block to ``category``."""
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.add(category, time.process_time() - cpu0, time.perf_counter() - wall0, count)

    def end_step(self, step: int) -> dict[str, float]:
        """Close the current step; return its ``cost/...`` metrics."""
        record = {"step": step}
        for cat, e in self._current.items():
            record[f"{cat}_cpu_s"], record[f"{cat}_wall_s"], record[f"{cat}_count"] = e.cpu_s, e.wall_s, e.count
        self.steps.append(record)
        self._current = {c: Entry() for c in CATEGORIES}
        return self.metrics()

    def total_cpu_s(self, include_update: bool = True) -> float:
        return sum(e.cpu_s for c, e in self.totals.items() if include_update or c != "update")

    def total_wall_s(self, include_update: bool = True) -> float:
        return sum(e.wall_s for c, e in self.totals.items() if include_update or c != "update")

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for cat, e in self.totals.items():
            out[f"cost/{cat}_s"] = e.wall_s
            out[f"cost/{cat}_cpu_s"] = e.cpu_s
            out[f"cost/{cat}_count"] = e.count
        out["cost/total_cpu_s"] = self.total_cpu_s()
        out["cost/total_s"] = self.total_wall_s()
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"totals": {c: vars(e).copy() for c, e in self.totals.items()}, "steps": list(self.steps)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.totals = {c: Entry(**state["totals"].get(c, {})) for c in CATEGORIES}
        self.steps = list(state["steps"])
        self._current = {c: Entry() for c in CATEGORIES}
