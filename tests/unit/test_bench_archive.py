"""bench/archive.py: a run folder's records in one archive, written the same way every time."""

from __future__ import annotations

import json
import lzma
import multiprocessing
from pathlib import Path

import pytest

from bench.archive import add_run, archive_of, pack_folder, read_record, read_runs, write_runs


def test_records_come_back_as_written_in_path_order_and_a_rerun_replaces_one(tmp_path: Path) -> None:
    runs = tmp_path / "grid"
    assert read_runs(runs) == {}  # no run finished yet
    add_run(runs, "b-seed1.json", {"final": 0.5, "curve": [0.1, float("nan")]})
    add_run(runs, "a-seed0.json", {"final": 0.25})
    assert archive_of(runs) == tmp_path / "grid.jsonl.xz" and not runs.exists()  # no folder, one file
    records = read_runs(runs)
    assert list(records) == ["a-seed0.json", "b-seed1.json"]
    assert records["b-seed1.json"]["final"] == 0.5 and json.dumps(records["b-seed1.json"]["curve"]) == "[0.1, NaN]"
    add_run(runs, "a-seed0.json", {"final": 0.75})
    assert read_runs(runs)["a-seed0.json"] == {"final": 0.75} and len(read_runs(runs)) == 2
    lines = lzma.decompress(archive_of(runs).read_bytes()).decode().splitlines()
    assert [json.loads(line)["path"] for line in lines] == ["a-seed0.json", "b-seed1.json"]


def test_the_same_records_give_the_same_bytes_whatever_their_order(tmp_path: Path) -> None:
    records = {f"run{i}.json": {"seed": i, "score": i / 7} for i in range(5)}
    first = write_runs(tmp_path / "one", records).read_bytes()
    second = write_runs(tmp_path / "two", dict(reversed(records.items()))).read_bytes()
    assert first == second
    assert write_runs(tmp_path / "one.jsonl.xz", records) == tmp_path / "one.jsonl.xz"  # an archive names itself


def test_a_run_path_reads_its_record_from_the_nearest_archive_above_it(tmp_path: Path) -> None:
    add_run(tmp_path / "arithmetic", "pinned/real-seed13.json", {"curve": [1]})
    add_run(tmp_path / "arithmetic" / "pinned", "real-seed13.json", {"curve": [2]})  # nearer: it wins
    add_run(tmp_path / "arithmetic", "other/real-seed13.json", {"curve": [3]})
    assert read_record(tmp_path / "arithmetic" / "pinned" / "real-seed13.json") == {"curve": [2]}
    assert read_record(tmp_path / "arithmetic" / "other" / "real-seed13.json") == {"curve": [3]}
    with pytest.raises(FileNotFoundError, match="holds no run 'other/missing.json'"):
        read_record(tmp_path / "arithmetic" / "other" / "missing.json")
    with pytest.raises(FileNotFoundError, match="no run archive"):
        read_record(tmp_path / "elsewhere" / "run.json")


def test_a_folder_of_run_files_packs_into_its_archive_beside_the_runs_already_there(tmp_path: Path) -> None:
    folder = tmp_path / "v2"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps({"x": 1}, indent=1))
    (folder / "sub" / "b.json").write_text(json.dumps({"x": 2}))
    (folder / "memo.jsonl").write_text("{}\n")  # not a run record
    add_run(folder, "c.json", {"x": 3})
    assert pack_folder(folder) == archive_of(folder)
    assert read_runs(folder) == {"a.json": {"x": 1}, "c.json": {"x": 3}, "sub/b.json": {"x": 2}}
    assert read_record(folder / "sub" / "b.json") == {"x": 2}


def _add_many(runs: Path, worker: int, count: int) -> None:
    for i in range(count):
        add_run(runs, f"w{worker}-{i}.json", {"worker": worker, "i": i, "padding": "x" * 2000})


def test_processes_finishing_runs_into_one_archive_keep_every_run(tmp_path: Path) -> None:
    """Each add rewrites the archive; without the lock, one process's rewrite drops another's run."""
    runs = tmp_path / "shared"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_many, args=(runs, w, 15)) for w in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert len(read_runs(runs)) == 3 * 15
