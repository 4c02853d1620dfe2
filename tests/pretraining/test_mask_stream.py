"""The run's mask stream: the counter stream splits across processes, resumes exactly, and
is part of the stored config (runs saved without the field keep the row stream)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlmkit.errors import InvalidArgument
from mlmkit.pretraining import pretrain
from mlmkit.pretraining.data import prepare_rows, rank_rows
from mlmkit.pretraining.run_state import stored_config
from mlmkit.training.objectives.mlm import MLMObjective
from mlmkit.training.runtime import build_runtime
from tests.pretraining.test_pretrain import assert_same_weights, tiny_config


@pytest.fixture(scope="module")
def tokenizer_path(wordpiece_tokenizer, fixture_dir) -> str:
    return str(fixture_dir / "tok-wordpiece")


def test_a_config_without_the_field_resumes_with_the_row_stream(tmp_path, tokenizer_path):
    config = tiny_config(tmp_path, tokenizer_path, mask_stream="counter")
    values = config.to_dict()
    assert stored_config({"config": values}, tmp_path).mask_stream == "counter"
    del values["mask_stream"]  # a checkpoint written before the field existed
    assert stored_config({"config": values}, tmp_path).mask_stream == "row"
    with pytest.raises(InvalidArgument, match="mask-stream"):
        tiny_config(tmp_path, tokenizer_path, mask_stream="philox")


def test_counter_masks_of_two_processes_are_those_of_one(tmp_path, tokenizer_path,
                                                           wordpiece_tokenizer):
    config = tiny_config(tmp_path, tokenizer_path, mask_stream="counter")
    objective = MLMObjective(config, wordpiece_tokenizer, build_runtime("cpu", "fp32", threads=1))
    blocks = _blocks(wordpiece_tokenizer, tmp_path)
    indices = np.arange(8) % len(blocks)
    whole, _ = prepare_rows(objective, blocks, indices, rank_rows(8, 0, 1), 3, 7,
                            stream="counter")
    ranks = [prepare_rows(objective, blocks, indices, rank_rows(8, r, 2), 3, 7,
                          stream="counter")[0] for r in (0, 1)]
    order = np.concatenate([rank_rows(8, r, 2) for r in (0, 1)])
    for key, value in whole.tensors.items():
        assert torch.equal(value[order], torch.cat([p.tensors[key] for p in ranks])), key
    assert whole.counts["masked"] == sum(p.counts["masked"] for p in ranks)
    row, _ = prepare_rows(objective, blocks, indices, rank_rows(8, 0, 1), 3, 7)
    assert not torch.equal(row.tensors["mask"], whole.tensors["mask"])  # another stream


def _blocks(tokenizer, root):
    from mlmkit.corpus.packing import PackedBlocks
    from mlmkit.corpus.shards import tokenize_corpus

    docs = ["Return the value of the attribute, or raise an error when it is missing. " * 3,
            "The quick brown fox jumps over the lazy dog. " * 5]
    shards = tokenize_corpus(lambda: iter(docs), tokenizer, root=root, show_progress=False)
    return PackedBlocks(shards, 32, cls_id=tokenizer.cls_token_id,
                        sep_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id)


def test_a_counter_stream_run_resumes_bit_identically(tmp_path, tokenizer_path):
    full = pretrain(tiny_config(tmp_path / "full", tokenizer_path, mask_stream="counter"))
    halted = pretrain(tiny_config(tmp_path / "run", tokenizer_path, mask_stream="counter",
                                  halt_after=5))
    assert halted.interrupted
    resumed = pretrain(resume=tmp_path / "run", overrides={"halt_after": None})
    assert_same_weights(resumed.run_dir, full.run_dir)
    assert full.history[-1]["loss"] == resumed.history[-1]["loss"]
