"""Plausibility ranking: score every candidate statement by PLL, the best one wins.

Tamborrino et al. (2020) and BEAR (Wiland et al. 2024) answer a multiple-choice item
with the MLM alone: each option becomes a full statement and the statements are
ranked by (pseudo-)log-likelihood. All statements of all items go through the PLL
engine in one run (token-budget batches, the head only at masked positions).

A candidate with characters the tokenizer does not know holds its unknown token ([UNK]).
That token is scored like any other (as minicons and Salazar et al. score it, and as the
PLL engine does), so such a candidate gets no free pass from tokens left unscored; the
count of [UNK] tokens per candidate is reported (`RankedItem.unknown_tokens`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mlmkit.core.checks import choice
from mlmkit.core.progress import progress_wanted
from mlmkit.engine.batching import check_budget
from mlmkit.errors import InvalidArgument, InvalidData, ModelError
from mlmkit.models.load import prepare_mlm
from mlmkit.probe.items import Item
from mlmkit.probe.outcomes import RankedItem, RankResult
from mlmkit.probe.shared import shared_regions
from mlmkit.scoring.jobs import METRICS
from mlmkit.scoring.masked_copies import score_token_ids
from mlmkit.scoring.texts import encode_texts

NORMALIZATIONS = ("sum", "token", "word")
SCOPES = ("statement", "shared")


def _as_items(candidates_per_item, gold) -> list[Item]:
    items = []
    for i, entry in enumerate(candidates_per_item):
        item = replace(entry) if isinstance(entry, Item) else Item(list(entry))
        if len(item.candidates) < 2 or not all(isinstance(c, str) and c.strip()
                                               for c in item.candidates):
            raise InvalidData(f"item {i}: needs at least two non-empty candidate statements")
        twice = [c for k, c in enumerate(item.candidates) if c in item.candidates[:k]]
        if twice:  # equal scores: the tie would go to the first, silently
            name = f"item {i}" + (f" (id {item.item_id!r})" if item.item_id else "")
            raise InvalidData(f"{name}: the candidate {twice[0][:60]!r} is given twice; an item "
                              "needs distinct candidates: remove the duplicate")
        items.append(item)
    if gold is not None:
        if len(gold) != len(items):
            raise InvalidArgument(f"gold has {len(gold)} entries for {len(items)} items")
        for i, (item, g) in enumerate(zip(items, gold, strict=True)):
            whole = isinstance(g, (int, np.integer)) and not isinstance(g, bool)
            if g is not None and not (whole and 0 <= g < len(item.candidates)):
                raise InvalidArgument(f"gold[{i}] = {g!r} is not a candidate index of item {i} "
                                      f"(0..{len(item.candidates) - 1})")
            item.gold = None if g is None else int(g)
    return items


def _targets(offsets, ids, special: set[int], text_length: int, region) -> list[int]:
    """Scored positions: every non-special token ([UNK] included), or only those in the
    shared region."""
    positions = [t for t, token in enumerate(ids) if token not in special]
    if region is None:
        return positions
    prefix, suffix = region
    return [t for t in positions if offsets[t][1] > offsets[t][0]
            and (offsets[t][1] <= prefix or offsets[t][0] >= text_length - suffix)]


def rank_statements(
    model,
    candidates_per_item,
    metric: str = "pll",
    normalize: str = "sum",
    *,
    scope: str = "statement",
    gold: list[int | None] | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
) -> RankResult:
    """Rank each item's candidate statements by PLL; accuracy against `gold` indices.

    `candidates_per_item`: a list of items, each a list of statements (or `Item`s, e.g.
    from `read_items`). `metric`: "pll" or "pll_word_l2r". `normalize`: "sum" (the
    statement's log-likelihood, as BEAR), "token" (per scored token) or "word" (per
    scored word). `scope`: "statement" scores every token; "shared" only the tokens all
    candidates of the item share, conditioned on the rest (Tamborrino et al. 2020).
    [UNK] tokens are scored like any other token and counted per candidate.
    `batch_tokens`, `precision`, `device`, `threads`, `progress`: see `mlmkit.probe`.
    """
    choice("metric", metric, METRICS)
    choice("normalize", normalize, NORMALIZATIONS)
    choice("scope", scope, SCOPES)
    items = _as_items(candidates_per_item, gold)
    if not items:
        raise InvalidArgument("rank_statements needs at least one item")
    check_budget(batch_tokens)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    regions = [shared_regions(item.candidates) if scope == "shared" else None for item in items]
    keys = list(dict.fromkeys((c, r) for item, r in zip(items, regions, strict=True)
                              for c in item.candidates))
    encoded = encode_texts(mlm.tokenizer, [text for text, _ in keys])
    if any(e.offsets is None for e in encoded):
        raise ModelError("ranking needs a fast tokenizer (offsets): load the model with its "
                         "tokenizer.json")
    unk_id = mlm.tokenizer.unk_token_id
    special = set(mlm.tokenizer.all_special_ids) - {unk_id}
    targets = [_targets(e.offsets, e.ids, special, len(text), region)
               for e, (text, region) in zip(encoded, keys, strict=True)]
    index = {key: k for k, key in enumerate(keys)}
    for i, (item, region) in enumerate(zip(items, regions, strict=True)):
        if region is not None and any(not targets[index[(c, region)]] for c in item.candidates):
            raise InvalidData(f"item {i}: its candidates share no whole word, so scope "
                              "'shared' has nothing to score; use scope='statement'")
        for j, candidate in enumerate(item.candidates):
            if not targets[index[(candidate, region)]]:  # it would sum to 0.0 and rank first
                raise InvalidData(f"item {i}: candidate {j} ({candidate!r}) has no token to "
                                  "score (only special tokens): give it words, or drop it")
    values = score_token_ids(
        mlm, [e.ids for e in encoded], targets, metric=metric,
        word_ids=[e.word_ids for e in encoded] if metric == "pll_word_l2r" else None,
        batch_tokens=batch_tokens, precision=precision, progress=progress_wanted(progress),
    )
    n_unknown = [sum(1 for t in ts if e.ids[t] == unk_id) if unk_id is not None else 0
                 for e, ts in zip(encoded, targets, strict=True)]
    totals = np.array([np.sum(v, dtype=np.float64) for v in values], dtype=np.float64)
    if normalize == "token":
        totals = totals / np.maximum(1, [len(t) for t in targets])
    elif normalize == "word":
        words = [len({e.word_ids[t] if e.word_ids[t] is not None else -1 - t for t in ts})
                 for e, ts in zip(encoded, targets, strict=True)]
        totals = totals / np.maximum(1, words)
    ranked = []
    for item, region in zip(items, regions, strict=True):
        scores = np.array([totals[index[(c, region)]] for c in item.candidates])
        ranking = np.argsort(-scores, kind="stable")
        ranked.append(RankedItem(candidates=item.candidates, scores=scores.tolist(),
                                 ranking=ranking.tolist(), predicted=int(ranking[0]),
                                 gold=item.gold, item_id=item.item_id,
                                 unknown_tokens=[n_unknown[index[(c, region)]]
                                                 for c in item.candidates]))
    with_gold = [r for r in ranked if r.gold is not None]
    accuracy = float(np.mean([r.correct for r in with_gold])) if with_gold else None
    return RankResult(items=ranked, metric=metric, normalize=normalize, scope=scope,
                      accuracy=accuracy, n_with_gold=len(with_gold))
