"""Units: whole words for three tokenizer families, SpanBERT span lengths."""

from __future__ import annotations

import pytest
import torch

from mlmkit.corpus.python_docs import python_docs
from mlmkit.masking import build_policy
from mlmkit.masking.units import truncated_geometric
from mlmkit.masking.vocabulary import WordStarts

FAMILIES = ["wordpiece_tokenizer", "bpe_tokenizer", "unigram_tokenizer"]


def encode_with_words(tokenizer, texts, length=96):
    """Ids, attention and word ids (-1 on specials/padding) from the fast tokenizer."""
    encoded = tokenizer(texts, truncation=True, max_length=length, padding="max_length",
                        return_tensors="pt")
    words = torch.tensor([[-1 if w is None else w for w in encoded.word_ids(i)]
                          for i in range(len(texts))])
    return encoded["input_ids"], encoded["attention_mask"], words


def starts_from_word_ids(words):
    starts = torch.ones_like(words, dtype=torch.bool)
    starts[:, 1:] = words[:, 1:] != words[:, :-1]
    return starts


def assert_whole_words(mask, words):
    """Every word is masked entirely or not at all."""
    for row in range(words.shape[0]):
        for word in words[row].unique():
            if word < 0:
                continue
            chosen = mask[row][words[row] == word]
            assert chosen.all() or not chosen.any(), (row, int(word))


@pytest.mark.parametrize("family", FAMILIES)
def test_whole_word_masks_every_subword_together(family, request):
    tok = request.getfixturevalue(family)
    texts = python_docs("validation")[:24]
    ids, attention, words = encode_with_words(tok, texts)
    policy = build_policy({"units": "whole_word", "rate": 0.4}, tok)
    out = policy(ids, attention, word_starts=starts_from_word_ids(words), seed=4)
    assert_whole_words(out.mask, words)
    multi = (words[:, 1:] == words[:, :-1]) & (words[:, 1:] >= 0)
    assert (out.mask[:, 1:] & multi).any()  # some masked word has several subwords
    assert abs(out.mask.sum() / (words >= 0).sum() - 0.4) < 0.05


@pytest.mark.parametrize("family", FAMILIES)
def test_derived_word_starts_match_the_tokenizers_word_ids(family, request):
    """Without word_starts the policy derives them from the vocabulary: ≥ 98% agreement with
    the fast tokenizer's word ids, and whole words by those derived starts."""
    tok = request.getfixturevalue(family)
    texts = python_docs("validation")[:40]
    ids, attention, words = encode_with_words(tok, texts)
    derived = WordStarts(tok)(ids)
    truth = starts_from_word_ids(words)
    inside = (words >= 0) & (torch.arange(ids.shape[1]) > 1)
    agreement = (derived == truth)[inside].float().mean()
    assert agreement > 0.98
    policy = build_policy({"units": "whole_word", "rate": 0.3}, tok)
    out = policy(ids, attention, seed=1)
    derived_words = torch.where(words >= 0, (derived | (words < 0)).long().cumsum(1), -1)
    assert_whole_words(out.mask, derived_words)


def span_law(p, top):
    weights = torch.tensor([(1 - p) ** (k - 1) * p for k in range(1, top + 1)],
                           dtype=torch.float64)
    return weights / weights.sum()


def test_truncated_geometric_law():
    g = torch.Generator().manual_seed(0)
    lengths = truncated_geometric((200_000,), 0.2, 10, g, "cpu")
    law = span_law(0.2, 10)
    freq = torch.bincount(lengths, minlength=11)[1:].double() / lengths.numel()
    assert torch.allclose(freq, law, atol=0.004)
    assert abs(lengths.double().mean() - (law * torch.arange(1, 11)).sum()) < 0.02


def test_span_lengths_follow_the_geometric_law(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    special = set(tok.all_special_ids)
    pool = torch.tensor([i for i in range(len(tok)) if i not in special])
    ids = pool[torch.randint(len(pool), (64, 512), generator=torch.Generator().manual_seed(0))]
    starts = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.6
    starts[:, 0] = True
    policy = build_policy({"preset": "span", "rate": 0.15}, tok)
    out = policy(ids, word_starts=starts, seed=2)
    units = policy.unit_ids(ids, word_starts=starts, seed=2)
    word_of = starts.long().cumsum(1)
    lengths = []  # words per masked span, spans ending before the row does
    for row in range(64):
        chosen = units[row][out.mask[row]].unique()
        for unit in chosen[chosen < units[row].max()]:
            lengths.append(word_of[row][units[row] == unit].unique().numel())
    lengths = torch.tensor(lengths, dtype=torch.float64)
    law = span_law(0.2, 10)
    expected = float((law * torch.arange(1, 11)).sum())  # ≈ 3.8 words (SpanBERT)
    assert len(lengths) > 400
    assert abs(lengths.mean() - expected) < 3 * lengths.std() / len(lengths) ** 0.5 + 0.05
    assert lengths.max() <= 10
    realised = out.mask.float().mean()
    assert abs(realised - 0.15) < 0.01
    # one fate per span: a span is all [MASK], or has no [MASK] at all
    for row in range(8):
        for unit in units[row][out.mask[row]].unique():
            became = out.input_ids[row][units[row] == unit] == tok.mask_token_id
            assert became.all() or not became.any()


def test_span_masking_of_a_short_text_masks_a_span_that_fits(wordpiece_tokenizer):
    """Nine one-token words at 15% target one token: a row whose first spans in the order
    are longer still masks a span that fits (one word), when the row has one."""
    tok = wordpiece_tokenizer
    special = set(tok.all_special_ids)
    pool = torch.tensor([i for i in range(len(tok)) if i not in special])
    ids = pool[torch.randint(len(pool), (400, 9), generator=torch.Generator().manual_seed(0))]
    starts = torch.ones_like(ids, dtype=torch.bool)
    policy = build_policy({"preset": "span", "rate": 0.15}, tok)
    out = policy(ids, word_starts=starts, seed=3)
    units = policy.unit_ids(ids, word_starts=starts, seed=3)
    has_one_word_span = torch.tensor([(units[r].bincount() == 1).any() for r in range(400)])
    assert has_one_word_span.sum() > 100 and (~has_one_word_span).sum() > 20
    assert torch.equal(out.mask.sum(1), has_one_word_span.long())
