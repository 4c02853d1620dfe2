"""LAMA-style knowledge probe: where does the gold object rank over the whole vocabulary?

Each fact becomes a cloze prompt with one mask; one forward per prompt (the head only
at the mask) ranks every vocabulary token. Objects that are not a single token in
their prompt cannot be ranked this way, and objects the tokenizer can only spell as its
unknown token ([UNK]) are not in the vocabulary being ranked (LAMA leaves both out): they
are reported as skipped, with counts per relation (`skipped`, and `unknown` for the
second kind), never dropped silently and never an error that stops the probe. Special tokens (and head rows beyond the
tokenizer) are never answers, so they are left out of the ranking by default.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from mlmkit.core.checks import count
from mlmkit.engine.batching import check_budget
from mlmkit.models.load import prepare_mlm
from mlmkit.probe.answers import locate_answers
from mlmkit.probe.facts import as_facts
from mlmkit.probe.forward import for_each_mask_batch
from mlmkit.probe.metrics import macro_scores, probe_scores
from mlmkit.probe.outcomes import FactPrediction, KnowledgeResult


def excluded_tokens(tokenizer, vocab_size: int) -> torch.Tensor:
    """Bool [V]: token ids that cannot be answers (specials, rows the tokenizer lacks)."""
    excluded = torch.zeros(vocab_size, dtype=torch.bool)
    specials = [i for i in tokenizer.all_special_ids if 0 <= i < vocab_size]
    excluded[torch.tensor(specials, dtype=torch.long)] = True
    excluded[len(tokenizer):] = True
    return excluded


def knowledge_probe(
    model,
    facts,
    *,
    top_k: int = 10,
    templates: dict[str, str] | None = None,
    exclude_special: bool = True,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
) -> KnowledgeResult:
    """P@1, P@10 and MRR of cloze facts (Petroni et al. 2019), per relation and overall.

    `facts`: a jsonl path or a list of rows / `Fact`s (see `mlmkit.probe.facts`). The
    rank of the gold token is 1 + the number of tokens with a strictly higher
    log-probability. `top_k` guesses are kept per fact. `templates` (relation ->
    template) serve rows that give a subject and a relation but no template. A fact whose
    object is several tokens, or only the unknown token, is skipped and counted.
    `batch_tokens`, `precision`, `device`, `threads`, `progress`: see `mlmkit.probe`.
    """
    count("top_k", top_k, 1)
    facts = as_facts(facts, templates)
    check_budget(batch_tokens)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    tokenizer = mlm.tokenizer
    answers = locate_answers(tokenizer, [f.cloze for f in facts], np.arange(len(facts)),
                             [f.answer for f in facts], [f.where for f in facts])
    vocab = int(getattr(mlm.model.config, "vocab_size", len(tokenizer)))
    excluded = (excluded_tokens(tokenizer, vocab) if exclude_special
                else torch.zeros(vocab, dtype=torch.bool)).to(mlm.device)
    k = min(top_k, int((~excluded).sum()))
    ranks = np.zeros(len(facts), dtype=np.int64)
    top = np.zeros((len(facts), k), dtype=np.int64)
    pairs = np.nonzero(answers.single)[0]
    context, token = answers.context[pairs], answers.token[pairs]
    row_of = np.full(len(answers.contexts), -1, dtype=np.int64)

    def consume(batch: np.ndarray, log_probs: torch.Tensor) -> None:
        row_of[batch] = np.arange(len(batch))
        chosen = row_of[context] >= 0
        rows = torch.from_numpy(row_of[context[chosen]]).to(log_probs.device)
        scores = log_probs.masked_fill(excluded, float("-inf"))[rows]
        gold = scores.gather(1, torch.from_numpy(token[chosen]).to(log_probs.device)[:, None])
        ranks[pairs[chosen]] = ((scores > gold).sum(dim=1) + 1).cpu().numpy()
        top[pairs[chosen]] = scores.topk(k, dim=1).indices.cpu().numpy()
        row_of[batch] = -1

    owner = answers.context_owner
    for_each_mask_batch(mlm, answers.contexts, answers.mask_column, consume,
                        batch_tokens=batch_tokens, precision=precision, progress=progress,
                        names=lambda c: facts[int(owner[c])].where)
    predictions, by_relation = [], defaultdict(list)
    skipped, unknown = defaultdict(int), defaultdict(int)
    for i, fact in enumerate(facts):
        by_relation.setdefault(fact.relation, [])
        if answers.single[i]:
            by_relation[fact.relation].append(int(ranks[i]))
            guesses = tokenizer.convert_ids_to_tokens([int(t) for t in top[i]])
            predictions.append(FactPrediction(fact.relation, fact.prompt, fact.answer,
                                              int(ranks[i]), guesses))
        else:
            skipped[fact.relation] += 1
            pieces = tokenizer.convert_ids_to_tokens([answers.filled_ids[i][t]
                                                      for t in answers.span[i]])
            if answers.unknown[i]:
                unknown[fact.relation] += 1
                why = (f"object is not in the vocabulary: the tokenizer spells it {pieces} "
                       f"with the unknown token {tokenizer.unk_token!r}")
            elif len(pieces) > 1:
                why = f"object is {len(pieces)} tokens in this prompt: {pieces}"
            else:
                why = f"object merges with the text around the gap: {pieces}"
            predictions.append(FactPrediction(fact.relation, fact.prompt, fact.answer, None, [],
                                              skipped=why))
    groups = {rel: probe_scores(np.array(r), skipped[rel], unknown[rel])
              for rel, r in by_relation.items()}
    all_ranks = np.array([r for rs in by_relation.values() for r in rs], dtype=np.int64)
    return KnowledgeResult(overall=probe_scores(all_ranks, sum(skipped.values()),
                                                sum(unknown.values())),
                           macro=macro_scores(list(groups.values())),
                           by_relation=groups, facts=predictions)
