"""Using the MLM head as is: zero-shot cloze classification, statement ranking, fact probes.

`cloze_classify` (PET-style prompts with verbalizers), `rank_statements` (plausibility
ranking of full statements by PLL, Tamborrino et al. 2020 / BEAR) and `knowledge_probe`
(LAMA P@1 / P@10 / MRR) are thin layers over `mlmkit.models.masked_log_probs` and the
PLL engine `mlmkit.scoring.masked_copies.score_token_ids`.

Every entry point takes the model first (a loaded `MLM`, a name or path, or a
`(model, tokenizer)` pair), the inputs second, then the keywords spelled as everywhere in
mlmkit: `batch_tokens` (padded tokens per forward batch), `precision` ("auto", "fp32",
"bf16"; auto = fp32 for these scores), `device` (None keeps a loaded model where it is,
"auto" or a name moves it), `threads` (CPU threads) and `progress` (None: a bar when
standard error is a terminal). Results are dataclasses with `to_dict()`.
"""

from mlmkit.probe.cloze import AGGREGATES, cloze_classify
from mlmkit.probe.facts import Fact, parse_fact, read_facts, read_templates
from mlmkit.probe.items import Item, read_items
from mlmkit.probe.knowledge import knowledge_probe
from mlmkit.probe.outcomes import (
    ClozePrediction,
    ClozeResult,
    FactPrediction,
    KnowledgeResult,
    ProbeScores,
    RankedItem,
    RankResult,
)
from mlmkit.probe.rank import NORMALIZATIONS, SCOPES, rank_statements
from mlmkit.probe.verbalizer import DEFAULT_VERBALIZER, parse_verbalizer

__all__ = [
    "AGGREGATES", "DEFAULT_VERBALIZER", "NORMALIZATIONS", "SCOPES", "ClozePrediction",
    "ClozeResult", "Fact", "FactPrediction", "Item", "KnowledgeResult", "ProbeScores",
    "RankResult", "RankedItem", "cloze_classify", "knowledge_probe", "parse_fact",
    "parse_verbalizer", "rank_statements", "read_facts", "read_items", "read_templates",
]
