"""The optimizers' fast paths against their one-tensor-at-a-time references: torch's fused
and foreach AdamW against its single-tensor one, StableAdamW's foreach update against its
per-tensor one (update clipping and decoupled decay included), over several steps; a
state saved mid-way and loaded into a fresh optimizer continues bit for bit. And the
micro-batch search of `mlmkit.training.step_memory` on a faked device."""

from __future__ import annotations

import copy

import pytest
import torch

from mlmkit.errors import InvalidArgument
from mlmkit.training.optimizer import build_optimizer
from mlmkit.training.stable_adamw import StableAdamW
from mlmkit.training.step_memory import CpuGauge, gauge_for, largest_micro_batch

STEPS = 6


def make_params(seed=0):
    generator = torch.Generator().manual_seed(seed)
    shapes = [(16, 8), (8,), (4, 4, 3), (33,)]
    return [torch.nn.Parameter(torch.randn(s, generator=generator)) for s in shapes]


def gradient(step: int, i: int, shape) -> torch.Tensor:
    """Shrinking gradients, with a spike at step 3 in the first tensor (update clipping)."""
    g = torch.randn(shape, generator=torch.Generator().manual_seed(100 * step + i))
    return g * (0.7 ** step) * (40.0 if step == 3 and i == 0 else 1.0)


def train(optimizer, params, steps: range) -> None:
    for step in steps:
        for i, p in enumerate(params):
            p.grad = gradient(step, i, p.shape)
        optimizer.step()


ADAMW = {"single-tensor": {"foreach": False}, "foreach": {"foreach": True},
         "fused": {"fused": True}}


@pytest.mark.parametrize("kind", ["foreach", "fused"])
def test_adamw_fast_paths_equal_the_single_tensor_one(kind):
    ours, reference = make_params(), make_params()
    train(torch.optim.AdamW(ours, lr=1e-2, weight_decay=0.1, **ADAMW[kind]), ours,
          range(STEPS))
    train(torch.optim.AdamW(reference, lr=1e-2, weight_decay=0.1, foreach=False), reference,
          range(STEPS))
    for p, q in zip(ours, reference, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("decoupled", [False, True])
def test_stable_adamw_foreach_equals_its_per_tensor_reference(decoupled):
    ours, reference = make_params(), make_params()
    options = {"lr": 1e-2, "weight_decay": 0.1, "decoupled": decoupled, "max_lr": 2e-2}
    fast = StableAdamW(ours, **options)
    slow = StableAdamW(reference, foreach=False, **options)
    train(fast, ours, range(STEPS))
    train(slow, reference, range(STEPS))
    for p, q in zip(ours, reference, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6)


def test_the_spike_is_clipped_on_both_paths():
    for foreach in (True, False):
        params = make_params()
        optimizer = StableAdamW(params, lr=1e-2, foreach=foreach)
        train(optimizer, params, range(3))
        for i, p in enumerate(params):
            p.grad = gradient(3, i, p.shape)
        optimizer.step()
        assert float(optimizer.last_rms[0]) > 1.0  # the spiked tensor's step is divided


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True),
    lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True),
    lambda p: StableAdamW(p, lr=1e-2, weight_decay=0.1, decoupled=True),
], ids=["adamw-fused", "adamw-foreach", "stableadamw"])
def test_a_saved_state_resumes_bit_for_bit(make):
    whole = make_params()
    train(make(whole), whole, range(STEPS))
    first = make_params()
    optimizer = make(first)
    train(optimizer, first, range(3))
    saved = copy.deepcopy((optimizer.state_dict(), [p.detach().clone() for p in first]))
    resumed = make_params(seed=1)  # other values, overwritten by the saved ones
    with torch.no_grad():
        for p, value in zip(resumed, saved[1], strict=True):
            p.copy_(value)
    again = make(resumed)
    again.load_state_dict(saved[0])
    train(again, resumed, range(3, STEPS))
    assert all(torch.equal(p, q) for p, q in zip(whole, resumed, strict=True))


def test_build_optimizer_takes_the_fused_adamw_on_the_cpu():
    """Measured (benchmarks/optimizer_step.py, mini): torch 2.13's fused CPU AdamW step is
    about 4x faster than its foreach one; so it is the default there as on a GPU."""
    module = torch.nn.Linear(4, 4)
    optimizer = build_optimizer({"m": module}, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.98),
                                eps=1e-6, device=torch.device("cpu"))
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["fused"] is True
    stable = build_optimizer({"m": module}, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.98),
                             eps=1e-6, device=torch.device("cpu"), kind="stableadamw")
    assert isinstance(stable, StableAdamW) and stable.foreach
    # a device without the fused kernel: the foreach one
    meta = build_optimizer({"m": torch.nn.Linear(4, 4, device="meta")}, lr=1e-3,
                           weight_decay=0.01, betas=(0.9, 0.98), eps=1e-6,
                           device=torch.device("meta"))
    assert not meta.defaults["fused"] and meta.defaults["foreach"]


# ---- the micro-batch that fits (a faked device: peak = fixed + per-row cost)


def line(fixed: int, per_row: int, out_of_memory_above: int | None = None, calls=None):
    def peak(rows: int):
        if calls is not None:
            calls.append(rows)
        if out_of_memory_above is not None and rows > out_of_memory_above:
            return None
        return fixed + per_row * rows
    return peak


def test_the_largest_divisor_the_line_allows_is_measured_and_kept():
    calls = []
    fit = largest_micro_batch([1, 2, 4, 8, 16], line(1000, 100, calls=calls), budget=2000,
                              reserve=150)
    # 1000 + 100 r + 150 <= 2000: r <= 8.5, so 8 (16 is not tried)
    assert fit.rows == 8 and fit.peak == 1800 and calls == [1, 2, 8]
    everything = largest_micro_batch([1, 2, 4, 8, 16], line(1000, 100), budget=10**6)
    assert everything.rows == 16


def test_a_trial_out_of_memory_steps_down():
    """The line predicts 8 rows fit; the device runs out of memory above 4."""
    calls = []
    fit = largest_micro_batch([1, 2, 4, 8, 16], line(1000, 100, 4, calls), budget=2000)
    assert fit.rows == 4 and calls == [1, 2, 8, 4] and fit.trials[8] is None


def test_not_even_one_block_fits():
    with pytest.raises(InvalidArgument, match="--batch-tokens auto: a micro-batch of 1 "
                                              "block.*more than the 500 bytes"):
        largest_micro_batch([1, 2, 4], line(1000, 100), budget=500)


def test_the_cpu_gauge_measures_a_trial_peak():
    gauge, why = gauge_for(torch.device("cpu"))
    if gauge is None:
        pytest.skip(f"no peak memory on this machine: {why}")
    assert isinstance(gauge, CpuGauge) and gauge.budget() > 0
    baseline = gauge.peak(lambda: None)
    grown = gauge.peak(lambda: torch.ones(64 << 20, dtype=torch.uint8).add_(1))
    assert grown - baseline >= 48 << 20  # a 64 MiB tensor was resident at the peak


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("spread", [10.0, 1e-3])  # clipped, and under the limit
def test_clipping_inside_the_step_equals_clipping_first(fused, spread):
    from mlmkit.training.optimizer import clip_in_step

    torch.manual_seed(0)
    first = [torch.randn(shape, requires_grad=True) for shape in ((64, 32), (32,), (7,))]
    inside = [p.detach().clone().requires_grad_() for p in first]
    for a, b in zip(first, inside, strict=True):
        grad = torch.randn_like(a) * spread
        a.grad, b.grad = grad.clone(), grad.clone()
    kernel = {"fused": True} if fused else {"foreach": True}
    want_opt = torch.optim.AdamW(first, lr=1e-2, weight_decay=0.01, **kernel)
    got_opt = torch.optim.AdamW(inside, lr=1e-2, weight_decay=0.01, **kernel)
    want_norm = torch.nn.utils.clip_grad_norm_(first, 1.0, foreach=True)
    want_opt.step()
    got_norm = clip_in_step(got_opt, inside, 1.0)
    got_opt.step()
    torch.testing.assert_close(got_norm, want_norm)
    for a, b in zip(first, inside, strict=True):
        torch.testing.assert_close(b, a, atol=1e-7, rtol=1e-6)
