"""Unpadded attention against padding, in one run: the same documents trained on as a padded
batch (one document per row, padded to the longest: what a padding collator gives) and
packed into rows without padding with attention within each document, through each kernel
the device has (`models.unpadded`):

- `padded`: one document per row, SDPA with the padding mask;
- `packed`: the packed rows with documents attending each other (mlmkit's default packing,
  and its sparse last layer): the cost of keeping documents apart, for reference;
- `unpadded`: packed rows, SDPA with the document mask (every device);
- `flex`: packed rows, FlexAttention with the document block mask (forward only on a CPU:
  FlexAttention has no CPU backward pass);
- `varlen`: packed rows, PyTorch's varlen FlashAttention kernel (a CUDA GPU at bf16).

Documents are of random lengths (seeded; geometric with mean `--mean-length`, 8 to
`--seq-len` tokens), 15% of their tokens predicted. Printed per family: tokens/s (real
tokens only, the median of interleaved steps) of a training step (forward, loss,
backward) and of the forward alone, and each kernel's ratio to `padded`.

    python benchmarks/unpadded_attention.py                       # CPU, mini, seq 512
    python benchmarks/unpadded_attention.py --device cuda --size base --rows 32
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mlmkit.models import build_mlm, masked_logits
from mlmkit.models.unpadded import unpadded_logits
from mlmkit.models.varlen_attention import use_varlen_attention, varlen_usable
from mlmkit.training.objectives.mlm import set_dropout

VOCAB = 30_522


class StubTokenizer:
    """What a preset reads from a tokenizer: its size and its special ids."""

    pad_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 101, 102, 103
    bos_token_id, eos_token_id = 101, 102

    def __len__(self) -> int:
        return VOCAB


def documents(rows: int, seq_len: int, mean: int, seed: int) -> list[torch.Tensor]:
    """Random documents that fill `rows` packed rows of `seq_len` tokens."""
    generator = torch.Generator().manual_seed(seed)
    out, total = [], 0
    while total < rows * seq_len * 0.97:
        n = int(torch.distributions.Geometric(1 / mean).sample().clamp(8, seq_len))
        out.append(torch.randint(1000, VOCAB, (n,), generator=generator))
        total += n
    return out


def packed_batch(texts, seq_len: int):
    """Whole documents packed in order into rows (a row ends in pads when the next one
    does not fit): ids and the indexed mask (document number, 0 on padding)."""
    rows, row = [], []
    for text in texts:
        if sum(map(len, row)) + len(text) > seq_len:
            rows.append(row)
            row = []
        row.append(text)
    rows.append(row)
    ids = torch.zeros((len(rows), seq_len), dtype=torch.long)
    docs = torch.zeros_like(ids)
    for r, row in enumerate(rows):
        at = 0
        for number, text in enumerate(row, start=1):
            ids[r, at:at + len(text)], docs[r, at:at + len(text)] = text, number
            at += len(text)
    return ids, docs


def padded_batch(texts):
    width = max(map(len, texts))
    ids = torch.zeros((len(texts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, text in enumerate(texts):
        ids[i, :len(text)], mask[i, :len(text)] = text, 1
    return ids, mask


def fresh(preset: str, attention: str, device):
    """A preset's model without dropout (FlexAttention and varlen have none), training."""
    model = build_mlm(preset, StubTokenizer())
    set_dropout(model, 0.0)
    if attention == "varlen":
        use_varlen_attention(model)
    else:
        model.set_attn_implementation(attention)
    return model.to(device).train()


def step(model, kind: str, batch, read, train: bool, autocast):
    ids, mask = batch
    with torch.set_grad_enabled(train), autocast:
        if kind == "padded":
            logits = masked_logits(model, ids, mask, read)
        else:
            logits = unpadded_logits(model, ids, mask, read)
        loss = torch.nn.functional.cross_entropy(logits.float(), ids[read])
    if train:
        loss.backward()
        model.zero_grad(set_to_none=True)


def timed(model, kind, batch, read, train, autocast, sync) -> float:
    sync()
    start = time.perf_counter()
    step(model, kind, batch, read, train, autocast)
    sync()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=["bert", "modernbert"])
    parser.add_argument("--size", default="mini")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--rows", type=int, default=8, help="packed rows per batch")
    parser.add_argument("--mean-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per kernel "
                        "(interleaved; the median is shown)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    precision = "bf16" if cuda else "fp32"
    texts = documents(args.rows, args.seq_len, args.mean_length, seed=0)
    tokens = sum(map(len, texts))
    packed = tuple(t.to(device) for t in packed_batch(texts, args.seq_len))
    padded = tuple(t.to(device) for t in padded_batch(texts))
    generator = torch.Generator().manual_seed(1)
    packed_read = ((torch.rand(packed[0].shape, generator=generator) < 0.15).to(device)
                   & (packed[1] > 0))
    padded_read = torch.zeros_like(padded[1], dtype=torch.bool)
    padded_read[padded[1].bool()] = packed_read[packed[1] > 0]  # the same tokens
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda)
    print(f"{device.type}, {args.size}, seq {args.seq_len}: {len(texts)} documents, {tokens} "
          f"tokens; padded batch {tuple(padded[0].shape)} "
          f"({tokens / padded[0].numel():.0%} real), packed {tuple(packed[0].shape)} "
          f"({tokens / packed[0].numel():.0%} real); {args.steps} steps, {precision}")
    for family in args.families:
        preset = f"{family}-{args.size}"
        base = fresh(preset, "sdpa", device)
        across = (packed[0], (packed[1] > 0).long())
        kernels = {"padded": (base, "padded", padded, padded_read),
                   "packed": (base, "padded", across, packed_read),
                   "unpadded": (base, "unpadded", packed, packed_read),
                   "flex": (fresh(preset, "flex_attention", device), "unpadded", packed,
                            packed_read)}
        if varlen_usable(base, device, precision):
            kernels["varlen"] = (fresh(preset, "varlen", device), "unpadded", packed,
                                 packed_read)
        runs = [(name, train) for name in kernels for train in (True, False)
                if not (train and name == "flex" and not cuda)]  # no CPU flex backward
        times = {run: [] for run in runs}
        for round_ in range(args.steps + 1):  # round 0 warms up (FlexAttention compiles)
            for name, train in runs:  # interleaved: a load that drifts hits every kernel
                seconds = timed(*kernels[name], train, autocast, sync)
                if round_:
                    times[name, train].append(seconds)
        rates = {run: tokens / statistics.median(t) for run, t in times.items()}
        for name in kernels:
            shown = "  ".join(
                f"{'train' if train else 'forward'} {rates[name, train]:9,.0f} tok/s "
                f"({rates[name, train] / rates['padded', train]:.2f}×)"
                for train in (True, False) if (name, train) in rates)
            print(f"  {family:<11} {name:<9} {shown}")

if __name__ == "__main__":
    main()
