"""Texts in columns: the scored pairs of STS files and the training examples of an embedding
model (pairs, triplets with hard negatives, scored pairs, or single texts).

Files are JSONL, CSV, or TSV with a header (`core.records.read_table`: the STS-B and GLUE
files are split on tabs with their quotes as they are, a text may start with a lone `"`).
A plain text file holds one text a line (the single texts of unsupervised training).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlmkit.core.records import (
    check_input_file,
    decoded_lines,
    delimiter_of,
    display_name,
    is_jsonl,
    read_table,
)
from mlmkit.errors import InvalidArgument, InvalidData

STS_COLUMNS = ("sentence1", "sentence2", "score")


def _score(path, number: int, row: dict, name: str) -> float:
    try:
        score = float(row[name])
    except (TypeError, ValueError):
        raise InvalidData(f"{display_name(path)} line {number}: {name} {row[name]!r} is not "
                          "a number") from None
    if not np.isfinite(score):
        raise InvalidData(f"{display_name(path)} line {number}: {name} {score} is not finite")
    return score


def read_sts_pairs(path, limit: int | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """(first sentences, second sentences, float64 scores) of an STS file."""
    check_input_file(path, "STS data")
    firsts, seconds, scores = [], [], []
    for number, row in read_table(path, what="STS pairs"):
        missing = [name for name in STS_COLUMNS if name not in row]
        if missing:
            raise InvalidData(f"{display_name(path)} line {number} has no {missing[0]!r} "
                              f"field: STS data needs {', '.join(STS_COLUMNS)}")
        score = _score(path, number, row, "score")
        firsts.append(str(row["sentence1"]))
        seconds.append(str(row["sentence2"]))
        scores.append(score)
        if limit is not None and len(scores) >= limit:
            break
    if len(scores) < 2:
        raise InvalidData(f"{display_name(path)} holds {len(scores)} pair(s): a correlation "
                          "needs at least 2")
    return firsts, seconds, np.asarray(scores, dtype=np.float64)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 [n]: the cosine similarity of row i of `a` and row i of `b`."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / np.maximum(norms, 1e-12)


@dataclass
class Examples:
    """Training examples, column by column: `columns[k][i]` is text k of example i (anchor,
    positive, negatives...; or the two texts of a scored pair; or one text); `scores[i]`
    the score of a scored pair (None for unscored examples)."""

    columns: list[list[str]]
    scores: np.ndarray | None
    names: list[str]
    source: str

    def __len__(self) -> int:
        return len(self.columns[0])

    def subset(self, index) -> Examples:
        index = np.asarray(index, dtype=np.int64)
        return Examples([[column[i] for i in index] for column in self.columns],
                        None if self.scores is None else self.scores[index], self.names,
                        self.source)


def _default_columns(row: dict, single: bool) -> list[str]:
    """The text columns when none are named: text (single texts); anchor, positive and
    every negative* column; else sentence1, sentence2."""
    if single:
        return ["text"]
    if "anchor" in row and "positive" in row:
        return ["anchor", "positive", *sorted(k for k in row if k.startswith("negative"))]
    return ["sentence1", "sentence2"]


def read_examples(path, *, text_field: str | list[str] | None = None, single: bool = False,
                  score_field: str | None = None, what: str = "train") -> Examples:
    """The examples of `path`. `text_field`: the text columns (a list, or comma-separated;
    default: anchor, positive, negative...; or sentence1, sentence2; `single`: text).
    `single`: one text per example (a plain text file is one text a line). `score_field`:
    the score column of scored pairs (None: unscored)."""
    check_input_file(path, f"{what} file")
    names = text_field.split(",") if isinstance(text_field, str) else text_field
    names = [name.strip() for name in names] if names else None
    if names is not None and (not all(names) or len(set(names)) != len(names)):
        raise InvalidArgument(f"text_field (--text-field) {text_field!r}: name each text "
                              "column once, comma-separated (e.g. anchor,positive,negative)")
    if single and names is not None and len(names) != 1:
        raise InvalidArgument(f"text_field (--text-field) {text_field!r}: this loss trains on "
                              "single texts; name one column")
    plain = delimiter_of(path) is None and not is_jsonl(path)
    if plain and not single:
        raise InvalidData(f"{display_name(path)} is plain text (one text a line): pairs need "
                          "columns; give a JSONL, TSV or CSV file with a header")
    if plain:
        texts = [line.rstrip("\r\n") for _, line in decoded_lines(path) if line.strip()]
        return _checked(Examples([texts], None, ["text"], str(path)), path)
    columns, scores = None, []
    for number, row in read_table(path, what=f"{what} examples"):
        if columns is None:
            names = names or _default_columns(row, single)
            columns = [[] for _ in names]
        for name, column in zip(names, columns, strict=True):
            if name not in row and single and text_field is None:
                raise InvalidData(f"{display_name(path)} line {number} has no field {name!r} "
                                  f"(its fields are {sorted(row)}): this loss trains on single "
                                  "texts; give a plain text file (one text a line) or name the "
                                  "text column with --text-field (text_field=)")
            if name not in row:
                raise InvalidData(f"{display_name(path)} line {number} has no field {name!r} "
                                  f"(its fields are {sorted(row)}): name the text columns "
                                  "with --text-field (text_field=)")
            value = row[name]
            if not isinstance(value, str):
                raise InvalidData(f"{display_name(path)} line {number}: field {name!r} holds "
                                  f"{type(value).__name__}, not a text")
            column.append(value)
        if score_field is not None:
            if score_field not in row:
                raise InvalidData(f"{display_name(path)} line {number} has no score field "
                                  f"{score_field!r} (its fields are {sorted(row)}): name it "
                                  "with --score-field (score_field=)")
            scores.append(_score(path, number, row, score_field))
    if columns is None:
        raise InvalidData(f"{display_name(path)} holds no examples: give a file with rows")
    return _checked(Examples(columns, np.asarray(scores, dtype=np.float64)
                             if score_field is not None else None, names, str(path)), path)


def _checked(examples: Examples, path) -> Examples:
    if len(examples) < 2:
        raise InvalidData(f"{display_name(path)} holds {len(examples)} example(s): training "
                          "contrasts examples with each other; give at least 2")
    return examples
