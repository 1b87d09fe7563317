"""Per-run records, kept as one compressed archive per run folder (issue 45).

The training benchmarks record each finished run (``bench/stress.py``, ``bench/buggy_agent.py``,
``bench/main_job.py``). One JSON file a run made the committed results hundreds of files; instead
the run folder ``F`` is one archive ``F.jsonl.xz``, beside where the folder would be: a line a run,
``{"path": <its path relative to F>, "record": <the run>}``, in path order, xz-compressed. LZMA's
window spans the whole archive, and the runs of a grid repeat their settings and most of their
anchor pairs, so it keeps them in half the bytes gzip does. The same records always give the same
bytes, so a rewritten archive differs from the committed one only where a run did.

A run folder's path keeps naming its runs: ``--runs F`` reads and extends ``F.jsonl.xz``, and a
run's former path ``F/<name>.json`` reads its record (:func:`read_record`), so the commands and
reports that name a folder or a run read the same records as before.

    xzcat bench/results/stress_runs/t_check.jsonl.xz | head -c 400     # a look, without Python
"""

from __future__ import annotations

import fcntl
import json
import lzma
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SUFFIX = ".jsonl.xz"


def archive_of(runs: Path) -> Path:
    """The archive that keeps the run folder ``runs``: ``<runs>.jsonl.xz`` (a path that already names
    an archive is itself)."""
    runs = Path(runs)
    return runs if runs.name.endswith(SUFFIX) else runs.with_name(runs.name + SUFFIX)


def read_runs(runs: Path) -> dict[str, dict[str, Any]]:
    """Every record of the run folder ``runs`` by its path relative to the folder, in path order;
    none when it has no archive yet (no run has finished)."""
    archive = archive_of(runs)
    if not archive.exists():
        return {}
    lines = lzma.decompress(archive.read_bytes()).decode().splitlines()
    return {entry["path"]: entry["record"] for entry in map(json.loads, lines)}


def write_runs(runs: Path, records: Mapping[str, dict[str, Any]]) -> Path:
    """Write ``records`` (by path relative to the folder) as the archive of ``runs``, replacing it
    whole: sorted by path, compact JSON, the same bytes for the same records. Returns the archive."""
    archive = archive_of(runs)
    lines = "".join(json.dumps({"path": path, "record": records[path]}, separators=(",", ":")) + "\n"
                    for path in sorted(records))
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".tmp")
    tmp.write_bytes(lzma.compress(lines.encode()))
    os.replace(tmp, archive)  # a reader never sees half an archive
    return archive


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` itself (so no lock file is left in the results)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def add_run(runs: Path, path: str, record: dict[str, Any]) -> None:
    """Add the record of one finished run (``path`` relative to the folder), or replace the one
    there, in the archive of ``runs``. Under a lock: two processes finishing runs into one archive
    keep both."""
    archive = archive_of(runs)
    with _locked(archive.parent):
        write_runs(archive, {**read_runs(archive), path: record})


def read_record(path: Path) -> dict[str, Any]:
    """The run a per-run path names: ``F/<rel>`` is the record ``<rel>`` of ``F.jsonl.xz``, for the
    nearest folder ``F`` above ``path`` that has an archive (``stress_runs/arithmetic/pinned/x.json``
    is ``pinned/x.json`` of ``stress_runs/arithmetic.jsonl.xz``)."""
    path = Path(path)
    for folder in path.parents:
        if folder.name and archive_of(folder).exists():
            name = path.relative_to(folder).as_posix()
            records = read_runs(folder)
            if name not in records:
                raise FileNotFoundError(f"{archive_of(folder)} holds no run {name!r}")
            return records[name]
    raise FileNotFoundError(f"no run archive ({SUFFIX}) in a folder above {path}")


def pack_folder(folder: Path) -> Path:
    """Add every JSON file under ``folder`` (per-run files as the benches wrote them before the
    archives, such as an old scratch ``--runs`` folder) to its archive, by path relative to it.
    Returns the archive; the folder is left as it is, to delete once the archive reads back."""
    folder = Path(folder)
    packed = {p.relative_to(folder).as_posix(): json.loads(p.read_text()) for p in sorted(folder.rglob("*.json"))}
    archive = archive_of(folder)
    with _locked(archive.parent):
        return write_runs(archive, {**read_runs(archive), **packed})
