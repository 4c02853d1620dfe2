"""DistributedDataParallel on CPU (gloo): 2 processes × batch b follow 1 process × batch 2b,
every rank holds the same weights, and a 2-process run resumes on 1 process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from gloo_ranks import free_port, run_ranks

from mlmkit.pretraining import PretrainConfig, pretrain

# One worker runs the whole module (tests/conftest.py WHOLE_FILES): its multi-process fixture
# is built once.
pytestmark = pytest.mark.slow

DEADLINE_S = 400  # a hung collective fails the test instead of blocking the suite


def _worker(rank: int, world: int, port: int, config: dict | None, resume: str | None,
            out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    import faulthandler

    import torch.distributed as dist

    faulthandler.dump_traceback_later(DEADLINE_S - 10, exit=True)  # where a hang is stuck

    import mlmkit.pretraining.loop as loop
    import mlmkit.pretraining.run as run

    captured = {}
    build = run.build_objective

    def capture(*args, **kwargs):  # keep this rank's objective to compare its weights
        captured["objective"] = build(*args, **kwargs)
        return captured["objective"]

    run.build_objective = capture
    masks = record_masks(run)
    try:
        result = loop.pretrain(PretrainConfig(**config) if config else None, resume=resume)
        modules = captured["objective"].modules
        torch.save({n: {k: v.detach().clone() for k, v in m.state_dict().items()}
                    for n, m in modules.items()}, Path(out_dir) / f"rank{rank}.pt")
        torch.save(masks, Path(out_dir) / f"masks{rank}.pt")
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result.summary))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def record_masks(run_module) -> dict:
    """Record, through `prepare_rows`, which global rows this process read and how it masked
    them: {(step, global row): (block index, mask, corrupted ids)}."""
    masks = {}
    prepare = run_module.prepare_rows

    def recording(objective, blocks, indices, rows, step, seed, **options):
        prepared, tokens = prepare(objective, blocks, indices, rows, step, seed, **options)
        for i, row in enumerate(rows):
            masks[(step, int(row))] = (int(indices[row]), prepared.tensors["mask"][i].clone(),
                                       prepared.tensors["input_ids"][i].clone())
        return prepared, tokens

    run_module.prepare_rows = recording
    return masks


def run_processes(world: int, out_dir: Path, config: dict | None = None,
                  resume: str | None = None) -> list[dict]:
    """Run `pretrain` on `world` gloo processes; the state dict of each rank."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_ranks(_worker, (world, free_port(), config, resume, str(out_dir)), world, DEADLINE_S)
    return [torch.load(out_dir / f"rank{r}.pt") for r in range(world)]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> str:
    from mlmkit.corpus.python_docs import python_docs

    path = tmp_path_factory.mktemp("ddp-corpus") / "docs.txt"
    path.write_text("\n".join(python_docs("train")[:300]), encoding="utf-8")
    return str(path)


def ddp_config(run_dir: Path, tokenizer_path: str, corpus: str, **overrides) -> dict:
    values = dict(model="tiny", tokenizer=tokenizer_path, corpus=corpus, validation_share=0.1,
                  seq_len=32, batch_size=8, steps=6, lr=3e-3, warmup=0.0, dropout=0.0,
                  eval_every=0, eval_blocks=4, pppl_sentences=0, save_every=0, log_every=1,
                  run_dir=str(run_dir), progress=False, fill_mask_examples=0, threads=1,
                  precision="fp32")
    values.update(overrides)
    return values


def train_losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r.get("split") == "train"]


def assert_close_states(a: dict, b: dict, atol: float) -> None:
    for name in a:
        for key in a[name]:
            assert torch.allclose(a[name][key], b[name][key], atol=atol, rtol=0), key


@pytest.fixture(scope="module")
def runs(tmp_path_factory, wordpiece_tokenizer, fixture_dir, corpus_file):
    """One process × batch 8 for 6 steps; two processes × batch 4 each (2 micro-steps of
    2), halted after 3 steps (each rank's weights kept), then resumed on one process."""
    import mlmkit.pretraining.run as run_module

    root = tmp_path_factory.mktemp("ddp")
    tokenizer = str(fixture_dir / "tok-wordpiece")
    single = root / "single"
    prepare = run_module.prepare_rows
    try:
        single_masks = record_masks(run_module)
        pretrain(PretrainConfig(**ddp_config(single, tokenizer, corpus_file)))
    finally:
        run_module.prepare_rows = prepare
    halted = root / "halted"
    # two micro-steps per process: gradients are synchronised on the last one only
    states = run_processes(2, root / "out-halted", ddp_config(halted, tokenizer, corpus_file,
                                                              halt_after=3, grad_accum=2))
    halted_losses = train_losses(halted)
    resumed = pretrain(resume=str(halted), overrides={"halt_after": None})
    return {"single": single, "halted_losses": halted_losses, "rank_states": states,
            "resumed": resumed, "single_masks": single_masks,
            "rank_masks": [torch.load(root / "out-halted" / f"masks{r}.pt") for r in (0, 1)]}


def _final_state(run_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "final" / "model.safetensors"))


def test_two_processes_follow_one_process_with_the_global_batch(runs):
    one, two = train_losses(runs["single"]), runs["halted_losses"]
    assert len(one) == 6 and len(two) == 3  # only rank 0 logged: one line per step
    assert one[0] != one[2]  # it trains
    for a, b in zip(one[:3], two, strict=True):
        assert abs(a - b) < 1e-4, (one, two)


def test_each_rank_masks_only_its_rows_exactly_as_one_process_does(runs):
    """Rank r read and masked global rows r, r + 2, ... only; together the two ranks masked
    every row of every step exactly as the single process did (same block, same mask, same
    corrupted ids): masking is a function of (seed, step, global row) alone."""
    rank0, rank1 = runs["rank_masks"]
    assert {row for _, row in rank0} == {0, 2, 4, 6}
    assert {row for _, row in rank1} == {1, 3, 5, 7}
    assert {step for step, _ in rank0} == {0, 1, 2}
    single = runs["single_masks"]
    assert len(single) == 6 * 8
    assert sum(int(mask.sum()) for _, mask, _ in single.values()) > 0
    for key, (block, mask, ids) in {**rank0, **rank1}.items():
        one_block, one_mask, one_ids = single[key]
        assert block == one_block, key
        assert torch.equal(mask, one_mask) and torch.equal(ids, one_ids), key


def test_every_rank_holds_identical_weights(runs):
    rank0, rank1 = runs["rank_states"]
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        for key in rank0[name]:
            assert torch.equal(rank0[name][key], rank1[name][key]), key


def test_a_two_process_run_resumes_on_one_process(runs):
    resumed = runs["resumed"]
    assert resumed.summary["steps"] == 6 and resumed.final_dir is not None
    losses = train_losses(resumed.run_dir)
    assert len(losses) == 6  # 3 from the 2-process run, 3 after resuming
    for a, b in zip(train_losses(runs["single"]), losses, strict=True):
        assert abs(a - b) < 1e-4
    final_one, final_resumed = _final_state(runs["single"]), _final_state(resumed.run_dir)
    for key in final_one:
        assert torch.allclose(final_one[key], final_resumed[key], atol=1e-4, rtol=0), key


def test_one_process_group_set_up_without_torchrun(monkeypatch):
    """engine.process_group: rank 0 of 1 and nothing started without torchrun; bad
    environment values are one-line errors naming the variable."""
    from mlmkit.engine import process_group
    from mlmkit.errors import InvalidArgument

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MLMKIT_DIST_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    group, device = process_group.init("cpu")
    assert (group.rank, group.world, group.is_main, group.distributed) == (0, 1, True, False)
    assert device == torch.device("cpu") and group.backend is None
    group.barrier()
    group.finish()  # no-ops for a single process
    assert process_group.timeout_seconds() == process_group.DEFAULT_TIMEOUT_S
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(InvalidArgument, match="WORLD_SIZE='two'"):
        process_group.init("cpu")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(InvalidArgument, match="RANK=5 is not below WORLD_SIZE=2"):
        process_group.init("cpu")
    monkeypatch.setenv("MLMKIT_DIST_TIMEOUT", "-3")
    with pytest.raises(InvalidArgument, match="MLMKIT_DIST_TIMEOUT"):
        process_group.timeout_seconds()
