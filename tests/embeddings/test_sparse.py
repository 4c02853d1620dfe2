"""SPLADE vectors: max over tokens of log(1 + relu(logits)), top-k, from the full model."""

from __future__ import annotations

import pytest

import mlmkit

TEXTS = ["Return the number of items.", "a b", "Open the file for reading now."]


def test_equals_the_full_logits(tiny_mlm):
    torch = pytest.importorskip("torch")
    mlm = tiny_mlm("bert")
    got = mlmkit.embed_sparse(mlm, TEXTS, top_k=10, batch_tokens=16)
    for text, vector in zip(TEXTS, got, strict=True):
        ids = mlm.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            logits = mlm.model(**ids).logits[0]
        pooled = torch.log1p(torch.relu(logits)).max(0).values
        weights, vocab = pooled.topk(10)
        assert vector.token_ids == [int(v) for v, w in zip(vocab, weights, strict=True)
                                    if w > 0]
        assert max(abs(a - float(b)) for a, b in zip(vector.weights, weights,
                                                      strict=False)) < 1e-5
        assert vector.tokens == mlm.tokenizer.convert_ids_to_tokens(vector.token_ids)


def test_one_text_and_bad_top_k(tiny_mlm):
    mlm = mlmkit.load(tiny_mlm("bert"))
    one = mlm.embed_sparse("Return the items.", top_k=3)
    assert len(one.token_ids) <= 3 and one.weights == sorted(one.weights, reverse=True)
    with pytest.raises(mlmkit.errors.InvalidArgument, match="top_k"):
        mlm.embed_sparse("a", top_k=0)
