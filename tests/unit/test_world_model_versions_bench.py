"""The interpreter-comparison bench answers for each script and counts what differs, part by part."""

from __future__ import annotations

import copy

from bench.world_model_versions import answer, compare, main, make_pairs, read_json, write_json


def test_answers_repeat_and_a_changed_answer_is_counted(tmp_path):
    rows = make_pairs(4, seed=2)
    pairs = [row for row in rows if row["set"] != "handwritten_v1"][:6]
    pairs.append(next(row for row in rows if row["set"] == "handwritten_v1"))  # on its frozen set's task
    assert {row["set"] for row in pairs} == {"grammar", "mutant", "handwritten_v1"}
    first = answer(pairs)
    assert first["python"] and len(first["answers"]) == len(pairs) and first["has_fstring"][0]
    report, _ = compare(first, answer(pairs))
    total = report["rows"][-1]
    assert total["set"] == "all" and total["scripts"] == len(pairs)
    assert all(total[f"{part}_differ"] == 0 for part in ("tokens", "features", "keys", "proof", "prediction"))

    second = copy.deepcopy(first)
    second["python"] = "9.9.9"
    second["answers"][0]["tokens"] += " extra"
    second["answers"][1]["prediction"]["p_valid"] = first["answers"][1]["prediction"]["p_valid"] - 0.25
    status = first["answers"][1]["prediction"]["status"]
    second["answers"][1]["prediction"]["status"] = "timeout" if status != "timeout" else "valid"
    second["answers"][2]["proof"] = "None"
    report, table = compare(first, second)
    total = report["rows"][-1]
    assert (total["tokens_differ"], total["prediction_differ"], total["status_differ"], total["proof_differ"]) == (1, 1, 1, 1)
    assert abs(total["p_valid_gap_max"] - 0.25) < 1e-9 and "9.9.9" in report["pythons"]
    assert report["proofs_moved"][0][1] == "None" and "| all |" in table

    write_json(tmp_path / "pairs.json.xz", pairs)
    assert read_json(tmp_path / "pairs.json.xz") == pairs
    assert main(["answer", str(tmp_path / "pairs.json.xz"), str(tmp_path / "a.json.xz")]) == 0
    assert main(["compare", str(tmp_path / "a.json.xz"), str(tmp_path / "a.json.xz")]) == 0
