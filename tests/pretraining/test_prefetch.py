"""--prefetch: batches built ahead on a thread are the batches built in the step; a run
killed mid-way resumes bit-identically; the data-wait share is in the metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlmkit.corpus.packing import BlockOrder
from mlmkit.errors import InvalidArgument
from mlmkit.pretraining import pretrain
from mlmkit.pretraining.data import prepare_rows, rank_rows
from mlmkit.pretraining.prefetch import BatchProducer, can_prefetch, prefetch_depth
from mlmkit.training.objectives.mlm import MLMObjective
from mlmkit.training.runtime import build_runtime
from tests.pretraining.test_mask_stream import _blocks, _recorded_stream
from tests.pretraining.test_pretrain import assert_same_weights, tiny_config


@pytest.fixture(scope="module")
def tokenizer_path(wordpiece_tokenizer, fixture_dir) -> str:
    return str(fixture_dir / "tok-wordpiece")


@pytest.mark.parametrize("stream", ["row", "counter"])
def test_the_producer_hands_out_the_batches_the_step_would_build(
        stream, tmp_path, tokenizer_path, wordpiece_tokenizer):
    runtime = build_runtime("cpu", "fp32", threads=1)
    objective = MLMObjective(tiny_config(tmp_path, tokenizer_path), wordpiece_tokenizer,
                             runtime)
    blocks = _blocks(wordpiece_tokenizer, tmp_path)
    producer = BatchProducer(objective, blocks, depth=3, batch_size=4, runtime=runtime,
                             seed=5, stream=stream)
    order, plain = BlockOrder(len(blocks), seed=1), BlockOrder(len(blocks), seed=1)
    try:
        for step in range(6):
            if step == 4:  # the run's order moved elsewhere (not expected): rebuilt
                order.next_indices(4), plain.next_indices(4)
            indices = order.next_indices(4)
            got, tokens, waited = producer.take(step, indices, order)
            assert len(producer.jobs) == 3 and waited >= 0
            want, want_tokens = prepare_rows(objective, blocks, plain.next_indices(4),
                                             rank_rows(4, 0, 1), step, 5, stream=stream)
            assert tokens == want_tokens and got.counts == want.counts
            for key, value in want.tensors.items():
                assert value.equal(got.tensors[key]), (step, key)
    finally:
        producer.close()


def test_what_cannot_be_built_ahead_is_built_in_the_step(tmp_path, tokenizer_path,
                                                        wordpiece_tokenizer):
    runtime = build_runtime("cpu", "fp32", threads=1)
    config = tiny_config(tmp_path, tokenizer_path)
    objective = MLMObjective(config, wordpiece_tokenizer, runtime)
    assert can_prefetch(config, objective, None) is None
    assert "warm-up" in can_prefetch(config.replace(batch_warmup_tokens=100), objective, None)
    assert "phases" in can_prefetch(config, objective, object())
    loss = MLMObjective(config.replace(masking="loss"), wordpiece_tokenizer, runtime)
    assert "loss-based" in can_prefetch(config, loss, None)


def test_without_the_flag_the_depth_is_the_devices(tmp_path, tokenizer_path):
    assert tiny_config(tmp_path, tokenizer_path).prefetch is None  # recorded as not given
    assert prefetch_depth(None, torch.device("cuda", 1)) == prefetch_depth(None, "cuda") == 2
    assert prefetch_depth(None, torch.device("cpu")) == 0
    assert prefetch_depth(0, "cuda") == 0 and prefetch_depth(3, "cpu") == 3  # as given
    with pytest.raises(InvalidArgument, match="prefetch"):
        tiny_config(tmp_path, tokenizer_path, prefetch=-1)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_a_run_without_the_flag_builds_ahead_as_its_device_says(device, tmp_path,
                                                               tokenizer_path, monkeypatch):
    depths, start = [], BatchProducer.__init__

    def spy(self, *args, depth, **kwargs):
        depths.append(depth)
        start(self, *args, depth=depth, **kwargs)

    monkeypatch.setattr(BatchProducer, "__init__", spy)
    pretrain(tiny_config(tmp_path, tokenizer_path, device=device, steps=3, pppl_sentences=0))
    assert depths == ([2] if device == "cuda" else [])  # a CPU builds each batch in its step


def test_a_prefetching_run_killed_midway_resumes_bit_identically(tmp_path, tokenizer_path):
    plain = pretrain(tiny_config(tmp_path / "plain", tokenizer_path, prefetch=0))
    halted = pretrain(tiny_config(tmp_path / "run", tokenizer_path, halt_after=5, prefetch=2))
    assert _recorded_stream(halted.run_dir) == "counter"  # the default stream
    assert halted.interrupted
    resumed = pretrain(resume=tmp_path / "run", overrides={"halt_after": None})
    assert_same_weights(resumed.run_dir, plain.run_dir)
    losses = [[r["loss"] for r in run.history if r["split"] == "train"]
              for run in (plain, resumed)]
    assert losses[0] == losses[1]
    train = [r for r in resumed.history if r["split"] == "train"]
    assert all(0.0 <= r["data_wait"] <= 1.0 for r in train)
    assert 0.0 <= resumed.summary["data_wait_share"] <= 1.0
    assert np.isfinite(plain.summary["data_wait_share"])
