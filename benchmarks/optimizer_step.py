"""Which optimizer kernel is fastest here? AdamW single-tensor / foreach / fused and
StableAdamW per-tensor / foreach, on one model's parameters, in one run.

Two timings per variant, interleaved in rounds (a shared machine's load moves, so each
variant's best round is kept): the optimizer step alone (gradients filled once, the
update applied again and again), and a whole training step (forward at the masked
positions, backward, optimizer step) on a random packed batch. mlmkit's default for
`--optimizer adamw` on each device follows these figures (`mlmkit.training.optimizer`).

    .venv/bin/python benchmarks/optimizer_step.py                      # mini, 1 thread
    .venv/bin/python benchmarks/optimizer_step.py --model base --rows 8 --threads 2
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import torch

from mlmkit.models import build_mlm, masked_logits
from mlmkit.training.optimizer import parameter_groups
from mlmkit.training.stable_adamw import StableAdamW


class Tokenizer(SimpleNamespace):
    """What a preset reads from a tokenizer: its size and special ids."""

    def __len__(self):
        return self.vocab


VARIANTS = {
    "adamw single-tensor": lambda g: torch.optim.AdamW(g, lr=1e-3, foreach=False),
    "adamw foreach": lambda g: torch.optim.AdamW(g, lr=1e-3, foreach=True),
    "adamw fused": lambda g: torch.optim.AdamW(g, lr=1e-3, fused=True),
    "stableadamw per-tensor": lambda g: StableAdamW(g, lr=1e-3, foreach=False),
    "stableadamw foreach": lambda g: StableAdamW(g, lr=1e-3, foreach=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mini")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = Tokenizer(pad_token_id=0, cls_token_id=1, sep_token_id=2, bos_token_id=1,
                          eos_token_id=2, mask_token_id=3, vocab=args.vocab)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(4, args.vocab, (args.rows, args.seq_len), generator=generator)
    attention = torch.ones_like(ids)
    mask = torch.rand(ids.shape, generator=generator) < 0.3
    models, optimizers = {}, {}
    for name, make in VARIANTS.items():
        models[name] = build_mlm(args.model, tokenizer, seed=0).train()
        optimizers[name] = make(parameter_groups({"m": models[name]}, 0.01))
    parameters = sum(p.numel() for p in next(iter(models.values())).parameters())
    print(f"{args.model}: {parameters / 1e6:.1f}M parameters, batch {args.rows} × "
          f"{args.seq_len}, {args.threads} thread(s), torch {torch.__version__}")
    best_update = {name: float("inf") for name in VARIANTS}
    best_step = dict(best_update)
    for _ in range(args.rounds):
        for name in VARIANTS:
            model, optimizer = models[name], optimizers[name]
            for p in model.parameters():
                p.grad = torch.randn_like(p) * 1e-3
            optimizer.step()  # the state exists before timing
            started = time.perf_counter()
            for _ in range(args.repeats):
                optimizer.step()
            best_update[name] = min(best_update[name],
                                    (time.perf_counter() - started) / args.repeats)
            started = time.perf_counter()
            for _ in range(2):
                optimizer.zero_grad(set_to_none=True)
                logits = masked_logits(model, ids, attention, mask)
                torch.nn.functional.cross_entropy(logits.float(), ids[mask]).backward()
                optimizer.step()
            best_step[name] = min(best_step[name], (time.perf_counter() - started) / 2)
    print(f"{'variant':<26}{'optimizer step':>16}{'training step':>16}")
    for name in VARIANTS:
        print(f"{name:<26}{best_update[name] * 1e3:>13.2f} ms{best_step[name] * 1e3:>13.1f} ms")


if __name__ == "__main__":
    main()
