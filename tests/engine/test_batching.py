"""The one batching layer: budgets, order, reducers, and equality with one-job-at-a-time runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlmkit.engine import batching
from mlmkit.engine.batching import (
    TokenJobs,
    cut_batches,
    pick,
    row_means,
    row_sums,
    run_jobs,
)
from mlmkit.errors import InvalidArgument, MlmkitError
from mlmkit.models import masked_log_probs

TEXTS = ["Return the number of items in a container.", "x",
         "The socketserver module simplifies writing network servers and their handlers.",
         "Open the file."]


def _jobs(mlm):
    ids = [mlm.tokenizer(t)["input_ids"] for t in TEXTS]
    return [(row, list(range(1, len(row) - 1))) for row in ids]


def _alone(mlm, row, columns):
    """Reference: one unpadded row, full logits, float64 log-softmax."""
    with torch.no_grad():
        logits = mlm.model(input_ids=torch.tensor([row])).logits[0].double()
    log_probs = torch.log_softmax(logits, -1)
    return np.array([log_probs[c, row[c]].item() for c in columns])


def _sums(batch, log_probs):
    return row_sums(batch, pick(log_probs, batch.tokens_at_positions()))


@pytest.mark.parametrize("budget", [8, 40, 100_000])
def test_results_in_input_order_equal_one_at_a_time(tiny_mlm, budget):
    mlm = tiny_mlm("roberta")
    jobs = _jobs(mlm)
    got = run_jobs(mlm, jobs, _sums, batch_tokens=budget)
    assert got.dtype == np.float64 and got.shape == (len(jobs),)
    for value, (row, columns) in zip(got, jobs, strict=True):
        assert value == pytest.approx(_alone(mlm, row, columns).sum(), abs=1e-4)
    means = run_jobs(mlm, jobs, lambda b, lp: row_means(b, pick(lp, b.tokens_at_positions())),
                     batch_tokens=budget)
    np.testing.assert_allclose(means, got / np.array([len(c) for _, c in jobs]), atol=1e-9)


def test_batches_respect_the_token_and_head_budgets(tiny_mlm, monkeypatch):
    mlm = tiny_mlm("bert")
    jobs = _jobs(mlm) * 5
    seen = []

    def reduce(batch, log_probs):
        seen.append((batch.input_ids.numel(), batch.rows, log_probs.shape[0]))
        assert batch.input_ids.shape[1] == max(len(jobs[i][0]) for i in batch.index)
        return None

    assert run_jobs(mlm, jobs, reduce, batch_tokens=60) is None
    assert sum(rows for _, rows, _ in seen) == len(jobs)
    assert all(padded <= 60 or rows == 1 for padded, rows, _ in seen)
    # A small head budget caps the positions read per batch, not only the rows.
    monkeypatch.setattr(batching, "max_reads_for_head", lambda vocab: 20)
    seen.clear()
    run_jobs(mlm, jobs, reduce, batch_tokens=100_000)
    assert all(reads <= 20 or rows == 1 for _, rows, reads in seen)
    assert sum(reads for *_, reads in seen) == sum(len(c) for _, c in jobs)


def test_cut_batches_with_reads():
    lengths = np.arange(1, 11)
    reads = np.full(10, 3)
    ranges = cut_batches(lengths, 10_000, 1000, reads, max_reads=7)
    assert all(hi - lo <= 2 for lo, hi in ranges) and ranges[-1][1] == 10
    assert cut_batches(lengths, 10_000, 1000, np.full(10, 9), max_reads=7) == [
        (i, i + 1) for i in range(10)]  # a job reading more than the cap runs alone


def test_list_results_logits_and_custom_forward(tiny_mlm):
    mlm = tiny_mlm("bert")
    jobs = _jobs(mlm)
    tops = run_jobs(mlm, jobs, lambda b, logits: [int(logits[0].argmax())], call="logits",
                    batch_tokens=1)  # one row per batch: its first read's best token
    firsts = run_jobs(mlm, jobs, lambda b, lp: lp[:1].argmax(-1), batch_tokens=1)
    assert isinstance(tops, list) and tops == firsts.tolist()
    calls = []

    def forward(model, ids, attention, positions):
        calls.append(ids.shape)
        return masked_log_probs(model, ids, attention, positions)

    run_jobs(mlm, jobs, _sums, call=forward)
    assert calls
    seen_models = []
    run_jobs(mlm, jobs, lambda b, out: seen_models.append((b.model, out)) or None, call=None)
    assert all(m is mlm.model and out is None for m, out in seen_models)


def test_bf16_precision_and_train_mode_restored(tiny_mlm):
    mlm = tiny_mlm("bert")
    jobs = _jobs(mlm)
    fp32 = run_jobs(mlm, jobs, _sums)
    mlm.model.train()
    try:
        again = run_jobs(mlm, jobs, _sums)  # dropout off while running: same numbers
        assert mlm.model.training
    finally:
        mlm.model.eval()
    np.testing.assert_array_equal(fp32, again)
    bf16 = run_jobs(mlm, jobs, _sums, precision="bf16")
    assert not np.array_equal(fp32, bf16) and np.abs(fp32 - bf16).max() < 2.0


def test_errors(tiny_mlm):
    mlm = tiny_mlm("bert")
    jobs = _jobs(mlm)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(InvalidArgument, match="batch_tokens"):
            run_jobs(mlm, jobs, _sums, batch_tokens=bad)
    with pytest.raises(InvalidArgument, match="precision"):
        run_jobs(mlm, jobs, _sums, precision="fp8")
    with pytest.raises(InvalidArgument, match="call"):
        run_jobs(mlm, jobs, _sums, call="probs")
    with pytest.raises(MlmkitError, match="text 0 has .* tokens, more than the model's 5"):
        run_jobs(mlm, jobs, _sums, max_length=5, name_of=lambda i: f"text {i}")
    with pytest.raises(InvalidArgument, match="job 0: a read column"):
        TokenJobs([[1, 2]], [[2]])
    assert len(run_jobs(mlm, [], _sums)) == 0


def test_one_length_batches_run_without_padding_or_mask(tiny_mlm, monkeypatch):
    """A batch ends at a length change when its first length fills half of it; such a
    batch reaches the primitive with no attention mask, and results do not change."""
    lengths = np.array([5] * 6 + [6] * 2 + [9] * 3)
    ranges = cut_batches(lengths, 10_000, 1000)
    assert ranges == [(0, 6), (6, 11)]  # 6 of 11 rows have length 5: a batch of its own
    assert cut_batches(np.array([5] * 2 + [6] * 6), 10_000, 1000) == [(0, 8)]  # 2 of 8: one
    mlm = tiny_mlm("bert")
    base = [(row, [1, 2]) for row, _ in _jobs(mlm) if len(row) > 3]
    jobs = [job for job in base for _ in range(4)]  # four copies of each length
    calls = []

    def spy(model, ids, attention, positions):
        calls.append((attention, ids.shape))
        return masked_log_probs(model, ids, attention, positions)

    monkeypatch.setattr(batching, "masked_log_probs", spy)
    got = run_jobs(mlm, jobs, _sums, batch_tokens=4 * max(len(r) for r, _ in jobs))
    unpadded = [attention is None for attention, _ in calls]
    assert sum(unpadded) >= len(base) - 1  # every length but maybe one ran on its own
    for attention, _ in calls:
        if attention is not None:
            assert not bool(attention.all())  # a mask is passed only where there is padding
    for value, (row, columns) in zip(got, jobs, strict=True):
        assert value == pytest.approx(_alone(mlm, row, columns).sum(), abs=1e-4)


def test_default_budget_fits_the_cache_on_cpu(tiny_mlm, monkeypatch):
    model = tiny_mlm("bert").model
    monkeypatch.setattr(batching, "cache_bytes", lambda: 32 << 20)
    inter = model.config.intermediate_size
    assert batching.default_batch_tokens(model, 128) == min(batching.CPU_MAX_BATCH_TOKENS,
                                                            (16 << 20) // (4 * inter))
    monkeypatch.setattr(batching, "cache_bytes", lambda: 1 << 20)
    assert batching.default_batch_tokens(model, 128) == batching.MIN_BATCH_TOKENS
    # a virtual machine's reported cache (its host's) does not grow a CPU batch past the cap
    monkeypatch.setattr(batching, "cache_bytes", lambda: 480 << 20)
    assert batching.default_batch_tokens(model, 128) == batching.CPU_MAX_BATCH_TOKENS


def test_few_lengths_are_split_rather_than_padded():
    """Twenty copies of a 20-token text and sixty of a 60-token text: one batch would pad a
    sixth of its tokens; split at the length change, no padding (issue 16's gathered calls)."""
    from mlmkit.engine.batching import padding_segments

    lengths = np.array([20] * 20 + [60] * 60)
    assert padding_segments(lengths, 8192) == [(0, 20), (20, 80)]
    assert cut_batches(lengths, 8192, 1000) == [(0, 20), (20, 80)]
    many = np.sort(np.random.default_rng(1).integers(8, 60, size=3000))
    ranges = cut_batches(many, 4096, 1000)
    assert ranges[0][0] == 0 and ranges[-1][1] == 3000
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert all((hi - lo) * many[hi - 1] <= 4096 for lo, hi in ranges)
