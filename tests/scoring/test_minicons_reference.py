"""PLL and PLL-word-l2r against the real minicons (`scorer.MaskedLMScorer`), token by token.

mlmkit claims the numbers of minicons' 'original' (Salazar et al. 2020) and
'within_word_l2r' (Kauf & Ivanova 2023) metrics. These tests score the same texts with both
on a tiny model of every architecture class mlmkit builds, each loaded by path as a user
would. The tiny fixtures' random weights give nearly uniform predictions (context moves a
log-probability by ~1e-3), too little to tell a wrong mask apart from float noise, so each is
copied with its matrices redrawn at std 0.15: the two metrics then differ by ~1 nat per
subword, far above the 1e-4 tolerance.

Where the two libraries differ on purpose, `test_documented_differences` pins it down.
"""

from __future__ import annotations

import copy
import itertools
import json
import shutil
import warnings

import numpy as np
import pytest
import torch

import mlmkit

minicons_scorer = pytest.importorskip(
    "minicons.scorer", reason="minicons is not installed (pip install -e '.[dev]' brings it)")

# One family per architecture class (ettin/mmbert are ModernBERT classes, neobert EuroBERT's,
# deberta-v3 DeBERTa-v2's), covering the three tokenizer kinds of the fixtures.
FAMILIES = ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta-v2",
            "modernbert", "eurobert"]
METRICS = {"pll": "original", "pll_word_l2r": "within_word_l2r"}
TEXTS = [
    "Return the number of items.",
    "Hello, world! (What?) -- 'quoted' x=1+2.",
    "In 2024 there were 3,141,592 users.",
    "Internationalization of asynchronousness.",
    "  leading and trailing spaces  ",
    "Café über naïve 🙂 漢字.",
    "Return the ☃ of items.",  # [UNK] with the WordPiece and unigram tokenizers
]
ATOL = 1e-4  # log-probabilities in float32


def _minicons(path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), use_fast=True)
    if not hasattr(tokenizer, "batch_encode_plus"):
        # minicons 0.3.39 encodes with batch_encode_plus, which transformers 5 removed; the
        # tokenizer's call takes the same arguments and returns the same BatchEncoding.
        tokenizer.batch_encode_plus = tokenizer.__call__
    return minicons_scorer.MaskedLMScorer(str(path), device="cpu", tokenizer=tokenizer)


@pytest.fixture(scope="module")
def sharp_model(tiny_mlm, tmp_path_factory):
    """Factory: the directory of `family`'s tiny model with redrawn, larger weights."""
    cache = {}

    def make(family: str):
        if family not in cache:
            mlm = tiny_mlm(family)
            model = copy.deepcopy(mlm.model)
            generator = torch.Generator().manual_seed(1)
            with torch.no_grad():
                for weight in model.parameters():
                    if weight.dim() >= 2:
                        weight.normal_(0.0, 0.15, generator=generator)
            path = tmp_path_factory.mktemp(f"sharp-{family}")
            model.save_pretrained(path)
            mlm.tokenizer.save_pretrained(path)
            cache[family] = path
        return cache[family]

    return make


def _compare(path, texts, metric, scorer=None):
    """Score `texts` with both (minicons in one padded batch); assert token-level equality."""
    scorer = scorer or _minicons(path)
    ours = mlmkit.score(str(path), texts, metric=metric, per_token=True, progress=False)
    theirs = scorer.token_score(list(texts), PLL_metric=METRICS[metric])
    tokenizer = scorer.tokenizer
    for text, o, t in zip(texts, ours, theirs, strict=True):
        assert [tokenizer.decode([x.token_id]).strip() for x in o.tokens] == [s for s, _ in t], text
        np.testing.assert_allclose([x.logprob for x in o.tokens], [v for _, v in t], atol=ATOL,
                                   rtol=0, err_msg=f"{metric} {text!r}")
        assert o.pll == pytest.approx(sum(v for _, v in t), abs=ATOL * len(t))
    return ours, theirs


@pytest.mark.parametrize("family", FAMILIES)
def test_pll_and_l2r_equal_minicons(sharp_model, family):
    path = sharp_model(family)
    scorer = _minicons(path)
    pll, _ = _compare(path, TEXTS, "pll", scorer)
    l2r, _ = _compare(path, TEXTS, "pll_word_l2r", scorer)
    # the comparison can tell the metrics apart: texts with multi-subword words score
    # differently under the two, by far more than the comparison's tolerance (by how much
    # depends on the fixture's tokenizer, whose training is not deterministic: one run's
    # text 3 differed by 0.03 only)
    assert max(abs(a.pll - b.pll) for a, b in zip(pll, l2r, strict=True)) > 50 * ATOL
    if family in ("bert", "albert"):  # a tokenizer with [UNK]: scored, as minicons scores it
        assert pll[6].n_unk == 1


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_near_the_maximum_length(sharp_model, tiny_mlm, family):
    """A text of max_length tokens with its specials: every position masked in one copy each
    (ModernBERT's local-attention window, 128 tokens here, spans the whole text)."""
    tokenizer = tiny_mlm(family).tokenizer
    limit = tiny_mlm(family).max_length
    words, text = ("the value of each item is returned when called " * 30).split(), ""
    for word in words:
        longer = f"{text} {word}".strip()
        if len(tokenizer(longer)["input_ids"]) > limit:
            break
        text = longer
    assert len(tokenizer(text)["input_ids"]) >= limit - 3
    _compare(sharp_model(family), [text], "pll_word_l2r")


def test_blimp_pairs(sharp_model, shared_data):
    """A few BLiMP minimal pairs: same scores, so the same good-vs-bad decisions."""
    texts = []
    for paradigm in ("anaphor_gender_agreement", "determiner_noun_agreement_1"):
        with open(shared_data / "blimp" / f"{paradigm}.jsonl", encoding="utf-8") as f:
            for line in itertools.islice(f, 2):
                row = json.loads(line)
                texts += [row["sentence_good"], row["sentence_bad"]]
    for family in ("bert", "roberta"):
        for metric in METRICS:
            _compare(sharp_model(family), texts, metric)


def test_documented_differences(sharp_model, tmp_path):
    """Where mlmkit departs from minicons on purpose (docs/scoring.md)."""
    path = sharp_model("bert")
    scorer = _minicons(path)
    # 1. A literal [MASK] in the text: minicons masks it and scores the model's probability
    #    of predicting [MASK]; mlmkit leaves it unmasked as context (it is not a token of the
    #    sentence, and an MLM head never learns to predict it). The other tokens agree.
    text = "Return the [MASK] of items."
    (ours,) = mlmkit.score(str(path), [text], per_token=True, progress=False)
    (theirs,) = scorer.token_score([text])
    assert [s for s, _ in theirs].count("[MASK]") == 1
    kept = [v for s, v in theirs if s != "[MASK]"]
    np.testing.assert_allclose([t.logprob for t in ours.tokens], kept, atol=ATOL, rtol=0)

    # 2. Empty or whitespace-only texts: minicons fails on an empty one (and scores the bare
    #    space tokens of byte-level BPE); mlmkit returns pll=None with a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert mlmkit.score(str(path), ["", "   "], progress=False)[0].pll is None
    with pytest.raises(RuntimeError):
        scorer.token_score([""])

    # 3. A tokenizer whose sentence markers are only bos/eos (no cls/sep token): minicons
    #    excludes just the cls/sep/pad ids, so it masks and scores <s> and </s>; mlmkit
    #    scores the text's tokens only, which is the PLL of Salazar et al.
    bpe = sharp_model("roberta")
    plain = tmp_path / "no-cls"
    shutil.copytree(bpe, plain)
    config_file = plain / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    del config["cls_token"], config["sep_token"]
    config_file.write_text(json.dumps(config))
    text = "Return the number of items."
    (ours,) = mlmkit.score(str(plain), [text], per_token=True, progress=False)
    (theirs,) = _minicons(plain).token_score([text])
    assert [s for s, _ in theirs][0] == "<s>" and [s for s, _ in theirs][-1] == "</s>"
    np.testing.assert_allclose([t.logprob for t in ours.tokens], [v for _, v in theirs[1:-1]],
                               atol=ATOL, rtol=0)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_reduction_equals_minicons_sequence_score(sharp_model, reduction):
    path = sharp_model("bert")
    scorer = _minicons(path)
    ours = mlmkit.score(str(path), TEXTS[:4], reduction=reduction, progress=False)
    reduce = (lambda x: x.sum(0).item()) if reduction == "sum" else (lambda x: x.mean(0).item())
    theirs = scorer.sequence_score(TEXTS[:4], reduction=reduce, PLL_metric="original")
    np.testing.assert_allclose([o.score for o in ours], theirs, atol=ATOL * 40, rtol=0)
    assert all(o.reduction == reduction for o in ours)
