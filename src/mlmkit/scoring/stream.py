"""Score a file of texts in constant memory: read a chunk, score it, append its jsonl lines.

Input is a text per line, or jsonl (`field` names the text). The output has one record
per input line, in input order, empty lines included (with a null score). It is written
to a temporary file renamed into place at the end, so a crash never leaves half a file.
Under torchrun each rank scores its share of the lines (see `distributed`).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mlmkit.errors import MlmkitError
from mlmkit.scoring.distributed import Shard, barrier, merge_parts
from mlmkit.scoring.results import TextScore
from mlmkit.scoring.text_scores import score


@dataclass
class FileSummary:
    texts: int
    empty: int
    seconds: float
    first_empty_line: int | None = None

    @property
    def texts_per_second(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else 0.0


def read_texts(path: str | Path, field: str | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) per line; jsonl when `field` is given or the file ends in .jsonl."""
    path = Path(path)
    if not path.is_file():
        raise MlmkitError(f"input file {str(path)!r} does not exist")
    as_json = field is not None or path.suffix == ".jsonl"
    field = field or "text"
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n").rstrip("\r")
            if not as_json:
                yield number, line
                continue
            if not line.strip():
                yield number, ""
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise MlmkitError(f"{path}, line {number}: invalid JSON ({error.msg})") from error
            if not isinstance(row, dict) or field not in row:
                raise MlmkitError(f"{path}, line {number}: no field {field!r}; pass --field "
                                  "with the name of the text field")
            value = row[field]
            if not isinstance(value, str):
                raise MlmkitError(f"{path}, line {number}: field {field!r} is not a string")
            yield number, value


def count_lines(path: str | Path) -> int:
    """Number of lines (a last line without a newline counts), read in constant memory."""
    with Path(path).open("rb") as handle:
        return sum(1 for _ in handle)


def score_file(
    model,
    input_path: str | Path,
    output_path: str | Path,
    *,
    field: str | None = None,
    metric: str = "pll",
    per_token: bool = False,
    per_word: bool = False,
    batch_tokens: int | None = None,
    precision: str = "fp32",
    stride: int = 1,
    chunk_texts: int = 2048,
    shard: Shard | None = None,
    on_progress=None,
) -> FileSummary:
    """Score every line of `input_path` into `output_path` (jsonl), streaming by chunks.

    `on_progress(texts_done)` is called after each chunk (the CLI draws its bar with it).
    """
    shard = shard or Shard()
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    part = shard.part_path(output_path) if shard.world > 1 else output_path.with_name(
        f".{output_path.name}.partial")
    began, total, empty, first_empty, n_lines = time.perf_counter(), 0, 0, None, 0

    def flush(chunk: list[tuple[int, str]], out) -> None:
        nonlocal total
        live = [(n, t) for n, t in chunk if t.strip()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # empties are counted and reported once
            scored = score(model, [t for _, t in live], metric=metric, per_token=per_token,
                           per_word=per_word, batch_tokens=batch_tokens, precision=precision,
                           stride=stride) if live else []
        by_line = {n: r for (n, _), r in zip(live, scored, strict=True)}
        for n, text in chunk:
            result = by_line.get(n) or TextScore(text=text, pll=None, n_tokens=0, n_words=0,
                                                 metric=metric)
            out.write(json.dumps({"line": n, **result.to_dict()}, ensure_ascii=False) + "\n")
        total += len(chunk)
        if on_progress is not None:
            on_progress(total)

    try:
        with part.open("w", encoding="utf-8") as out:
            chunk: list[tuple[int, str]] = []
            for index, (number, text) in enumerate(read_texts(input_path, field)):
                n_lines = index + 1
                if not shard.owns(index):
                    continue
                if not text.strip():
                    empty += 1
                    first_empty = first_empty or number
                chunk.append((number, text))
                if len(chunk) >= chunk_texts:
                    flush(chunk, out)
                    chunk = []
            if chunk:
                flush(chunk, out)
    except BaseException:
        if shard.world == 1:
            part.unlink(missing_ok=True)
        raise
    barrier(shard)
    if shard.world > 1:
        if shard.is_main:
            os.replace(merge_parts(shard, output_path, n_lines), output_path)
        barrier(shard)
    else:
        os.replace(part, output_path)
    if empty:
        warnings.warn(f"{empty} empty or whitespace-only line(s) got a null score "
                      f"(first: line {first_empty})", stacklevel=2)
    return FileSummary(texts=total, empty=empty, seconds=time.perf_counter() - began,
                       first_empty_line=first_empty)
