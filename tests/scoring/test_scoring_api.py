"""`mlmkit.score`: sentence PLL, pseudo-perplexity, token/word scores, spans, empty texts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import mlmkit
from mlmkit.errors import MlmkitError
from mlmkit.scoring.masked_copies import score_token_ids

TEXTS = ["Return the number of items in a container.",
         "Asynchronous generators yield values lazily."]


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta"])
def test_sentence_token_and_word_scores_agree(tiny_mlm, family):
    mlm = tiny_mlm(family)
    results = mlmkit.score(mlm, TEXTS, per_token=True, per_word=True)
    ids = [list(x) for x in mlm.tokenizer(TEXTS)["input_ids"]]
    engine = score_token_ids(mlm, ids)
    for text, r, e in zip(TEXTS, results, engine, strict=True):
        assert math.isclose(r.pll, float(np.sum(e)), abs_tol=1e-9)
        assert r.n_tokens == len(e) == len(r.tokens)
        assert math.isclose(sum(t.logprob for t in r.tokens), r.pll, abs_tol=1e-9)
        assert math.isclose(sum(w.logprob for w in r.words), r.pll, abs_tol=1e-9)
        # words are the tokenizer's pre-tokens: Metaspace (unigram) splits on spaces only
        spaced = text if family == "xlm-roberta" else text.replace(".", " .")
        assert [w.word for w in r.words] == spaced.split()
        for w in r.words:
            assert text[w.start:w.end] == w.word
        for t in r.tokens:
            assert 0 <= t.start <= t.end <= len(text)  # a lone "▁" token is zero-width
            assert t.start == t.end or not text[t.start].isspace()
        assert math.isclose(r.pppl, math.exp(-r.pll / r.n_tokens))
        assert math.isclose(r.pppl_word, math.exp(-r.pll / r.n_words))
        assert r.n_words == len(r.words) < r.n_tokens


def test_l2r_metric_and_single_text(tiny_mlm):
    mlm = tiny_mlm("bert")
    pll = mlmkit.score(mlm, TEXTS[1])
    l2r = mlmkit.score(mlm, TEXTS[1], metric="pll_word_l2r")
    assert l2r.metric == "pll_word_l2r" and pll.n_tokens == l2r.n_tokens
    assert l2r.pll != pytest.approx(pll.pll, abs=1e-6)  # the text has multi-subword words
    assert l2r.to_dict()["pll"] == l2r.pll


def test_conditional_span_scores_only_the_span(tiny_mlm):
    mlm = tiny_mlm("bert")
    text = TEXTS[0]
    start = text.index("number")
    span = (start, start + len("number of items"))
    full = mlmkit.score(mlm, text, per_token=True)
    part = mlmkit.score(mlm, [text], spans=[span], per_token=True)[0]
    inside = [t for t in full.tokens if t.start >= span[0] and t.end <= span[1]]
    assert [t.token for t in part.tokens] == [t.token for t in inside] and inside
    # two calls batch their positions differently: float32 matmuls agree to ~1e-7, not bitwise
    assert math.isclose(part.pll, sum(t.logprob for t in inside), abs_tol=1e-5)
    assert part.n_words == 3


def test_empty_texts_get_none_and_a_warning(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.warns(UserWarning) as caught:
        results = mlmkit.score(mlm, [TEXTS[0], "   ", "", TEXTS[1]])
    assert sorted(str(w.message)[:6] for w in caught) == ["text 1", "text 2"]
    assert [r.pll is None for r in results] == [False, True, True, False]
    assert results[1].pppl is None and results[1].to_dict()["pll"] is None
    alone = mlmkit.score(mlm, [TEXTS[1]])[0]
    assert math.isclose(alone.pll, results[3].pll, abs_tol=1e-5)


def test_long_text_scores_every_token_once(tiny_mlm):
    mlm = tiny_mlm("roberta")
    text = TEXTS[0]
    while len(mlm.tokenizer(text)["input_ids"]) <= 3 * mlm.max_length:  # just over 3x
        text += " " + TEXTS[len(text) % 2]
    n = len(mlm.tokenizer(text)["input_ids"])
    result = mlmkit.score(mlm, text, per_token=True, stride=32)
    assert result.n_tokens == n - 2 and math.isfinite(result.pll)
    assert [t.start for t in result.tokens] == sorted(t.start for t in result.tokens)


def test_model_without_mask_token_is_refused(tiny_mlm, wordpiece_tokenizer):
    import copy

    tokenizer = copy.deepcopy(wordpiece_tokenizer)
    tokenizer.mask_token = None
    with pytest.raises(MlmkitError, match="mask token"):
        mlmkit.score((tiny_mlm("bert").model, tokenizer), TEXTS)


def test_any_iterable_of_texts_is_scored_as_fill_mask_takes_it(tiny_mlm):
    mlm = tiny_mlm("bert")
    listed = [r.pll for r in mlmkit.score(mlm, TEXTS)]
    assert [r.pll for r in mlmkit.score(mlm, (t for t in TEXTS))] == listed
    assert [r.pll for r in mlmkit.score(mlm, np.array(TEXTS))] == listed
    assert mlmkit.score(mlm, iter([])) == []
    table = type("DataFrame", (), {"columns": ["text"], "__iter__": lambda self: iter(["text"])})
    for bad, name in ((dict.fromkeys(TEXTS), "dict"), (b"Open it.", "bytes"), (3, "int"),
                      (set(TEXTS), "set"), (table(), "DataFrame")):
        with pytest.raises(MlmkitError, match=f"texts is a {name}: pass a string or a list"):
            mlmkit.score(mlm, bad)


def test_a_text_with_no_token_to_score_gets_none_not_a_perfect_zero(tiny_mlm):
    """A span holding no whole token (or a text of [UNK]s with unk="skip") summed nothing:
    its PLL was 0.0, which ranks above every real score (log p ≤ 0) in a rescoring run."""
    mlm = tiny_mlm("bert")
    text = TEXTS[0]
    inner = (1, 2)  # inside the first word: no whole token
    unk = mlm.tokenizer.unk_token
    with pytest.warns(UserWarning) as caught:
        results = mlmkit.score(mlm, [text, f"{unk} {unk}", text],
                               spans=[inner, None, (0, len(text))], unk="skip")
    assert [r.pll is None for r in results] == [True, True, False]
    assert results[0].pppl is None and results[0].to_dict()["pll"] is None
    messages = sorted(str(w.message) for w in caught)
    assert messages[0].startswith("texts[0]: spans[0]=(1, 2) holds no whole token")
    assert messages[1] == "texts[1]: it has no token to score (unk='skip'): its score is None"


def test_a_span_past_the_end_of_its_text_is_refused(tiny_mlm):
    text = TEXTS[1]
    with pytest.raises(mlmkit.errors.InvalidArgument,
                       match=rf"spans\[0\]=\(0, {len(text) + 1}\) ends past the end of "
                             rf"texts\[0\] \({len(text)} characters\)"):
        mlmkit.score(tiny_mlm("bert"), [text], spans=[(0, len(text) + 1)])


def test_a_file_line_with_no_token_to_score_is_reported_not_silently_null(tiny_mlm, tmp_path):
    """score_file silences the library's per-text warnings (it counts empties itself): a
    line of [UNK]s with unk="skip" got a null score with no word about it."""
    from mlmkit.scoring.stream import score_file

    mlm = tiny_mlm("bert")
    unk = mlm.tokenizer.unk_token
    source = tmp_path / "in.txt"
    source.write_text(f"{TEXTS[0]}\n{unk} {unk}\n{TEXTS[1]}\n", encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        score_file(mlm, source, tmp_path / "out.jsonl", unk="skip", progress=False)
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("1 line(s) with no token to score got a null score (first: line 2)")
               for m in messages), messages
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["pll"] is None for r in records] == [False, True, False]


def test_a_text_of_skipped_unks_still_counts_them(tiny_mlm):
    mlm = tiny_mlm("bert")
    unk = mlm.tokenizer.unk_token
    with pytest.warns(UserWarning, match="no token to score"):
        result = mlmkit.score(mlm, f"{unk} {unk}", unk="skip")
    assert result.pll is None and result.n_unk == 2


def test_a_hypothesis_with_no_token_to_score_is_named_by_utterance(tiny_mlm, tmp_path):
    """rescore scores only the non-empty hypotheses: the library's per-text warning named
    'texts[1]', an index into no list the user sees."""
    import warnings

    from mlmkit.scoring import read_nbest, rescore

    mlm = tiny_mlm("bert")
    unk = mlm.tokenizer.unk_token
    path = tmp_path / "nbest.tsv"
    path.write_text(f"u1\t-1.0\tthe cat\nu2\t-2.0\t\nu2\t-3.0\t{unk}\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = rescore(mlm, read_nbest(path), unk="skip")
    messages = [str(w.message) for w in caught]
    assert not any(m.startswith("texts[") for m in messages), messages
    assert any(m.startswith("1 hypothesis(es) with no token to score (first: utterance 'u2', "
                            "hyp_2;") for m in messages), messages
    assert result.utterances[1].hypotheses[1].pll is None


def test_a_pair_with_no_token_to_score_is_named_by_pair(tiny_mlm):
    import warnings

    from mlmkit.scoring import evaluate_pairs
    from mlmkit.scoring.minimal_pairs import MinimalPair

    mlm = tiny_mlm("bert")
    pairs = [MinimalPair("the cat sat", "cat the sat", "order", "syntax"),
             MinimalPair("the dog", mlm.tokenizer.unk_token, "unk", "lexicon")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_pairs(mlm, pairs, unk="skip")
    messages = [str(w.message) for w in caught]
    assert messages and messages[0].startswith(
        "1 pair(s) with a sentence with no token to score (first: pairs[1] (unk))"), messages
    assert result.by_paradigm["unk"]["accuracy"] == 0.0


def test_reduction_mean_is_the_pll_per_scored_token(tiny_mlm):
    mlm = mlmkit.load(tiny_mlm("bert"))
    summed = mlm.score(TEXTS)
    mean = mlm.score(TEXTS, reduction="mean")
    for s, m in zip(summed, mean, strict=True):
        assert s.score == s.pll and m.pll == s.pll  # the PLL stays the sum either way
        assert m.score == pytest.approx(s.pll / s.n_tokens, abs=1e-12)
        assert m.to_dict()["score"] == m.score and m.to_dict()["reduction"] == "mean"
    assert mlmkit.score(mlm, "", reduction="mean").score is None
    with pytest.raises(MlmkitError, match=r"reduction='max' \(--reduction\) is not known: "
                                          "use one of sum, mean"):
        mlmkit.score(mlm, TEXTS, reduction="max")
