"""Grader: golden tests, order invariance, id/label normalisation and malformed submissions."""

import math
import os
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from wmrl_envs.errors import InvalidSubmissionError, TaskFormatError, preview
from wmrl_envs.grading import (
    METRICS,
    best_possible,
    get_metric,
    grade,
    grade_file,
    perfect_submission,
    read_submission,
    submission_cap,
    validate_submission,
)
from wmrl_envs.task_spec import TaskSpec


def make_spec(metric, **kwargs):
    fields = dict(id="t", name="t", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
                  metric=metric, task_type="binary")
    fields.update(kwargs)
    return TaskSpec(**fields)


N = 12
IDS = list(range(100, 100 + N))


def task_for(metric_name):
    """(spec, answers, imperfect submission) for a metric, with deterministic data."""
    rng = np.random.default_rng(0)
    kind = get_metric(metric_name).prediction
    if kind == "value":
        y = rng.uniform(1.0, 10.0, N)
        spec = make_spec(metric_name, task_type="regression")
        answers = pd.DataFrame({"id": IDS, "target": y})
        submission = pd.DataFrame({"id": IDS, "target": y + rng.uniform(0.1, 1.0, N)})
    elif kind == "label":
        labels = [1, 2, 3, 4] * 3 if metric_name == "qwk" else ["cat", "dog", "emu"] * 4
        spec = make_spec(metric_name, task_type="multiclass")
        answers = pd.DataFrame({"id": IDS, "target": labels})
        submission = pd.DataFrame({"id": IDS, "target": labels[1:] + labels[:1]})
    elif kind == "probability":
        y = ["no", "yes"] * (N // 2)
        spec = make_spec(metric_name, target_columns=("p_yes",), answer_columns=("label",))
        answers = pd.DataFrame({"id": IDS, "label": y})
        submission = pd.DataFrame({"id": IDS, "p_yes": rng.uniform(0, 1, N)})
    else:
        classes = ("a", "b", "c")
        y = list(classes) * (N // 3)
        probs = rng.dirichlet(np.ones(3), N)
        spec = make_spec(metric_name, task_type="multiclass", classes=classes,
                         target_columns=("pa", "pb", "pc"), answer_columns=("label",))
        answers = pd.DataFrame({"id": IDS, "label": y})
        submission = pd.DataFrame({"id": IDS, "pa": probs[:, 0], "pb": probs[:, 1], "pc": probs[:, 2]})
    return spec, answers, submission


ALL_METRICS = sorted(METRICS)


@pytest.mark.parametrize("name", ALL_METRICS)
def test_answers_against_themselves_get_the_best_possible_value(name):
    spec, answers, _ = task_for(name)
    assert best_possible(answers, spec) == pytest.approx(get_metric(name).ideal, abs=1e-9)


@pytest.mark.parametrize("name", ALL_METRICS)
def test_perfect_beats_an_imperfect_submission_in_the_metric_direction(name):
    spec, answers, submission = task_for(name)
    metric = get_metric(name)
    assert metric.is_better(best_possible(answers, spec), grade(submission, answers, spec))


@pytest.mark.parametrize("name", ALL_METRICS)
def test_row_order_never_changes_the_score(name):
    spec, answers, submission = task_for(name)
    score = grade(submission, answers, spec)
    shuffled = submission.sample(frac=1.0, random_state=1)
    assert not shuffled["id"].equals(submission["id"])
    assert grade(shuffled, answers, spec) == score
    assert grade(submission, answers.sample(frac=1.0, random_state=2), spec) == pytest.approx(score, rel=1e-12)


def test_grade_matches_a_hand_computed_accuracy():
    spec = make_spec("accuracy", classes=(0, 1))
    answers = pd.DataFrame({"id": [1, 2, 3, 4], "target": [0, 1, 1, 0]})
    submission = pd.DataFrame({"id": [4, 3, 2, 1], "target": [1, 1, 1, 0]})
    assert grade(submission, answers, spec) == 0.75


def test_validate_returns_the_submission_aligned_to_the_answers():
    spec = make_spec("rmse", task_type="regression")
    answers = pd.DataFrame({"id": ["a", "b", "c"], "target": [1.0, 2.0, 3.0]})
    submission = pd.DataFrame({"target": ["30", "10", "20"], "id": ["c", "a", "b"]})
    aligned = validate_submission(submission, answers, spec)
    assert list(aligned.columns) == ["id", "target"]
    assert aligned["id"].tolist() == ["a", "b", "c"]
    assert aligned["target"].tolist() == [10.0, 20.0, 30.0]
    assert aligned["target"].dtype == float


def test_ids_and_labels_are_compared_as_normalised_text():
    spec = make_spec("accuracy", classes=(0, 1))
    answers = pd.DataFrame({"id": [1, 2, 3], "target": [0, 1, 1]})
    submission = pd.DataFrame({"id": ["1", 2.0, " 3 "], "target": [0.0, "1", 1]})
    assert grade(submission, answers, spec) == 1.0


def test_text_ids_keep_leading_zeros():
    spec = make_spec("rmse", task_type="regression")
    answers = pd.DataFrame({"id": ["01", "02"], "target": [1.0, 2.0]})
    submission = pd.DataFrame({"id": [1, 2], "target": [1.0, 2.0]})
    with pytest.raises(InvalidSubmissionError, match="ids do not match"):
        grade(submission, answers, spec)


def test_positive_class_is_the_second_declared_class():
    answers = pd.DataFrame({"id": [1, 2, 3, 4], "label": ["no", "no", "yes", "yes"]})
    submission = pd.DataFrame({"id": [1, 2, 3, 4], "p": [0.1, 0.4, 0.35, 0.8]})
    inferred = make_spec("roc_auc", target_columns=("p",), answer_columns=("label",))
    declared = make_spec("roc_auc", target_columns=("p",), answer_columns=("label",), classes=("no", "yes"))
    flipped = make_spec("roc_auc", target_columns=("p",), answer_columns=("label",), classes=("yes", "no"))
    assert grade(submission, answers, inferred) == pytest.approx(0.75)
    assert grade(submission, answers, declared) == pytest.approx(0.75)
    assert grade(submission, answers, flipped) == pytest.approx(0.25)


def test_perfect_submission_is_one_hot_in_class_order():
    spec = make_spec("multiclass_log_loss", task_type="multiclass", classes=("b", "a"),
                     target_columns=("pb", "pa"), answer_columns=("label",))
    answers = pd.DataFrame({"id": [1, 2], "label": ["a", "b"]})
    perfect = perfect_submission(answers, spec)
    assert perfect.to_dict("list") == {"id": [1, 2], "pb": [0.0, 1.0], "pa": [1.0, 0.0]}


def test_several_value_columns_are_averaged():
    spec = make_spec("mae", task_type="regression", target_columns=("x", "y"))
    answers = pd.DataFrame({"id": [1, 2], "x": [0.0, 0.0], "y": [0.0, 0.0]})
    submission = pd.DataFrame({"id": [1, 2], "x": [1.0, 1.0], "y": [3.0, 3.0]})
    assert grade(submission, answers, spec) == pytest.approx((1.0 + 3.0) / 2)


def test_qwk_uses_the_full_integer_scale_of_the_answers():
    spec = make_spec("qwk", task_type="multiclass")
    answers = pd.DataFrame({"id": [1, 2, 3, 4], "target": [1, 2, 4, 4]})
    submission = pd.DataFrame({"id": [1, 2, 3, 4], "target": [1, 3, 4, 2]})  # 3 is absent from answers
    expected = cohen_kappa_score([1, 2, 4, 4], [1, 3, 4, 2], labels=[1, 2, 3, 4], weights="quadratic")
    assert grade(submission, answers, spec) == pytest.approx(expected)


def test_grade_file_reads_a_csv(tmp_path):
    spec, answers, _ = task_for("multiclass_log_loss")
    path = tmp_path / "submission.csv"
    perfect_submission(answers, spec).sample(frac=1.0, random_state=3).to_csv(path, index=False)
    assert grade_file(path, answers, spec) == pytest.approx(0.0, abs=1e-9)


# --- malformed submissions -----------------------------------------------------------------


@pytest.fixture
def regression():
    spec = make_spec("rmsle", task_type="regression")
    answers = pd.DataFrame({"id": [1, 2, 3, 4], "target": [1.0, 2.0, 3.0, 4.0]})
    return spec, answers


def ok_regression(**overrides):
    data = {"id": [1, 2, 3, 4], "target": [1.0, 2.0, 3.0, 4.0]}
    data.update(overrides)
    return pd.DataFrame(data)


@pytest.mark.parametrize(
    ("submission", "fragments"),
    [
        (pd.DataFrame(), ["submission is empty"]),
        (pd.DataFrame({"id": [], "target": []}), ["submission is empty", "expected 4 rows"]),
        (pd.DataFrame({"row": [1, 2, 3, 4], "target": [1.0] * 4}), ["missing id column 'id'"]),
        (pd.DataFrame({"id": [1, 2, 3, 4], "y": [1.0] * 4}), ["missing target column(s) ['target']"]),
        (ok_regression(extra=[0] * 4, note=["x"] * 4), ["2 unexpected extra column(s) ['extra', 'note']"]),
        (ok_regression(**{"Unnamed: 0": [0, 1, 2, 3]}), ["unexpected extra column", "index=False"]),
        (pd.DataFrame([[1, 1.0, 1.0]], columns=["id", "target", "target"]), ["duplicate column name(s) ['target']"]),
        (pd.DataFrame({"id": [1, 2, 3], "target": [1.0] * 3}), ["wrong row count", "expected 4 rows, got 3"]),
        (ok_regression(id=[1, 2, None, 4]), ["id column 'id' has 1 missing"]),
        (ok_regression(id=[1, 2, 2, 4]), ["duplicate id(s)", "['2']", "1 extra row(s)"]),
        (ok_regression(id=[1, 2, 3, 99]), ["ids do not match", "1 missing (e.g. ['4'])", "1 unexpected (e.g. ['99'])"]),
        (ok_regression(target=[1.0, np.nan, np.nan, 4.0]), ["column 'target' has 2 missing/empty"]),
        (ok_regression(target=["1", " ", "3", "4"]), ["column 'target' has 1 missing/empty"]),
        (ok_regression(target=["1", "abc", "3", "x"]), ["column 'target' has 2 non-numeric", "'abc'"]),
        (ok_regression(target=[1.0, np.inf, 3.0, 4.0]), ["column 'target' has 1 infinite"]),
        (ok_regression(target=[1.0, -2.0, 3.0, 4.0]), ["1 negative prediction", "rmsle needs predictions >= 0"]),
    ],
)
def test_malformed_regression_submissions(regression, submission, fragments):
    spec, answers = regression
    with pytest.raises(InvalidSubmissionError) as info:
        grade(submission, answers, spec)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_probabilities_outside_unit_interval():
    spec, answers, submission = task_for("log_loss")
    submission.loc[3, "p_yes"] = 1.5
    with pytest.raises(InvalidSubmissionError, match=r"column 'p_yes' has 1 probabilities outside \[0, 1\]"):
        grade(submission, answers, spec)


def test_class_probability_columns_are_checked_each():
    spec, answers, submission = task_for("multiclass_log_loss")
    submission.loc[0, "pc"] = -0.1
    with pytest.raises(InvalidSubmissionError, match="column 'pc' has 1 probabilities outside"):
        grade(submission, answers, spec)
    with pytest.raises(InvalidSubmissionError, match=r"missing target column\(s\) \['pa'\]"):
        grade(submission.drop(columns="pa"), answers, spec)


def test_unknown_class_labels():
    spec, answers, submission = task_for("accuracy")
    submission.loc[[0, 5], "target"] = "cow"
    with pytest.raises(InvalidSubmissionError, match=r"2 unknown class label\(s\), e.g. \['cow'\].*'cat'"):
        grade(submission, answers, spec)


def test_read_submission_errors(tmp_path):
    with pytest.raises(InvalidSubmissionError, match="not found"):
        read_submission(tmp_path / "missing.csv")
    with pytest.raises(InvalidSubmissionError, match="not a regular file"):
        read_submission(tmp_path)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InvalidSubmissionError, match=r"empty \(0 bytes\)"):
        read_submission(empty)
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n")
    with pytest.raises(InvalidSubmissionError, match="empty"):
        read_submission(blank)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,target\n1,2\n3,4,5,6\n")
    with pytest.raises(InvalidSubmissionError, match="not a parseable CSV"):
        read_submission(ragged)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"id,target\n\xff\xfe\x81,1\n")  # not UTF-8 (NUL bytes: see the tests below)
    with pytest.raises(InvalidSubmissionError, match="not a parseable CSV"):
        read_submission(binary)
    big = tmp_path / "big.csv"
    big.write_text("id,target\n" + "1,1.0\n" * 10)
    with pytest.raises(InvalidSubmissionError, match="too large"):
        read_submission(big, max_bytes=20)



def traced_peak(call):
    """``call()``'s exception and the peak of Python allocations while it ran."""
    tracemalloc.start()
    try:
        with pytest.raises(InvalidSubmissionError) as raised:
            call()
        return raised.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_sparse_submission_past_its_cap_is_invalid_without_being_read(tmp_path):
    # A sparse file costs its writer no disk blocks; its apparent size must not cost the grader memory.
    spec, answers, submission = task_for("rmse")
    sample = tmp_path / "sample_submission.csv"
    submission.to_csv(sample, index=False)
    cap = submission_cap(sample)
    path = tmp_path / "submission.csv"
    path.touch()
    os.truncate(path, 4 * cap)
    error, peak = traced_peak(lambda: grade_file(path, answers, spec, max_bytes=cap))  # as wmrl_envs/scoring/code.py
    assert f"too large: {4 * cap:,} bytes, the cap is {cap:,} bytes" in str(error)
    assert peak < cap // 4


def test_a_submission_with_a_hole_is_invalid_at_its_first_nul_byte(tmp_path):
    spec, answers, submission = task_for("rmse")
    path = tmp_path / "submission.csv"
    submission.to_csv(path, index=False)
    written = path.stat().st_size
    cap = submission_cap(None)
    os.truncate(path, cap)  # at the cap, so the size lets it through: the bytes read must stop it
    error, peak = traced_peak(lambda: grade_file(path, answers, spec, max_bytes=cap))
    assert f"NUL byte at offset {written:,}" in str(error)
    assert peak < cap // 2  # the read stopped at the first chunk that holds a NUL


def test_reading_stops_past_the_cap_whatever_the_file_size_says():
    # /proc files report size 0 and hold more; bytes are counted as read, never taken from stat.
    status = "/proc/self/status"
    assert os.stat(status).st_size == 0
    with pytest.raises(InvalidSubmissionError, match="too large: more than the cap of 64 bytes"):
        read_submission(status, max_bytes=64)


def test_the_cap_admits_every_honest_submission_at_full_precision(tmp_path):
    # The worst ratio to the sample: one-character values become quoted full-precision floats, CRLF-ended.
    columns = [f"p{j}" for j in range(100)]
    rows = range(2000)
    sample = tmp_path / "sample_submission.csv"
    sample.write_text("id," + ",".join(columns) + "\n" + "".join(f"{i}," + ",".join("0" * len(columns)) + "\n" for i in rows))
    value = '"-1.2345678901234567e-308"'
    honest = tmp_path / "submission.csv"
    honest.write_text("id," + ",".join(columns) + "\r\n" + "".join(f"{i}," + ",".join([value] * len(columns)) + "\r\n"
                                                                for i in rows), newline="")
    cap = submission_cap(sample)
    assert cap == 16 * sample.stat().st_size > honest.stat().st_size > submission_cap(None)
    assert read_submission(honest, max_bytes=cap).shape == (len(rows), 1 + len(columns))

def test_header_only_file_is_an_empty_submission(tmp_path, regression):
    spec, answers = regression
    path = tmp_path / "header.csv"
    path.write_text("id,target\n")
    with pytest.raises(InvalidSubmissionError, match="submission is empty"):
        grade_file(path, answers, spec)


# --- broken tasks are not the agent's fault ------------------------------------------------


def test_broken_answers_or_spec_raise_task_format_error(regression):
    spec, answers = regression
    with pytest.raises(TaskFormatError, match="answers lack column"):
        grade(ok_regression(), answers.rename(columns={"target": "y"}), spec)
    with pytest.raises(TaskFormatError, match="unknown metric"):
        grade(ok_regression(), answers, make_spec("f7"))
    with pytest.raises(TaskFormatError, match="labels not in classes"):
        grade(ok_regression(), answers, make_spec("accuracy", classes=(1.0, 2.0)))
    probs = make_spec("multiclass_log_loss", classes=("a", "b", "c"), target_columns=("pa", "pb"),
                      answer_columns=("label",))
    with pytest.raises(TaskFormatError, match="one target column per class"):
        perfect_submission(pd.DataFrame({"id": [1, 2, 3], "label": ["a", "b", "c"]}), probs)
    with pytest.raises(TaskFormatError, match="exactly 2 classes"):
        grade(ok_regression(), answers, make_spec("roc_auc"))


def test_a_poor_but_valid_submission_has_a_finite_score():
    spec, answers, submission = task_for("r2")
    assert math.isfinite(grade(submission, answers, spec))


# --- bounded error messages ----------------------------------------------------------------------

WIDE = 200_000
MAX_MESSAGE = 2_000


def test_preview_shows_a_few_items_and_counts_the_rest():
    assert preview(["a", "b"]) == "['a', 'b']"
    assert preview(range(10), 3) == "[0, 1, 2, ...] (7 more)"
    assert preview(np.array([1, 2], dtype=np.int64)) == "[1, 2]"  # numpy scalars read as plain numbers
    assert preview([]) == "[]"
    long = preview(["x" * 100_000])
    assert len(long) < 100 and long.endswith("...]")


def _message(submission: pd.DataFrame, answers: pd.DataFrame, spec: TaskSpec) -> str:
    with pytest.raises(InvalidSubmissionError) as info:
        grade(submission, answers, spec)
    message = str(info.value)
    assert len(message) < MAX_MESSAGE, f"{len(message):,} characters"
    return message


def test_a_submission_with_200000_extra_columns_gets_a_short_message(regression):
    spec, answers = regression
    extra = pd.DataFrame(np.zeros((len(answers), WIDE - 2)), columns=[f"x{i}" for i in range(WIDE - 2)])
    message = _message(pd.concat([ok_regression(), extra], axis=1), answers, spec)
    assert "199,998 unexpected extra column(s) ['x0', 'x1', 'x2', 'x3', 'x4', ...] (199,993 more)" in message
    assert "expected exactly ['id', 'target']" in message


def test_a_submission_of_200000_columns_without_the_id_gets_a_short_message(regression):
    spec, answers = regression
    wide = pd.DataFrame(np.zeros((len(answers), WIDE)), columns=[f"x{i}" for i in range(WIDE)])
    assert "missing id column 'id'; the submission has 200,000 column(s)" in _message(wide, answers, spec)


def test_200000_unmatched_ids_and_huge_values_get_short_messages():
    spec = make_spec("rmse", task_type="regression")
    answers = pd.DataFrame({"id": np.arange(WIDE), "target": np.ones(WIDE)})
    shifted = pd.DataFrame({"id": np.arange(WIDE) + WIDE, "target": np.ones(WIDE)})
    assert "200000 missing (e.g. ['0', '1', '2', '3', '4', ...] (199,995 more))" in _message(shifted, answers, spec)
    words = answers.assign(target=["y" * 1_000_000] + [f"v{i}" for i in range(1, WIDE)])  # one 1 MB value
    assert "has 200000 non-numeric value(s), e.g. ['yyy" in _message(words, answers, spec)
