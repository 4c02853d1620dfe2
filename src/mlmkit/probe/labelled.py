"""Texts to classify from jsonl: `{"text": "...", "label": "..."}` (the label optional)."""

from __future__ import annotations

from pathlib import Path

from mlmkit.errors import InvalidData
from mlmkit.probe.jsonl import field, read_jsonl, row_name


def read_labelled_texts(path: str | Path, text_field: str = "text",
                        label_field: str = "label") -> tuple[list[str], list[str] | None]:
    """(texts, gold labels or None); labels must be on every row or on none."""
    rows = read_jsonl(path, {text_field, label_field, "id"}, "texts",
                      hint="name the text and label fields with --text-field / --label-field "
                      "(text_field= / label_field=), or remove the others")
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
