"""What every result file records about where it came from (wmrl_envs/provenance.py)."""

import json
import re

from wmrl_envs.provenance import git_state, provenance

KEYS = {"commit", "dirty", "date", "cores", "cpu", "arithmetic", "ram_gib", "python", "platform", "argv"}


def test_provenance_has_every_key_and_is_json():
    meta = provenance()
    assert set(meta) == KEYS
    assert json.loads(json.dumps(meta)) == meta
    assert meta["date"].endswith("+00:00") and meta["cores"] >= 1 and meta["ram_gib"] > 0
    assert isinstance(meta["cpu"], str) and meta["cpu"]


def test_the_commit_is_the_checkouts_or_unknown_outside_one(tmp_path):
    commit, dirty = git_state()
    assert (re.fullmatch(r"[0-9a-f]{40}", commit) and isinstance(dirty, bool)) or (commit, dirty) == ("unknown", None)
    assert git_state(tmp_path) == ("unknown", None)
