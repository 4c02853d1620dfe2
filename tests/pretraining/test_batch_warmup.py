"""Batch-size warm-up (issue 19): the batch follows the linear rule in tokens, rounded to
grad-accum × processes; a run killed inside the warm-up (with StableAdamW, decoupled
decay, unpadded attention, gradient accumulation and dropout) resumes bit-identically."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from mlmkit.errors import InvalidArgument
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.pretraining.run import batch_warmup_size, build_run


@pytest.fixture(scope="module")
def tokenizer_dir(tokenizer_factory, fixture_dir):
    tokenizer_factory("bpe")
    return str(fixture_dir / "tok-bpe")


def config(run_dir, tokenizer_dir, **extra) -> PretrainConfig:
    values = {"model": "modernbert-tiny", "tokenizer": tokenizer_dir, "run_dir": str(run_dir),
              "steps": 4, "seq_len": 32, "batch_size": 8, "grad_accum": 2,
              "batch_warmup_tokens": 500, "batch_warmup_start": 2, "optimizer": "stableadamw",
              "decoupled_weight_decay": True, "weight_decay": 0.01, "dropout": 0.1,
              "unpadded": True,
              "eval_every": 0, "eval_blocks": 2, "pppl_sentences": 0, "save_every": 0,
              "progress": False, "fill_mask_examples": 0, "threads": 1, "precision": "fp32",
              "log_every": 1}
    return PretrainConfig(**{**values, **extra})


def test_the_rule():
    c = PretrainConfig(batch_size=16, grad_accum=2, batch_warmup_tokens=1000,
                       batch_warmup_start=4, steps=10)
    assert [batch_warmup_size(c, t) for t in (0, 100, 500, 999, 1000, 10**6)] == \
        [4, 4, 10, 14, 16, 16]  # 4 + 12 × share, down to a multiple of 2
    # two processes: multiples of grad-accum × processes = 4 (each rank's micro-steps equal)
    assert [batch_warmup_size(c, t, world_size=2) for t in (0, 500, 700, 1000)] == \
        [4, 8, 12, 16]
    default = PretrainConfig(batch_size=64, batch_warmup_tokens=10, steps=10)
    assert batch_warmup_size(default, 0) == 8  # --batch-size / 8
    assert batch_warmup_size(c.replace(batch_warmup_tokens=0, batch_warmup_start=None), 0) == 16
    with pytest.raises(InvalidArgument, match="--batch-warmup-start 32 is larger than "
                                              "--batch-size 16"):
        c.replace(batch_warmup_start=32)
    with pytest.raises(InvalidArgument, match="without --batch-warmup-tokens"):
        PretrainConfig(batch_warmup_start=2, steps=10)
    # a recipe stretched to other --steps keeps its warm-up's share of the run
    from mlmkit.pretraining.recipes import recipe_config

    assert recipe_config("modernbert", {"steps": 100})["batch_warmup_tokens"] == 3000
    assert recipe_config("modernbert", {"steps": 100, "batch_warmup_tokens": 7}
                         )["batch_warmup_tokens"] == 7


def test_batches_grow_and_a_kill_inside_the_warmup_resumes_exactly(tmp_path, tokenizer_dir):
    run = build_run(config(tmp_path / "whole", tokenizer_dir))  # uninterrupted, by hand
    sizes, drawn, next_indices = [], [], run.order.next_indices
    run.order.next_indices = lambda n: drawn.append(n) or next_indices(n)
    run.objective.train()
    for _ in range(4):
        sizes.append((run.state.tokens, run.batch_size(), run.micro_batch))
        run.step()
    tokens = [t for t, _, _ in sizes]
    assert [b for _, b, _ in sizes] == [2 + 6 * t // 500 // 2 * 2 if t < 500 else 8
                                        for t in tokens] == drawn
    assert [b for _, b, _ in sizes][0] == 2 and [b for _, b, _ in sizes][-1] > 2
    assert [m for _, b, m in sizes] == [b // 2 for _, b, _ in sizes]  # grad-accum 2
    assert tokens[1] == 2 * 32  # the first step trained on the warm-up's first batch
    assert type(run.optimizer).__name__ == "StableAdamW"

    halted = pretrain(config(tmp_path / "halted", tokenizer_dir, halt_after=2))
    assert halted.interrupted and halted.summary["tokens"] < 500  # inside the warm-up
    pretrain(resume=tmp_path / "halted", overrides={"halt_after": None})
    a = run.objective.model.state_dict()
    b = load_file(str(tmp_path / "halted" / "final" / "model.safetensors"))
    assert b.keys() <= a.keys() and all(torch.equal(a[k], b[k]) for k in b)

    # the sizes round to grad-accum x processes: inside the warm-up, another number of
    # processes would take other batches, so it is refused in one line
    state = run.state_dict()
    assert state["processes"] == 1 and state["counters"]["tokens"] < 500
    with pytest.raises(InvalidArgument, match="inside its batch-size warm-up on 2 process"):
        run.load_state_dict({**state, "processes": 2})
