"""The counter stream: SplitMix64 bits in int64 tensor ops, masks that do not depend on how
a batch is split, and every policy's distribution kept (against the per-row stream)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking import build_policy, compute_stats
from mlmkit.masking.counter_stream import (
    CounterStream,
    splitmix64,
    splitmix64_tensor,
    to_unit_interval,
)
from mlmkit.pretraining.data import row_seed

POLICIES = ["bert", "whole_word", "span", "pmi", "diffusion", "mask40", "upmlm", "film",
            "frequency", "tfidf", "rom", "informask", "loss",
            {"units": "whole_word", "rate": {"schedule": "linear", "start": 0.3, "end": 0.15},
             "total_steps": 10},
            {"rate": 0.3, "count": "bernoulli", "corruption": [0.6, 0.3, 0.1]}]
NAMES = [p if isinstance(p, str) else "-".join(str(v) for v in p.values())[:30]
         for p in POLICIES]


def test_bits_equal_unsigned_splitmix64():
    rng = random.Random(0)
    keys = [0, 1, (1 << 64) - 1, 1 << 63, *(rng.getrandbits(64) for _ in range(6))]
    counters = [0, 1, 5, (1 << 31) - 1, (1 << 62) + 17, *(rng.getrandbits(62) for _ in range(20))]
    golden = 0x9E3779B97F4A7C15
    for key in keys:
        got = splitmix64_tensor(key, torch.tensor(counters, dtype=torch.long)).tolist()
        want = [splitmix64((key + c * golden) % 2**64) for c in counters]
        assert [g % 2**64 for g in got] == want


def test_uniforms_are_inside_the_interval_and_uniform():
    bits = torch.tensor([0, -1, 1 << 62, -(1 << 63)], dtype=torch.long)
    for dtype in (torch.float32, torch.float64):
        u = to_unit_interval(bits, dtype)
        assert bool((u > 0).all()) and bool((u < 1).all())
    stream = CounterStream(3, 7, torch.arange(64))
    u = stream.uniform((64, 1024), torch.float64)
    assert abs(float(u.mean()) - 0.5) < 0.005 and abs(float(u.var()) - 1 / 12) < 0.002
    histogram = torch.histc(u, bins=10, min=0, max=1)
    assert float(histogram.min()) > 0.95 * u.numel() / 10
    z = stream.normal((64, 2000))
    assert abs(float(z.mean())) < 0.02 and abs(float(z.std()) - 1) < 0.02


def test_draws_are_keyed_by_row_position_step_and_seed():
    rows = torch.tensor([5, 9])
    a = CounterStream(1, 2, rows).uniform((2, 8))
    assert torch.equal(a, CounterStream(1, 2, rows).uniform((2, 8)))
    assert torch.equal(a[1], CounterStream(1, 2, torch.tensor([9])).uniform((1, 8))[0])
    assert torch.equal(a[:, :4], CounterStream(1, 2, rows).uniform((2, 4)))
    for other in (CounterStream(1, 3, rows), CounterStream(2, 2, rows)):
        assert not torch.equal(a, other.uniform((2, 8)))
    stream = CounterStream(1, 2, rows)
    first, second = stream.uniform((2, 8)), stream.uniform((2, 8))
    assert not torch.equal(first, second)
    flat = torch.tensor([0, 3, 9, 15])
    assert torch.equal(CounterStream(1, 2, rows).uniform_at(flat, 8), a.view(-1)[flat])


@pytest.fixture(scope="module")
def masking_stats(wordpiece_tokenizer, corpus_sample):
    return compute_stats(corpus_sample[:400], wordpiece_tokenizer, min_count=3)


@pytest.fixture(scope="module")
def text_rows(wordpiece_tokenizer, corpus_sample):
    """Rows of 128 real tokens ([CLS] ... [SEP]) cut from the corpus sample."""
    tok = wordpiece_tokenizer
    ids = [i for text in corpus_sample[:600]
           for i in tok(text, add_special_tokens=False)["input_ids"]]
    width = 126
    rows = torch.tensor(ids[:len(ids) // width * width]).view(-1, width)[:256]
    cls = torch.full((len(rows), 1), tok.cls_token_id)
    sep = torch.full((len(rows), 1), tok.sep_token_id)
    return torch.cat([cls, rows, sep], 1)


def _policy(spec, tokenizer, stats):
    needs = isinstance(spec, str) and spec in ("pmi", "frequency", "tfidf", "rom", "informask")
    return build_policy(spec, tokenizer, stats=stats if needs else None)


@pytest.mark.parametrize("spec", POLICIES, ids=NAMES)
def test_masks_do_not_depend_on_the_batch_split(spec, wordpiece_tokenizer, masking_stats,
                                                text_rows):
    policy = _policy(spec, wordpiece_tokenizer, masking_stats)
    ids = text_rows[:16]
    documents = torch.arange(ids.shape[1]).div(40, rounding_mode="floor").expand_as(ids)
    rows = torch.arange(100, 116)
    whole = policy(ids, step=4, seed=9, rows=rows, document_ids=documents)
    halves = [policy(ids[part], step=4, seed=9, rows=rows[part], document_ids=documents[part])
              for part in (slice(0, 8), slice(8, 16))]  # two processes, each half the rows
    for field in ("input_ids", "labels", "mask", "rate"):
        assert torch.equal(getattr(whole, field),
                           torch.cat([getattr(h, field) for h in halves])), field
    alone = policy(ids[5:6], step=4, seed=9, rows=rows[5:6], document_ids=documents[5:6])
    assert torch.equal(alone.mask[0], whole.mask[5])


def test_rows_must_match_the_batch(wordpiece_tokenizer, text_rows):
    policy = build_policy("bert", wordpiece_tokenizer)
    with pytest.raises(MlmkitError, match="one global row number per row"):
        policy(text_rows[:4], rows=torch.arange(3))


def _statistics(out, original, maskable, mask_id):
    """Per row: masked share of maskable tokens, [MASK] share and kept share of the masked
    tokens, the mean id of masked tokens (which tokens), and the rate."""
    masked = out.mask.sum(1).double()
    some = masked.clamp(min=1)
    kept = ((out.input_ids == original) & out.mask).sum(1) / some
    return {"masked": masked / maskable.sum(1),
            "[MASK]": ((out.input_ids == mask_id) & out.mask).sum(1) / some,
            "kept": kept,
            "id": (original * out.mask).sum(1) / some / 1000.0,
            "rate": out.rate.double()}


@pytest.mark.parametrize("spec", POLICIES, ids=NAMES)
def test_each_policy_keeps_its_distribution(spec, wordpiece_tokenizer, masking_stats,
                                            text_rows):
    """The counter stream and the per-row stream (as runs used it) give the same means of
    every per-row statistic, within 5 standard errors."""
    tok = wordpiece_tokenizer
    policy = _policy(spec, tok, masking_stats)
    ids = text_rows
    maskable = policy.maskable(ids)
    rows = torch.arange(len(ids))
    old, new = {}, {}
    for step in (0, 3, 6):
        per_row = [policy(ids[r:r + 1], step=step, seed=row_seed(1, r)) for r in range(len(ids))]
        merged = type(per_row[0])(*(torch.cat([getattr(p, f) for p in per_row])
                                    for f in ("input_ids", "labels", "mask", "rate")))
        counter = policy(ids, step=step, seed=1, rows=rows)
        for into, out in ((old, merged), (new, counter)):
            for key, value in _statistics(out, ids, maskable, tok.mask_token_id).items():
                into.setdefault(key, []).append(value)
    for key in old:
        a, b = torch.cat(old[key]), torch.cat(new[key])
        error = math.sqrt(float(a.var()) / len(a) + float(b.var()) / len(b))
        assert abs(float(a.mean()) - float(b.mean())) <= 5 * error + 1e-6, (
            key, float(a.mean()), float(b.mean()), error)
