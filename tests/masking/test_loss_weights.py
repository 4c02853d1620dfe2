"""Loss-weighted masking updates its table once per optimizer step from every micro-batch and
every process: --grad-accum 1 × B equals 2 × B/2, and two gloo ranks hold the same table."""

from __future__ import annotations

import os

import torch
from gloo_ranks import free_port, run_ranks

from mlmkit.masking.weights import LossWeights

VOCAB = 50


def _step_data(step: int, n: int = 64):
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, VOCAB, (n,), generator=g)
    losses = torch.rand(n, generator=g, dtype=torch.float64).float() * 5
    return ids, losses


def _train(splits: int, steps: int = 3) -> torch.Tensor:
    weights = LossWeights(decay=0.9, vocab_size=VOCAB)
    for step in range(steps):
        ids, losses = _step_data(step)
        for part_ids, part_losses in zip(ids.chunk(splits), losses.chunk(splits), strict=True):
            weights.update(part_ids, part_losses)
        weights.end_step()
    return weights.table


def test_accumulation_does_not_change_the_table():
    one = _train(1)
    assert torch.equal(one, _train(2))
    assert torch.equal(one, _train(4))
    assert not torch.equal(one, torch.full_like(one, torch.log(torch.tensor(VOCAB)).item()))


def test_the_table_moves_once_per_step_by_the_mean_loss():
    weights = LossWeights(decay=0.5, vocab_size=4)
    start = weights.table.clone()
    weights.update(torch.tensor([1, 1]), torch.tensor([1.0, 3.0]))
    weights.update(torch.tensor([1, 2]), torch.tensor([5.0, 2.0]))
    assert torch.equal(weights.table, start)  # nothing moves within the step
    weights.end_step()
    expected = start.clone()
    expected[1] = 0.5 * start[1] + 0.5 * 3.0  # mean of 1, 3, 5: one EMA move
    expected[2] = 0.5 * start[2] + 0.5 * 2.0
    assert torch.allclose(weights.table, expected)
    assert weights.updates == 1


def test_per_micro_batch_updates_would_differ():
    """The check above can fail: ending the step after each micro-batch gives another table."""
    weights = LossWeights(decay=0.9, vocab_size=VOCAB)
    for step in range(3):
        ids, losses = _step_data(step)
        for part_ids, part_losses in zip(ids.chunk(2), losses.chunk(2), strict=True):
            weights.update(part_ids, part_losses)
            weights.end_step()
    assert not torch.allclose(weights.table, _train(1))


def test_a_step_left_open_ends_before_the_next_masks_and_survives_a_checkpoint():
    weights = LossWeights(decay=0.9, vocab_size=VOCAB)
    ids, losses = _step_data(0)
    weights.update(ids, losses)
    state = weights.state_dict()  # saved mid-step
    again = LossWeights(decay=0.9, vocab_size=VOCAB)
    again.load_state_dict(state)
    for w in (weights, again):
        w.token_weights(ids[None], None, None)  # the next step's masking ends the open one
    assert torch.equal(weights.table, again.table)
    assert torch.equal(weights.table, _train(1, steps=1))


# ---- two gloo processes


def _rank(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        weights = LossWeights(decay=0.9, vocab_size=VOCAB)
        for step in range(3):
            ids, losses = _step_data(step)
            mine = torch.arange(rank, len(ids), world)  # this rank's rows, as the loop slices
            if not (rank == 1 and step == 1):  # a rank may see no masked token in a step
                weights.update(ids[mine], losses[mine])
            else:
                mine = mine[:0]
            weights.end_step()
            torch.save(mine, os.path.join(out_dir, f"rows{rank}-{step}.pt"))
        torch.save(weights.table, os.path.join(out_dir, f"table{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_hold_the_same_table(tmp_path):
    run_ranks(_rank, (2, free_port(), str(tmp_path)), 2, 120)
    tables = [torch.load(tmp_path / f"table{r}.pt") for r in range(2)]
    assert torch.equal(tables[0], tables[1])
    # ... and equal to one process that saw every row both ranks saw
    single = LossWeights(decay=0.9, vocab_size=VOCAB)
    for step in range(3):
        ids, losses = _step_data(step)
        rows = torch.cat([torch.load(tmp_path / f"rows{r}-{step}.pt") for r in range(2)])
        single.update(ids[rows], losses[rows])
        single.end_step()
    assert torch.allclose(tables[0], single.table, rtol=0, atol=1e-6)


def test_pretraining_with_grad_accum_keeps_the_same_table(wordpiece_tokenizer, fixture_dir,
                                                          tmp_path):
    """End to end: 3 steps of loss-weighted masking, 1 × 8 rows vs 2 × 4 rows a step."""
    from mlmkit.pretraining import PretrainConfig, pretrain
    from mlmkit.training.checkpoint import load_latest_state

    tables = []
    for accum in (1, 2):
        run_dir = tmp_path / f"accum{accum}"
        pretrain(PretrainConfig(
            model="tiny", tokenizer=str(fixture_dir / "tok-wordpiece"), seq_len=32,
            batch_size=8, grad_accum=accum, steps=3, lr=3e-3, warmup=0.1, eval_every=0,
            eval_blocks=1, pppl_sentences=0, save_every=0, log_every=1, progress=False,
            fill_mask_examples=0, threads=1, precision="fp32", run_dir=str(run_dir),
            masking={"preset": "loss", "weights": {"name": "loss", "decay": 0.5}}))
        state, _ = load_latest_state(run_dir)
        weights = state["objective"]["policy"]["weights"]
        assert weights["updates"] == 3 and "pending" not in weights
        tables.append(weights["table"])
    start = torch.log(torch.tensor(float(len(wordpiece_tokenizer))))
    assert (tables[0] != start).sum() > 50  # the table learned
    # equal up to float noise of the micro-batched forward (per micro-batch updates would
    # move each token seen twice a step by another ~25% of its loss gap)
    assert torch.allclose(tables[0], tables[1], rtol=0, atol=1e-4)
