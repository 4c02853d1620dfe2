"""Bias audits of masked LMs: CrowS-Pairs, AUL/AULA, StereoSet, distributional measures.

Each benchmark scores a model as its official script does, then every score gets a
seeded bootstrap interval; two models can be compared with a paired bootstrap, and any
audit can be written as an HTML or Markdown report with a bar chart per bias type.

Entry points take the model first, then the benchmark and its data, then the keywords
spelled as everywhere in mlmkit: `batch_tokens`, `precision`, `device`, `threads`, `seed`
(the bootstrap's), `progress`; each reaches the scorer (none is dropped). Results are
dataclasses with `to_dict()`.
"""

from mlmkit.bias.audit import BENCHMARKS, BiasAudit, audit, audit_result, score_model
from mlmkit.bias.aul import aul_sentence_scores, score_aul
from mlmkit.bias.compare import BiasComparison, compare, compare_results
from mlmkit.bias.crows import is_uncased, score_crows, shared_positions
from mlmkit.bias.crows_data import CrowsPair, read_crows_pairs
from mlmkit.bias.distributional import (
    Divergences,
    divergences,
    fit_gaussian,
    js_gaussian,
    kl_gaussian,
)
from mlmkit.bias.pairs import PairScores, PairSummary
from mlmkit.bias.report import render
from mlmkit.bias.stereoset import (
    SentenceScores,
    StereoSetResult,
    read_stereoset,
    score_stereoset,
    template_word,
)
from mlmkit.core.statistics import Difference, Score, Statistic, bootstrap, paired_bootstrap

__all__ = [
    "BENCHMARKS", "BiasAudit", "BiasComparison", "CrowsPair", "Difference", "Divergences",
    "PairScores", "PairSummary", "Score", "SentenceScores", "Statistic", "StereoSetResult", "audit",
    "audit_result", "aul_sentence_scores", "bootstrap", "compare", "compare_results",
    "divergences", "fit_gaussian", "is_uncased", "js_gaussian", "kl_gaussian",
    "paired_bootstrap", "read_crows_pairs", "read_stereoset", "render", "score_aul",
    "score_crows", "score_model", "score_stereoset", "shared_positions", "template_word",
]
