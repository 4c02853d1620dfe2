"""Semantic textual similarity: how well the cosine similarity of two texts' vectors ranks
sentence pairs as people scored them (Spearman's ρ, the STS-B convention, and Pearson's r).

The pairs come from a TSV/CSV with a header or a JSONL file with `sentence1`, `sentence2`
and `score` (the STS-B files in ../shared/data/stsb; the columns of mteb/stsbenchmark-sts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from mlmkit.core.correlation import pearson, spearman
from mlmkit.core.records import (
    check_input_file,
    decoded_lines,
    delimiter_of,
    display_name,
    read_table,
)
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.mlm import load

COLUMNS = ("sentence1", "sentence2", "score")


@dataclass
class StsResult:
    """Correlations of cosine similarity with the gold scores, over `pairs` pairs."""

    spearman: float
    pearson: float
    pairs: int

    def to_dict(self) -> dict:
        return asdict(self)


def _plain_tsv(path):
    """(line number, row) of a TSV without quoting (the STS-B and GLUE files: a text may
    start with a lone `"`), the first line its header."""
    header = None
    for number, line in decoded_lines(path):
        if not line.strip():
            continue
        cells = line.rstrip("\r\n").split("\t")
        if header is None:
            header = cells
            continue
        if len(cells) != len(header):
            raise InvalidData(f"{display_name(path)} line {number}: {len(cells)} tab-separated "
                              f"fields under a header of {len(header)}; fix the row")
        yield number, dict(zip(header, cells, strict=True))


def read_sts_pairs(path, limit: int | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """(first sentences, second sentences, float64 scores) of an STS file."""
    check_input_file(path, "STS data")
    rows = _plain_tsv(path) if delimiter_of(path) == "\t" else read_table(path, what="STS pairs")
    firsts, seconds, scores = [], [], []
    for number, row in rows:
        missing = [name for name in COLUMNS if name not in row]
        if missing:
            raise InvalidData(f"{display_name(path)} line {number} has no {missing[0]!r} "
                              f"field: STS data needs {', '.join(COLUMNS)}")
        try:
            score = float(row["score"])
        except (TypeError, ValueError):
            raise InvalidData(f"{display_name(path)} line {number}: score "
                              f"{row['score']!r} is not a number") from None
        if not np.isfinite(score):
            raise InvalidData(f"{display_name(path)} line {number}: score {score} is not finite")
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


def evaluate_sts(model, data, *, limit: int | None = None, **embedding) -> StsResult:
    """Spearman and Pearson correlation of the cosine similarity of each pair's vectors with
    its gold score. `model`: an `MLM`, a name or a directory; `data`: an STS file;
    `embedding`: `embed`'s options (pooling, normalize, dimensions, prompt, batch_tokens)."""
    if limit is not None and (not isinstance(limit, int) or limit < 2):
        raise InvalidArgument(f"limit={limit!r}: pass at least 2 pairs, or None for all")
    firsts, seconds, gold = read_sts_pairs(data, limit)
    mlm = load(model, allow_untrained_head=True)
    vectors = mlm.embed(firsts + seconds, **embedding)
    similarity = cosine_rows(vectors[:len(firsts)], vectors[len(firsts):])
    return StsResult(spearman=spearman(similarity, gold), pearson=pearson(similarity, gold),
                     pairs=len(gold))
