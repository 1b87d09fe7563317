"""The world model's CPU bench scores fresh scripts in a scorer's order and digests its answers."""

from __future__ import annotations

from bench.world_model_cpu import features_digest, fresh_scripts, main, score


def test_the_digests_are_those_of_the_answers_and_repeat(capsys):
    pairs = fresh_scripts(10, seed=4)
    assert len(pairs) == 10 and all(script for _, script in pairs) and len({s for _, s in pairs}) > 5
    per_script, digests = score(pairs)
    assert per_script > 0 and set(digests) == {"keys", "proofs", "predictions"}
    assert score(pairs)[1] == digests and features_digest(pairs) == features_digest(pairs)
    assert score(pairs[:9])[1]["predictions"] != digests["predictions"]  # the digest reads each answer
    assert main(["--scripts", "4", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "ms CPU a script" in out and "predictions" in out and "features" in out
