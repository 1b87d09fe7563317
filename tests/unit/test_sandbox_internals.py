"""Unit tests of the sandbox's building blocks: output tails, bwrap status parsing, the runtime venv."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from wmrl_envs.sandbox import runtime
from wmrl_envs.sandbox.base import OutputTail
from wmrl_envs.sandbox.bwrap import _json_documents


def test_output_tail_keeps_the_last_bytes_in_bounded_memory():
    tail = OutputTail(limit=10)
    for i in range(1000):
        tail.feed(f"{i:04d}".encode())
        assert len(tail._buf) <= 2 * tail.limit
    assert tail.text() == "".join(f"{i:04d}" for i in range(1000))[-10:]
    assert tail.truncated
    assert tail.total == 4000


def test_output_tail_short_stream_is_not_truncated():
    tail = OutputTail(limit=100)
    tail.feed("héllo".encode())
    assert tail.text() == "héllo"
    assert not tail.truncated


def test_output_tail_replaces_a_cut_multibyte_character():
    tail = OutputTail(limit=3)
    tail.feed("aé".encode() + b"bc")  # the kept tail starts inside "é"
    assert tail.text().endswith("bc")


def test_bwrap_status_documents_are_merged():
    text = '{ "child-pid": 42, "net-namespace": 1 }\n{ "exit-code": 3 }\n'
    assert _json_documents(text) == {"child-pid": 42, "net-namespace": 1, "exit-code": 3}


def test_bwrap_status_ignores_a_cut_off_document():
    assert _json_documents('{ "child-pid": 42 }\n{ "exit-') == {"child-pid": 42}
    assert _json_documents("") == {}


@pytest.fixture
def fake_build(monkeypatch):
    """Replace the slow venv build with one that only writes the marker, and count calls."""
    calls: list[Path] = []

    def build(path: Path, requirements: Path, digest: str) -> None:
        calls.append(path)
        time.sleep(0.2)  # long enough for a racing caller to arrive while we hold the lock
        (path / "bin").mkdir(parents=True, exist_ok=True)
        (path / "bin" / "python").touch()
        (path / runtime.MARKER).write_text(json.dumps({"requirements_sha256": digest}))

    monkeypatch.setattr(runtime, "_build", build)
    return calls


def test_ensure_runtime_builds_once_and_then_returns_at_once(tmp_path, fake_build):
    requirements = tmp_path / "req.txt"
    requirements.write_text("numpy\n")
    venv = tmp_path / "venv"
    assert runtime.ensure_runtime(venv, requirements) == venv
    assert runtime.ensure_runtime(venv, requirements) == venv
    assert fake_build == [venv]


def test_ensure_runtime_rebuilds_when_requirements_change(tmp_path, fake_build):
    requirements = tmp_path / "req.txt"
    requirements.write_text("numpy\n")
    venv = tmp_path / "venv"
    runtime.ensure_runtime(venv, requirements)
    requirements.write_text("numpy\npandas\n")
    runtime.ensure_runtime(venv, requirements)
    assert len(fake_build) == 2


def test_concurrent_callers_build_only_once(tmp_path, fake_build):
    requirements = tmp_path / "req.txt"
    requirements.write_text("numpy\n")
    venv = tmp_path / "venv"
    threads = [threading.Thread(target=runtime.ensure_runtime, args=(venv, requirements)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake_build == [venv]


def test_the_shipped_runtime_is_isolated_from_the_host():
    """The real runtime venv: no system site-packages, and it knows what a sandbox must hide."""
    built = runtime.load_runtime()
    cfg = (built.venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    assert built.python.exists()
    assert built.base_site_packages
    assert all(p.is_relative_to(built.base_prefix) or str(p).startswith("/usr") for p in built.base_site_packages)
