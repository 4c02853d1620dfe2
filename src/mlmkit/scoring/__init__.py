"""Scoring text with a masked LM: PLL, PLL-word-l2r, pseudo-perplexity, rescoring, minimal pairs.

`score` turns texts into sentence scores (with token and word breakdowns); `score_file`
streams a file of texts to JSON lines (resumable); `rescore` reranks n-best lists;
`evaluate_pairs` runs minimal-pair benchmarks such as BLiMP; all of them run on
`mlmkit.scoring.masked_copies.score_token_ids`, which batches through `mlmkit.engine.batching`.
"""

from mlmkit.scoring.masked_copies import score_token_ids
from mlmkit.scoring.minimal_pairs import (
    MinimalPair,
    MinimalPairResult,
    evaluate_pairs,
    read_pairs,
)
from mlmkit.scoring.nbest import Hypothesis, Utterance, read_nbest
from mlmkit.scoring.rescore import RescoreResult, rescore
from mlmkit.scoring.scores import TextScore, TokenScore, WordScore
from mlmkit.scoring.stream import FileSummary, score_file
from mlmkit.scoring.text_scores import score

__all__ = ["FileSummary", "Hypothesis", "MinimalPair", "MinimalPairResult", "RescoreResult",
           "TextScore", "TokenScore", "Utterance", "WordScore", "evaluate_pairs",
           "read_nbest", "read_pairs", "rescore", "score", "score_file", "score_token_ids"]
