"""[UNK] tokens are masked and scored as minicons does (every token but [CLS]/[SEP]/[PAD]);
`unk="skip"` keeps mlmkit 0.1's behaviour (left out of the PLL); `n_unk` reports them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mlmkit
from mlmkit.errors import InvalidArgument
from mlmkit.scoring.masked_copies import score_token_ids

TEXTS = ["Return the ☃ of items.", "Return 漢字 value", "Return the number of items."]


def minicons_reference(mlm, text: str) -> np.ndarray:
    """minicons' MaskedLMScorer.prepare_text + compute_stats, written out: every position
    between [CLS] and [SEP] masked in its own copy (the [UNK] included), full logits."""
    tok = mlm.tokenizer
    ids = tok(text)["input_ids"]
    excluded = {tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}
    positions = [t for t, token in enumerate(ids) if token not in excluded]
    copies = []
    for t in positions:
        copy = list(ids)
        copy[t] = tok.mask_token_id
        copies.append(copy)
    with torch.no_grad():
        logits = mlm.model(input_ids=torch.tensor(copies)).logits
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    return np.array([log_probs[k, t, ids[t]].double().item() for k, t in enumerate(positions)])


@pytest.mark.parametrize("family", ["bert", "electra"])
def test_unk_is_scored_as_minicons_does(tiny_mlm, family):
    mlm = tiny_mlm(family)
    results = mlmkit.score(mlm, TEXTS, per_token=True, progress=False)
    unk = mlm.tokenizer.unk_token
    for text, result in zip(TEXTS, results, strict=True):
        reference = minicons_reference(mlm, text)
        assert result.n_tokens == len(reference)
        np.testing.assert_allclose([t.logprob for t in result.tokens], reference, atol=1e-4)
        assert result.pll == pytest.approx(reference.sum(), abs=1e-3)
        assert result.n_unk == sum(t.token == unk for t in result.tokens)
    assert [r.n_unk for r in results] == [1, 1, 0]
    assert results[0].to_dict()["n_unk"] == 1


def test_skip_keeps_the_old_behaviour(tiny_mlm):
    mlm = tiny_mlm("bert")
    scored = mlmkit.score(mlm, TEXTS, per_token=True, progress=False)
    skipped = mlmkit.score(mlm, TEXTS, per_token=True, unk="skip", progress=False)
    unk_id = mlm.tokenizer.unk_token_id
    for a, b in zip(scored, skipped, strict=True):
        assert b.n_unk == a.n_unk and b.n_tokens == a.n_tokens - a.n_unk
        assert all(t.token_id != unk_id for t in b.tokens)
    # Skipping: the other tokens still see the [UNK] unmasked, as mlmkit 0.1 did.
    ids = [mlm.tokenizer(t)["input_ids"] for t in TEXTS]
    old = score_token_ids(mlm, ids, unk="skip")
    for value, result in zip(old, skipped, strict=True):
        # another batching of the same positions: float32 agrees to ~1e-7, not bitwise
        assert result.pll == pytest.approx(float(value.sum()), abs=1e-5)
    assert skipped[2].pll == pytest.approx(scored[2].pll, abs=1e-5)  # no [UNK]: no difference
    with pytest.raises(InvalidArgument, match="unk"):
        mlmkit.score(mlm, TEXTS, unk="drop")


def test_engine_default_targets_include_unk(tiny_mlm):
    mlm = tiny_mlm("bert")
    ids = mlm.tokenizer(TEXTS[0])["input_ids"]
    (with_unk,) = score_token_ids(mlm, [ids])
    (without,) = score_token_ids(mlm, [ids], unk="skip")
    assert len(with_unk) == len(ids) - 2 and len(without) == len(ids) - 3
