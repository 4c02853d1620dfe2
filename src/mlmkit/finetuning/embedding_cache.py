"""GradCache: the in-batch-negatives loss of a large batch with the memory of a small one.

In-batch negatives tie every example of a batch to every other, so a batch cannot be split
into independent pieces with gradient accumulation. GradCache (Gao et al. 2021) splits the
*encoder's* work instead, in three passes over mini-batches of `mini_batch_size` texts:

    1. embed every mini-batch without a graph, noting the RNG state before each;
    2. the loss on those vectors (leaves with gradients), back-propagated slice of anchors
       by slice (`ranking_loss(rows=...)`), which leaves d(loss)/d(vector) for every text;
    3. embed each mini-batch again, with a graph, from its noted RNG state (so dropout
       draws the same masks as in pass 1), and back-propagate vector · its cached gradient.

Only one mini-batch's activations are alive at a time. The parameter gradients are those of
the whole batch's loss (the chain rule, split at the vectors); the price is a second forward
pass. The texts of a step are sorted by length before they are cut into mini-batches, so
each mini-batch pads (or packs) texts of similar length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch


def rng_state(device: torch.device) -> tuple:
    """The RNG state dropout draws from on `device` (the CPU's, and the GPU's on CUDA)."""
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


@contextmanager
def replayed(state: tuple, device: torch.device) -> Iterator[None]:
    """Run the block from the RNG `state`, and leave the RNG as it was before the block."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], device)
        yield


def cached_backward(encoder: Callable[[list[list[int]]], torch.Tensor], texts: list[list[int]],
                    rows: int, loss: Callable, mini_batch_size: int) -> torch.Tensor:
    """Accumulate into the parameters' `.grad` the gradient of `loss(columns)` (columns: the
    vectors of `texts` split into [rows, d] pieces; `loss(columns, rows=slice)` a slice of
    anchors' share), three passes as the module docstring says; return the loss, detached."""
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    order = np.argsort(lengths, kind="stable")
    chunks = [order[i:i + mini_batch_size] for i in range(0, len(texts), mini_batch_size)]
    device = getattr(encoder, "device", torch.device("cpu"))
    states, parts = [], []
    with torch.no_grad():
        for chunk in chunks:
            states.append(rng_state(device))
            parts.append(encoder([texts[i] for i in chunk]).float())
    position = torch.from_numpy(np.argsort(order, kind="stable")).to(parts[0].device)
    vectors = torch.cat(parts)[position].requires_grad_()
    columns = vectors.split(rows)
    total = torch.zeros((), device=vectors.device)
    for begin in range(0, rows, mini_batch_size):
        share = loss(columns, rows=slice(begin, begin + mini_batch_size))
        share.backward()
        total += share.detach()
    if not torch.isfinite(total):
        return total  # the caller stops the run; no parameter gradient is needed
    cached = vectors.grad
    for chunk, state in zip(chunks, states, strict=True):
        with replayed(state, device):
            again = encoder([texts[i] for i in chunk]).float()
        index = torch.from_numpy(chunk).to(cached.device)
        torch.sum(again * cached[index]).backward()
    return total
