"""Committed reports regenerate from the committed run archives (``bench/results/**/*.jsonl.xz``).

A sample of the reports that ``bench/README.md``'s commands rewrite from finished runs, without
training or executing anything: each is regenerated into a scratch folder with the arguments it
recorded and compared with the committed file. What may differ is what the report records of the
machine, the day and the command line (its provenance and its ``.md`` footer).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from PIL import Image

from bench import acceptance_power, main_job, stress, stress_replay
from wmrl_envs.provenance import provenance

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
PROVENANCE = set(provenance())
# Paths a report records of where it read and wrote (absolute where they came from a default).
LOCATIONS = {"out", "memo_dir", "runs", "name"}
FOOTER = re.compile(r"^\d+ cores, [\d.]+ GiB RAM, \d{4}-\d\d-\d\d, commit `[0-9a-f]+`\. ")


def without_footer(markdown: str) -> list[str]:
    """The report's lines but the one that names the machine, the day, the commit and the command."""
    lines = markdown.splitlines()
    footers = [line for line in lines if FOOTER.match(line)]
    assert len(footers) == 1, footers
    return [line for line in lines if line not in footers]


def comparable(meta: dict, committed: dict | None = None) -> dict:
    """A report's metadata less its provenance and the locations it was given; beside the
    ``committed`` metadata, less the options added since it was written that are off (a new grid's
    flag changes nothing a former report computed)."""
    kept = {k: v for k, v in meta.items() if k not in PROVENANCE}
    if isinstance(kept.get("config"), dict):
        kept["config"] = {k: v for k, v in kept["config"].items() if k not in LOCATIONS
                          and (committed is None or k in committed["config"] or v not in (False, None))}
    return kept


@pytest.mark.parametrize("name", ["stress_pooled", "stress_saturate_pinned"])
def test_a_stress_report_regenerates_from_its_archives(name: str, tmp_path: Path) -> None:
    committed = json.loads((RESULTS / f"{name}.json").read_text())
    stress.main([*committed["meta"]["argv"], "--out", str(tmp_path), "--memo-dir", str(tmp_path / "memo")])
    regenerated = json.loads((tmp_path / f"{name}.json").read_text())
    assert regenerated["rows"] == committed["rows"]
    assert comparable(regenerated["meta"], committed["meta"]) == comparable(committed["meta"])
    assert without_footer((tmp_path / f"{name}.md").read_text()) == without_footer((RESULTS / f"{name}.md").read_text())
    plots = sorted(RESULTS.glob(f"{name}_*.png"))
    assert plots and [p.name for p in plots] == sorted(p.name for p in tmp_path.glob(f"{name}_*.png"))
    for png in plots:  # drawn alike (their bytes match only under the matplotlib that drew the committed ones)
        with Image.open(png) as old, Image.open(tmp_path / png.name) as new:
            assert (new.mode, new.size) == (old.mode, old.size) == ("P", old.size)


@pytest.mark.parametrize("env, name", [("wmrl/MLEDojo-v0", "main_job"), ("wmrl/DSBench-v0", "main_job_dsbench")])
def test_the_main_job_report_regenerates_from_its_archive(env: str, name: str, tmp_path: Path, monkeypatch) -> None:
    def must_not_run(*_):
        raise AssertionError("every run of the report is in the archive: nothing should run")

    monkeypatch.setattr(main_job, "RESULTS", tmp_path)  # where the report goes; RUNS stays the committed archive
    monkeypatch.setattr(main_job, "run_once", must_not_run)
    monkeypatch.setattr(sys, "argv", ["main_job", "--env", env, "--executors", "auto", "--report"])
    main_job.main()
    for suffix in (".json", ".md"):
        assert (tmp_path / f"{name}{suffix}").read_text() == (RESULTS / f"{name}{suffix}").read_text()


def test_the_acceptance_power_report_regenerates_from_its_archives(tmp_path: Path) -> None:
    acceptance_power.main(["--name", str(tmp_path / "acceptance_power")])
    committed = json.loads((RESULTS / "acceptance_power.json").read_text())
    regenerated = json.loads((tmp_path / "acceptance_power.json").read_text())
    for payload in (committed, regenerated):
        del payload["machine"]
        payload["config"] = {k: v for k, v in payload["config"].items() if k not in LOCATIONS}
    assert regenerated == committed
    assert without_footer((tmp_path / "acceptance_power.md").read_text()) == \
        without_footer((RESULTS / "acceptance_power.md").read_text())


def test_a_committed_run_replays_as_it_logged(capsys) -> None:
    record = RESULTS / "stress_runs" / "t_check" / "swap0.3-wmrl-std-seed8.json"  # a run in t_check.jsonl.xz
    assert stress_replay.main([str(record)]) == 0
    assert capsys.readouterr().out.startswith("swap0.3-wmrl-std-seed8.json\n")
