"""The PLL engine against a brute-force reference (a loop over positions, full logits)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlmkit.engine.batching import cut_batches
from mlmkit.models import FAMILIES
from mlmkit.scoring.jobs import window_starts
from mlmkit.scoring.masked_copies import score_token_ids

TEXTS = [
    "Return the number of items in a container.",
    "Unpredictably, asynchronous generators yield values.",
    "x",
    "The socketserver module simplifies writing network servers and their handlers.",
]


def _encode(mlm, texts):
    enc = mlm.tokenizer(texts, add_special_tokens=True)
    return [list(ids) for ids in enc["input_ids"]], [enc.word_ids(i) for i in range(len(texts))]


def brute_force(mlm, ids, word_ids=None, l2r=False):
    """log P(w_t | rest): every non-special position masked in its own copy, full logits."""
    special = set(mlm.tokenizer.all_special_ids)
    mask = mlm.tokenizer.mask_token_id
    positions = [t for t, token in enumerate(ids) if token not in special]
    copies = []
    for t in positions:
        copy = list(ids)
        copy[t] = mask
        if l2r and word_ids[t] is not None:
            for p in range(t + 1, len(ids)):
                if word_ids[p] == word_ids[t]:
                    copy[p] = mask
        copies.append(copy)
    with torch.no_grad():
        logits = mlm.model(input_ids=torch.tensor(copies)).logits.double()
    log_probs = torch.log_softmax(logits, -1)
    return np.array([log_probs[k, t, ids[t]].item() for k, t in enumerate(positions)])


# esm2 reads amino acids, not these texts: tests/protein checks its PLL against brute force.
@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "esm2"])
def test_pll_and_l2r_equal_brute_force(tiny_mlm, family):
    mlm = tiny_mlm(family)
    ids, words = _encode(mlm, TEXTS)
    pll = score_token_ids(mlm, ids)
    l2r = score_token_ids(mlm, ids, metric="pll_word_l2r", word_ids=words)
    multi_subword_seen = False
    for seq, w, got, got_l2r in zip(ids, words, pll, l2r, strict=True):
        np.testing.assert_allclose(got, brute_force(mlm, seq), atol=1e-4)
        np.testing.assert_allclose(got_l2r, brute_force(mlm, seq, w, l2r=True), atol=1e-4)
        # l2r differs from PLL exactly on subwords followed by another subword of their word.
        content = [t for t, token in enumerate(seq) if token not in mlm.tokenizer.all_special_ids]
        has_later = np.array([w[t] is not None and any(w[p] == w[t] for p in range(t + 1, len(seq)))
                              for t in content])
        np.testing.assert_allclose(got[~has_later], got_l2r[~has_later], atol=1e-6)
        if has_later.any():
            multi_subword_seen = True
            assert np.abs(got[has_later] - got_l2r[has_later]).max() > 1e-6
    assert multi_subword_seen, "the test texts should contain a word of several subwords"


def test_targets_subset_and_order(tiny_mlm):
    mlm = tiny_mlm("bert")
    ids, _ = _encode(mlm, TEXTS[:1])
    full = score_token_ids(mlm, ids)[0]
    picked = score_token_ids(mlm, ids, targets=[[3, 1]])[0]
    np.testing.assert_allclose(picked, [full[2], full[0]], atol=1e-6)


def test_batch_invariance(tiny_mlm):
    mlm = tiny_mlm("roberta")
    ids, _ = _encode(mlm, TEXTS)
    alone = [score_token_ids(mlm, [seq])[0] for seq in ids]
    for budget in (16, 37, 400, 100_000):
        together = score_token_ids(mlm, ids, batch_tokens=budget)
        for a, b in zip(alone, together, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_cut_batches_respects_budget():
    lengths = np.sort(np.random.default_rng(0).integers(3, 60, size=500))
    ranges = cut_batches(lengths, 200, max_rows=1000)
    assert ranges[0][0] == 0 and ranges[-1][1] == 500
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    for lo, hi in ranges:
        assert hi - lo == 1 or (hi - lo) * lengths[hi - 1] <= 200
    assert all(hi - lo <= 7 for lo, hi in cut_batches(lengths, 10_000, max_rows=7))


def test_window_equals_plain_when_text_fits(tiny_mlm):
    mlm = tiny_mlm("bert")
    ids, _ = _encode(mlm, TEXTS)
    plain = score_token_ids(mlm, ids)
    windowed = score_token_ids(mlm, ids, max_length=max(len(s) for s in ids), stride=3)
    for a, b in zip(plain, windowed, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_long_text_three_times_max_length(tiny_mlm):
    mlm = tiny_mlm("bert")
    limit = 24  # a short model limit keeps the test fast; the path is the same at 512
    ids = mlm.tokenizer(" ".join(TEXTS * 2))["input_ids"]
    assert len(ids) > 3 * limit
    (scores,) = score_token_ids(mlm, [ids], max_length=limit, stride=4)
    assert len(scores) == len(ids) - 2 and np.isfinite(scores).all()
    # Each token is scored with the window that centres it: equal to scoring that window.
    room = limit - 2
    starts = window_starts(np.arange(len(ids) - 2), len(ids) - 2, room, 4)
    for token in (0, len(ids) // 2, len(ids) - 3):
        start = int(starts[token])
        window = [ids[0]] + ids[1 + start:1 + start + room] + [ids[-1]]
        (direct,) = score_token_ids(mlm, [window], targets=[[token + 1 - start]])
        np.testing.assert_allclose(scores[token], direct[0], atol=1e-5)
    middle = len(ids) // 2
    assert starts[middle] <= middle - 8 and middle + 8 < starts[middle] + room


def test_window_starts_centre_targets():
    starts = window_starts(np.arange(100), 100, 20, 1)
    assert starts.min() == 0 and starts.max() == 80
    assert (starts <= np.arange(100)).all() and (np.arange(100) < starts + 20).all()
    assert starts[50] == 40  # ideal start 50 - 9.5 = 40.5, rounded to a stride-1 start
    coarse = window_starts(np.arange(100), 100, 20, 7)
    assert set(coarse) <= set(range(0, 81, 7)) | {80}


def test_a_stride_past_the_window_is_refused_not_read_at_a_wrong_column(tiny_mlm):
    """Windows of 22 content tokens starting at multiples of 30 leave tokens in no window:
    it was an IndexError or a score read at a wrong column. Now one line naming the
    largest stride; a stride up to the window scores every token, equal to stride 1's
    windows where they coincide, and a text that fits ignores the stride."""
    import mlmkit
    from mlmkit.errors import InvalidArgument

    mlm = tiny_mlm("bert")
    limit = 24
    ids = mlm.tokenizer(" ".join(TEXTS * 2))["input_ids"]
    assert len(ids) > 3 * limit
    with pytest.raises(InvalidArgument, match="stride=30 .*use a stride of at most 22") as info:
        score_token_ids(mlm, [ids], max_length=limit, stride=30)
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidArgument, match="at most 22"):
        score_token_ids(mlm, [ids], max_length=limit, stride=10**400)
    (scores,) = score_token_ids(mlm, [ids], max_length=limit, stride=22)
    assert len(scores) == len(ids) - 2 and np.isfinite(scores).all()
    short = score_token_ids(mlm, [ids[:limit]], max_length=limit, stride=10**6)
    np.testing.assert_allclose(short[0], score_token_ids(mlm, [ids[:limit]])[0], atol=1e-6)
    with pytest.raises(InvalidArgument, match="stride"):
        mlmkit.score(mlm, [" ".join(TEXTS * 40)], stride=10**4)
    with pytest.raises(InvalidArgument, match="stride"):  # was an OverflowError
        mlmkit.score(mlm, [" ".join(TEXTS * 40)], stride=10**400)


def test_bf16_close_to_fp32(tiny_mlm):
    mlm = tiny_mlm("bert")
    ids, _ = _encode(mlm, TEXTS[:2])
    fp32 = np.concatenate(score_token_ids(mlm, ids))
    bf16 = np.concatenate(score_token_ids(mlm, ids, precision="bf16"))
    assert np.abs(fp32 - bf16).max() < 0.5 and not np.array_equal(fp32, bf16)


def test_bad_arguments(tiny_mlm):
    from mlmkit.errors import MlmkitError

    mlm = tiny_mlm("bert")
    ids, _ = _encode(mlm, TEXTS[:1])
    with pytest.raises(MlmkitError, match="word_ids"):
        score_token_ids(mlm, ids, metric="pll_word_l2r")
    with pytest.raises(MlmkitError, match="unknown metric"):
        score_token_ids(mlm, ids, metric="ppl")
    with pytest.raises(MlmkitError, match="outside"):
        score_token_ids(mlm, ids, targets=[[999]])
    assert [len(s) for s in score_token_ids(mlm, [[ids[0][0], ids[0][-1]]])] == [0]


def test_memory_is_bounded_by_the_budget(tiny_mlm, monkeypatch):
    """Every batch holds at most `batch_tokens` padded tokens and the head runs only at the
    masked column of each copy: [rows, V], never [rows, length, V]."""
    import mlmkit.scoring.masked_copies as masked_copies

    mlm = tiny_mlm("bert")
    seen = []
    real = masked_copies.masked_log_probs

    def spy(model, ids, attention, positions):
        out = real(model, ids, attention, positions)
        seen.append((ids.numel(), ids.shape[0], tuple(out.shape)))
        return out

    monkeypatch.setattr(masked_copies, "masked_log_probs", spy)
    ids = mlm.tokenizer(" ".join(TEXTS * 6))["input_ids"]
    assert len(ids) > 2 * mlm.max_length
    (scores,) = score_token_ids(mlm, [ids], batch_tokens=600)
    assert len(scores) == len(ids) - 2
    assert sum(rows for _, rows, _ in seen) == len(ids) - 2
    for padded, rows, shape in seen:
        assert padded <= 600 and shape == (rows, mlm.model.config.vocab_size)
