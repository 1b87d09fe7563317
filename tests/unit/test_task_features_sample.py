"""The world model's task features read a bounded start of train.csv, never the whole file.

Bytes read are the kernel's count for this process (``rchar`` in ``/proc/self/io``), not a time.
"""

from __future__ import annotations

from pathlib import Path

from wmrl_envs.analysis.code_features import TARGET_SAMPLE_BYTES, _leading_records, task_features
from wmrl_envs.task_spec import Task, TaskSpec


def bytes_read() -> int:
    return int(dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())["rchar"])


def regression_task(root: Path, train: bytes) -> Task:
    public = root / "public"
    public.mkdir(parents=True)
    (public / "train.csv").write_bytes(train)
    (public / "test.csv").write_text("id,x\n1,0.5\n")
    spec = TaskSpec(id="big", name="big", suite="test", env_id="wmrl/MLEDojo-v0", split="train", metric="rmse",
                    task_type="regression", target_columns=("y",))
    return Task(spec=spec, root=root, description_path=root / "description.md", public_dir=public,
                answers_path=root / "private" / "answers.csv")


def test_a_train_csv_three_times_the_sample_is_read_only_as_far_as_the_sample(tmp_path):
    # Positive targets for the first 8 MiB, negative ones for the 16 MiB after them.
    row = b"1,0.25,2.5\n"
    n_rows = TARGET_SAMPLE_BYTES // len(row)
    train = b"id,x,y\n" + row * n_rows + b"2,0.25,-2.5\n" * (2 * n_rows)
    task = regression_task(tmp_path / "task", train)
    task_features(regression_task(tmp_path / "warm", b"id,x,y\n1,0.5,2.5\n"))  # loads the lazy imports

    before = bytes_read()
    features = task_features(task)
    read = bytes_read() - before

    assert len(train) > 3 * TARGET_SAMPLE_BYTES
    assert read < TARGET_SAMPLE_BYTES + (1 << 20)  # the sample, plus headers and small files
    assert features["target_negative_share"] == 0.0  # no negative target was read


def test_the_sample_ends_at_a_record_and_never_inside_a_quoted_newline(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'id,text,y\n1,"two\nlines",3\n2,"x",4\n')
    whole = path.read_bytes()
    assert _leading_records(path, len(whole)) == whole
    assert _leading_records(path, len(whole) - 1) == b'id,text,y\n1,"two\nlines",3\n'
    # Cut inside the quoted field: the newline in it ends no record, so only the header remains.
    assert _leading_records(path, whole.index(b"lines")) == b"id,text,y\n"
    assert _leading_records(path, 5) == b""
