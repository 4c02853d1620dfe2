"""BM25 term-importance weights (ROM): the values against a plain-Python BM25, and the
masking they drive: at the same rate, a frequent token (low idf) is masked less often than
a rare one."""

from __future__ import annotations

import math

import pytest
import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking import MaskingStats, build_policy


def stats_for(vocab_size: int, doc_freq: dict[int, int], n_docs=100, n_tokens=2000):
    """Statistics with the given document frequencies (every other token in no document)."""
    df = torch.zeros(vocab_size, dtype=torch.int64)
    for token, count in doc_freq.items():
        df[token] = count
    return MaskingStats(token_counts=df * 3, doc_freq=df,
                        informativeness=torch.zeros(vocab_size),
                        ngram_ids=torch.zeros(0, 5, dtype=torch.int64),
                        ngram_pmi=torch.zeros(0), ngram_counts=torch.zeros(0, dtype=torch.int64),
                        n_docs=n_docs, n_tokens=n_tokens)


def reference_bm25(ids, docs, maskable, df, n_docs, avglen, k1, b):
    """BM25 of each position, one token at a time."""
    out = []
    for r, row in enumerate(ids):
        weights = []
        for c, token in enumerate(row):
            same_doc = [k for k in range(len(row)) if docs[r][k] == docs[r][c]]
            tf = sum(1 for k in same_doc if row[k] == token)
            length = sum(1 for k in same_doc if maskable[r][k])
            idf = math.log(1 + (n_docs - df[token] + 0.5) / (df[token] + 0.5))
            weights.append(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avglen)))
        out.append(weights)
    return torch.tensor(out)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("params", [{}, {"k1": 1.2, "b": 0.75}])
def test_bm25_weights_equal_a_plain_reference(wordpiece_tokenizer, params, device):
    vocab = len(wordpiece_tokenizer)
    g = torch.Generator().manual_seed(3)
    frequencies = {t: int(torch.randint(0, 100, (), generator=g)) for t in range(5, 12)}
    stats = stats_for(vocab, frequencies)
    weights = build_policy({"weights": {"name": "bm25", **params}}, wordpiece_tokenizer,
                           stats=stats).weights
    ids = torch.randint(5, 12, (4, 25), generator=g)  # few ids: many repeats
    docs = (torch.rand(4, 25, generator=g) < 0.15).long().cumsum(1)
    maskable = torch.rand(4, 25, generator=g) < 0.9
    got = weights.token_weights(ids.to(device), maskable.to(device), docs.to(device)).cpu()
    k1, b = params.get("k1", 0.9), params.get("b", 0.4)
    expected = reference_bm25(ids.tolist(), docs.tolist(), maskable.tolist(),
                              stats.doc_freq.tolist(), 100, 2000 / 100, k1, b)
    assert torch.allclose(got, expected.float(), rtol=1e-5)
    # without document ids each row is one document; without a maskable mask every token counts
    whole = weights.token_weights(ids.to(device), None, None).cpu()
    expected = reference_bm25(ids.tolist(), [[0] * 25] * 4, [[True] * 25] * 4,
                              stats.doc_freq.tolist(), 100, 20.0, k1, b)
    assert torch.allclose(whole, expected.float(), rtol=1e-5)
    assert weights.token_weights(ids[:, :0], None, docs[:, :0]).shape == (4, 0)


def test_rom_masks_frequent_tokens_less_than_rare_ones(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    frequent, rare = 20, 21  # one in 90 of 100 documents (a stop-word), one in 2
    stats = stats_for(len(tok), {frequent: 90, rare: 2})
    ids = torch.tensor([[frequent, rare] * 20] * 500)
    for units in ("tokens", "whole_word"):
        policy = build_policy({"preset": "rom", "units": units, "rate": 0.2}, tok, stats=stats)
        mask = policy(ids, word_starts=torch.ones_like(ids, dtype=torch.bool)).mask
        frequent_share = mask[ids == frequent].float().mean()
        rare_share = mask[ids == rare].float().mean()
        assert abs(mask.float().mean() - 0.2) < 0.01  # the rate is kept
        assert rare_share > 3 * frequent_share, (units, rare_share, frequent_share)
    uniform = build_policy({"rate": 0.2}, tok)(ids).mask
    assert abs(uniform[ids == frequent].float().mean() - uniform[ids == rare].float().mean()) \
        < 0.03


def test_bm25_needs_statistics_and_valid_parameters(wordpiece_tokenizer):
    with pytest.raises(MlmkitError, match="bm25 weights need corpus statistics"):
        build_policy("rom", wordpiece_tokenizer)
    stats = stats_for(len(wordpiece_tokenizer), {})
    with pytest.raises(MlmkitError, match="b=2 in"):
        build_policy({"weights": {"name": "bm25", "b": 2}}, wordpiece_tokenizer, stats=stats)


def test_without_document_ids_a_row_is_one_document(wordpiece_tokenizer):
    """tf counts over the whole row (it once counted each position as its own document)."""
    stats = stats_for(len(wordpiece_tokenizer), {7: 10, 8: 10})
    tfidf = build_policy({"weights": "tfidf"}, wordpiece_tokenizer, stats=stats).weights
    weights = tfidf.token_weights(torch.tensor([[7, 7, 7, 8]]), None, None)
    assert weights[0, 0] / weights[0, 3] == pytest.approx(1 + math.log(3))
