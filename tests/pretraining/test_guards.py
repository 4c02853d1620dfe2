"""A run's sizes and schedule are checked against its data, memory and clock before the
hours go: a batch larger than the corpus, a step that cannot fit in memory, a learning rate
kept below 1e-8, and the estimated time to finish against --time-bound."""

from __future__ import annotations

import re
import types

import pytest
import torch

from mlmkit.errors import InvalidArgument
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.pretraining.guards import (
    batch_repeats_warning,
    check_step_memory,
    eta_lines,
    human_duration,
    tiny_lr_warning,
)
from mlmkit.pretraining.run import build_run
from mlmkit.training.schedule import Schedule


@pytest.fixture(scope="module")
def tokenizer_path(wordpiece_tokenizer, fixture_dir) -> str:
    return str(fixture_dir / "tok-wordpiece")


def config(tmp_path, tokenizer_path, **overrides) -> PretrainConfig:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Return the value number {i} of the list, or raise an "
                                f"error when item {i} is missing." for i in range(40)) + "\n")
    values = dict(model="tiny", tokenizer=tokenizer_path, corpus=str(corpus), seq_len=32,
                  batch_size=8, steps=12, eval_every=0, eval_blocks=2, pppl_sentences=0,
                  save_every=0, log_every=2, run_dir=str(tmp_path / "run"), progress=False,
                  fill_mask_examples=0, threads=1, precision="fp32")
    values.update(overrides)
    return PretrainConfig(**values)


def test_a_batch_larger_than_the_corpus_is_said(tmp_path, tokenizer_path, capfd):
    run = build_run(config(tmp_path, tokenizer_path, batch_size=512))
    blocks = len(run.data.train)
    assert blocks < 512
    err = capfd.readouterr().err
    assert f"--batch-size 512 is larger than the training data ({blocks} blocks of 32 " \
           "tokens)" in err and f"use --batch-size {blocks} or less" in err
    assert batch_repeats_warning(8, 2503, 128) is None


def test_a_huge_batch_is_refused_before_the_first_step(tmp_path, tokenizer_path):
    # the whole step, or one micro-batch of it, does not fit (as the machine's memory says)
    with pytest.raises(InvalidArgument, match=r"1,000,000 .* more than the cpu memory "
                                              r"available .*lower --batch-size"):
        build_run(config(tmp_path, tokenizer_path, batch_size=1_000_000))
    assert not (tmp_path / "run").exists()  # nothing written


def test_a_micro_batch_that_cannot_fit_names_batch_tokens(tmp_path, tokenizer_path):
    cfg = config(tmp_path, tokenizer_path, batch_size=64)
    model = types.SimpleNamespace(hidden_size=768, num_hidden_layers=12, num_attention_heads=12)
    check_step_memory(cfg, [model], 110_000_000, 64, 64, "fp32", torch.device("cpu"),
                      available=64 << 30)  # fits: nothing said
    with pytest.raises(InvalidArgument, match=r"a micro-batch of 64 blocks × 32 tokens needs "
                                              r"about .* bound the micro-batch with "
                                              r"--batch-tokens \d+ \(it raises --grad-accum"):
        check_step_memory(cfg, [model], 110_000_000, 64, 64, "fp32", torch.device("cpu"),
                          available=2 << 30)


def test_a_learning_rate_kept_below_1e8_is_said(tmp_path, tokenizer_path):
    huge = config(tmp_path, tokenizer_path, steps=10**12, warmup=0.06, lr=1e-3)
    message = tiny_lr_warning(huge, Schedule.from_config(huge))
    assert re.match(r"the learning rate stays below 1e-08 for the first 600,00[01] steps "
                    r"\(--warmup 0.06 is 60,000,000,000 steps of 1,000,000,000,000\)", message)
    assert "give --warmup in steps" in message
    usual = config(tmp_path, tokenizer_path, steps=100_000, warmup=0.06, lr=1e-3)
    assert tiny_lr_warning(usual, Schedule.from_config(usual)) is None


def test_the_time_to_finish_and_its_bound(tmp_path, tokenizer_path, capfd):
    line, warning = eta_lines(0.01, 10.0, 3600.0, 10, left=0.99)
    assert line == "estimated time to finish: 16 min (at the speed of the first 10 step(s))"
    assert warning is None
    _, warning = eta_lines(1e-9, 10.0, 8 * 3600.0, 10, left=1.0)
    assert "this run needs 317 years more, beyond --time-bound 8.0 h" in warning
    assert human_duration(4 * 86400) == "4.0 days"
    pretrain(config(tmp_path, tokenizer_path, steps=14, progress=True, time_bound="0.001s"))
    err = capfd.readouterr().err
    assert "estimated time to finish:" in err
    assert "beyond --time-bound" in err
    with pytest.raises(InvalidArgument, match="--time-bound 'soon' is not a duration"):
        config(tmp_path, tokenizer_path, time_bound="soon")
