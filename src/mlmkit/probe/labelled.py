"""Texts to classify from JSON lines (`{"text": "...", "label": "..."}`, the label optional)
or a TSV/CSV table with a header (the text and label columns; other columns ignored, as a
GLUE file's `idx`)."""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.records import delimiter_of, display_name, read_table
from mlmkit.errors import InvalidData
from mlmkit.probe.jsonl import field, read_jsonl, row_name

FIELD_HINT = "name the text and label fields with --text-field / --label-field (text_field= / " \
    "label_field=)"


def _table_rows(path, text_field: str, label_field: str) -> list[tuple[int, dict]]:
    """The rows of a TSV/CSV file, its empty label cells as no label."""
    rows = []
    for number, row in read_table(path, what="texts"):
        if text_field not in row:
            raise InvalidData(f"{row_name(path, number)}: no column {text_field!r} (the "
                              f"columns are {list(row)}); {FIELD_HINT}")
        if label_field in row and not str(row[label_field]).strip():
            del row[label_field]
        rows.append((number, row))
    if not rows:
        raise InvalidData(f"texts file {display_name(path)} has no row under its header")
    return rows


def read_labelled_texts(path: str | Path, text_field: str = "text",
                        label_field: str = "label") -> tuple[list[str], list[str] | None]:
    """(texts, gold labels or None) of JSON lines or a TSV/CSV table (by its name); labels
    must be on every row or on none."""
    if delimiter_of(path) is not None:
        rows = _table_rows(path, text_field, label_field)
    else:
        rows = read_jsonl(path, {text_field, label_field, "id"}, "texts",
                          hint=f"{FIELD_HINT}, or remove the others")
    texts, labels, unlabelled = [], [], []
    for number, row in rows:
        where = row_name(path, number)
        text = field(row, text_field, str, where)
        if not text.strip():
            raise InvalidData(f"{where}: {text_field!r} is empty")
        texts.append(text)
        label = field(row, label_field, (str, int), where, required=False)
        if label is None:
            unlabelled.append(number)
        labels.append(None if label is None else str(label))
    if unlabelled and len(unlabelled) < len(rows):
        raise InvalidData(f"{row_name(path, unlabelled[0])}: no {label_field!r} while other rows "
                          "have one; label every row (for accuracy) or none")
    return texts, None if unlabelled else labels
