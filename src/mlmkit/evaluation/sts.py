"""Semantic textual similarity: how well the cosine similarity of two texts' vectors ranks
sentence pairs as people scored them (Spearman's ρ, the STS-B convention, and Pearson's r).

The pairs come from a TSV/CSV with a header or a JSONL file with `sentence1`, `sentence2`
and `score` (the STS-B files in ../shared/data/stsb; the columns of mteb/stsbenchmark-sts),
or a data name: `stsb` / `mteb/stsbenchmark-sts` (a split of the STS benchmark, fetched into
the data folder the first time; `mlmkit.evaluation.data_names`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mlmkit.core.correlation import pearson, spearman
from mlmkit.embeddings.pairs import cosine_rows, read_sts_pairs
from mlmkit.errors import InvalidArgument
from mlmkit.evaluation.data_names import sts_file
from mlmkit.mlm import load

__all__ = ["StsResult", "cosine_rows", "evaluate_sts", "read_sts_pairs"]


@dataclass
class StsResult:
    """Correlations of cosine similarity with the gold scores, over `pairs` pairs."""

    spearman: float
    pearson: float
    pairs: int

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate_sts(model, data, *, split: str | None = None, limit: int | None = None,
                 **embedding) -> StsResult:
    """Spearman and Pearson correlation of the cosine similarity of each pair's vectors with
    its gold score. `model`: an `MLM`, a name or a directory; `data`: an STS file, or
    `stsb` / `mteb/stsbenchmark-sts` and a `split` (train, validation, default test);
    `embedding`: `embed`'s options (pooling, normalize, dimensions, prompt, batch_tokens)."""
    if limit is not None and (not isinstance(limit, int) or limit < 2):
        raise InvalidArgument(f"limit={limit!r}: pass at least 2 pairs, or None for all")
    firsts, seconds, gold = read_sts_pairs(sts_file(data, split), limit)
    mlm = load(model, allow_untrained_head=True)
    vectors = mlm.embed(firsts + seconds, **embedding)
    similarity = cosine_rows(vectors[:len(firsts)], vectors[len(firsts):])
    return StsResult(spearman=spearman(similarity, gold), pearson=pearson(similarity, gold),
                     pairs=len(gold))
