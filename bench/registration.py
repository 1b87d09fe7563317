"""What a registered experiment checks before it runs: that it runs what was registered.

A registration (``bench/results/<name>_registration.md``) fixes an experiment's settings in its
first fenced ``json`` block, written before any run. A bench that runs it computes its settings
from the code (defaults resolved), refuses to run when they differ from the block, and refuses
to mix an archived run made under other settings with the registered ones
(``bench/oos_training_screen.py``, ``bench/confirmation.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.archive import add_run, archive_of, read_runs
from bench.training import ExecutionMemo
from wmrl_envs.provenance import provenance


def digest(path: Path) -> str:
    """A file's sha256, shortened: what a registration records of the data and models it runs on."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


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


def failed_name(name: str, archived: Mapping[str, Any]) -> str:
    """Where an archive keeps a run's failed attempt: ``failed/<run>-<n>.json``, the next free ``n``."""
    n = 1
    while f"failed/{name.removesuffix('.json')}-{n}.json" in archived:
        n += 1
    return f"failed/{name.removesuffix('.json')}-{n}.json"


def run_registered(registration: Path, runs: Path, scratch: Path, planned: Iterable[str],
                   settings: Callable[[], dict[str, Any]], prepare: Callable[[], None],
                   run_one: Callable[[str, ExecutionMemo, dict[str, Any]], dict[str, Any]], *,
                   report_only: bool = False, keep_failures: bool = False) -> dict[str, Any]:
    """Run a registered experiment's runs that ``runs``' archive does not hold yet, each archived as
    it finishes, and return the registered settings (with ``report_only``, only return them).

    It refuses when the registration is missing or fixes other settings than ``settings()`` (after
    ``prepare()``), and when the archive holds a run made under other settings. Executions are
    memoised under ``scratch`` across the runs. With ``keep_failures`` an attempt that raises is
    archived as ``failed/<run>-<n>.json`` with its error before the error goes on, so a report can
    say which runs were made again."""
    if not registration.is_file():
        raise SystemExit(f"{registration} is missing: register the experiment before running or reporting it")
    text = registration.read_text()
    registered = registered_settings(text, registration.name)
    if report_only:
        return registered
    prepare()
    current = settings()
    check_registration(text, current, registration.name)
    scratch.mkdir(parents=True, exist_ok=True)
    memo = ExecutionMemo(scratch / "memo.jsonl")
    todo = pending_runs(planned, read_runs(runs), current, archive_of(runs))
    print(f"{len(todo)} run(s) to go; the archive holds the others", flush=True)
    for name in todo:
        print(f"run {name} (load {os.getloadavg()[0]:.1f}) ...", flush=True)
        try:
            record = run_one(name, memo, current)
        except Exception as error:
            if keep_failures:
                add_run(runs, failed_name(name, read_runs(runs)), {"failed": True, "run": name, "settings": current,
                                                                   "error": f"{type(error).__name__}: {error}",
                                                                   "provenance": provenance()})
            raise
        add_run(runs, name, record)
        print(f"  held-out {record['final_heldout']:.3f}, {record['wall_s'] / 60:.1f} min", flush=True)
    return registered
