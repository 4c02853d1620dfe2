"""The run's mask stream: the counter stream splits across processes, resumes exactly, and
is part of the stored config (runs saved without the field keep the row stream)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from mlmkit.errors import InvalidArgument
from mlmkit.pretraining import pretrain
from mlmkit.pretraining.data import prepare_rows, rank_rows
from mlmkit.pretraining.run_state import stored_config
from mlmkit.training.checkpoint import load_latest_state, save_state
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
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(values))  # an older checkpoint
    assert stored_config({}, tmp_path).mask_stream == "row"  # without a config: the file's
    assert tiny_config(tmp_path, tokenizer_path).mask_stream == "counter"  # a new run's
    with pytest.raises(InvalidArgument, match="mask-stream"):
        tiny_config(tmp_path, tokenizer_path, mask_stream="philox")


@pytest.mark.parametrize("stream", ["counter", "row"])
def test_masks_of_two_processes_are_those_of_one(stream, tmp_path, tokenizer_path,
                                                 wordpiece_tokenizer):
    """Either stream (the row stream masks each row alone, with its own generator, so no
    policy sees the rows beside it; tests/masking/test_counter_stream.py splits every
    policy's counter-stream batch)."""
    config = tiny_config(tmp_path, tokenizer_path, mask_stream=stream)
    objective = MLMObjective(config, wordpiece_tokenizer, build_runtime("cpu", "fp32", threads=1))
    blocks = _blocks(wordpiece_tokenizer, tmp_path)
    indices = np.arange(8) % len(blocks)
    whole, _ = prepare_rows(objective, blocks, indices, rank_rows(8, 0, 1), 3, 7,
                            stream=stream)
    ranks = [prepare_rows(objective, blocks, indices, rank_rows(8, r, 2), 3, 7,
                          stream=stream)[0] for r in (0, 1)]
    order = np.concatenate([rank_rows(8, r, 2) for r in (0, 1)])
    for key, value in whole.tensors.items():
        assert torch.equal(value[order], torch.cat([p.tensors[key] for p in ranks])), key
    assert whole.counts["masked"] == sum(p.counts["masked"] for p in ranks)
    other = {"counter": "row", "row": "counter"}[stream]
    another, _ = prepare_rows(objective, blocks, indices, rank_rows(8, 0, 1), 3, 7,
                              stream=other)
    assert not torch.equal(another.tensors["mask"], whole.tensors["mask"])


def _blocks(tokenizer, root):
    from mlmkit.corpus.packing import PackedBlocks
    from mlmkit.corpus.shards import tokenize_corpus

    docs = ["Return the value of the attribute, or raise an error when it is missing. " * 3,
            "The quick brown fox jumps over the lazy dog. " * 5]
    shards = tokenize_corpus(lambda: iter(docs), tokenizer, root=root, show_progress=False)
    return PackedBlocks(shards, 32, cls_id=tokenizer.cls_token_id,
                        sep_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id)


def test_a_counter_stream_run_resumes_bit_identically(tmp_path, tokenizer_path):
    full = pretrain(tiny_config(tmp_path / "full", tokenizer_path))  # counter: the default
    assert _recorded_stream(full.run_dir) == "counter"
    halted = pretrain(tiny_config(tmp_path / "run", tokenizer_path, halt_after=5))
    assert halted.interrupted
    resumed = pretrain(resume=tmp_path / "run", overrides={"halt_after": None})
    assert_same_weights(resumed.run_dir, full.run_dir)
    assert full.history[-1]["loss"] == resumed.history[-1]["loss"]


def test_a_run_saved_before_the_field_resumes_with_the_row_stream_exactly(
        tmp_path, tokenizer_path, capsys):
    full = pretrain(tiny_config(tmp_path / "full", tokenizer_path, mask_stream="row"))
    halted = pretrain(tiny_config(tmp_path / "run", tokenizer_path, mask_stream="row",
                                  halt_after=5))
    assert halted.interrupted
    _forget_the_stream(tmp_path / "run")  # as an older version saved it
    capsys.readouterr()
    resumed = pretrain(resume=tmp_path / "run", overrides={"halt_after": None})
    assert "differs" not in capsys.readouterr().err  # config.yaml read the same way
    assert _recorded_stream(resumed.run_dir) == "row"
    assert_same_weights(resumed.run_dir, full.run_dir)
    assert full.history[-1]["loss"] == resumed.history[-1]["loss"]


def _recorded_stream(run_dir) -> str:
    return yaml.safe_load((Path(run_dir) / "config.yaml").read_text())["mask_stream"]


def _forget_the_stream(run_dir) -> None:
    """Drop mask_stream from the run's config.yaml and from its training state."""
    config_yaml = Path(run_dir) / "config.yaml"
    values = yaml.safe_load(config_yaml.read_text())
    del values["mask_stream"]
    config_yaml.write_text(yaml.safe_dump(values))
    state, path = load_latest_state(run_dir)
    del state["config"]["mask_stream"]
    save_state(run_dir, state["counters"]["step"], state)


def test_a_halt_on_the_last_step_finishes_the_run(tmp_path, tokenizer_path):
    """`halt_after` reaching the run's last step is the end of the run, not an interruption
    that needs a second resume to write final/."""
    halted = pretrain(tiny_config(tmp_path / "run", tokenizer_path, halt_after=5))
    assert halted.interrupted
    resumed = pretrain(resume=tmp_path / "run", overrides={"halt_after": 7})  # steps 6..12
    assert not resumed.interrupted
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()
