"""Every pretraining field is range-checked before work starts (one-line InvalidArgument
naming the flag); `model init` and `tokenizer train` bound their sizes; the model-init help
lists every family; trained models keep the presets' positions."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.pretraining import PretrainConfig
from mlmkit.pretraining.config import load_config

BAD = [
    ("lr", -1, "--lr"), ("lr", math.nan, "--lr"), ("lr", math.inf, "--lr"), ("lr", 0, "--lr"),
    ("lr", 1e9, "--lr"), ("lr", "fast", "--lr"),
    ("beta1", 2, "--beta1"), ("beta1", 1.0, "--beta1"), ("beta2", -0.1, "--beta2"),
    ("dropout", 5, "--dropout"), ("dropout", 1.0, "--dropout"),
    ("eps", 0, "--eps"), ("eps", -1e-8, "--eps"),
    ("weight_decay", -0.1, "--weight-decay"), ("clip", math.nan, "--clip"),
    ("warmup", -1, "--warmup"), ("warmup", 2.5, "--warmup"),
    ("decay", 1.5, "--decay"), ("min_lr", -0.5, "--min-lr"),
    ("label_smoothing", 1.0, "--label-smoothing"),
    ("validation_share", 1.0, "--validation-share"),
    ("steps", -1, "--steps"), ("steps", 0, "--steps"), ("steps", 1.5, "--steps"),
    ("tokens", -5, "--tokens"), ("time", "0s", "--time"), ("time", "soon", "--time"),
    ("batch_size", 0, "--batch-size"), ("grad_accum", -2, "--grad-accum"),
    ("batch_size", 10, "--batch-size"),  # not divisible by grad_accum 4 (given below)
    ("save_every", -5, "--save-every"), ("log_every", 0, "--log-every"),
    ("eval_every", -1, "--eval-every"), ("keep_checkpoints", 0, "--keep-checkpoints"),
    ("eval_blocks", 0, "--eval-blocks"), ("pppl_sentences", -1, "--pppl-sentences"),
    ("halt_after", 0, "--halt-after"), ("threads", 0, "--threads"),
    ("fill_mask_examples", -1, "--fill-mask-examples"), ("seed", -1, "--seed"),
    ("seq_len", 100000, "--seq-len"), ("seq_len", 1024, "--seq-len"), ("seq_len", 2, "--seq-len"),
    ("vocab_size", 1_000_000_000, "--vocab-size"), ("vocab_size", 10, "--vocab-size"),
    ("precision", "fp16", "--precision"), ("schedule", "zigzag", "--schedule"),
    ("objective", "gpt", "--objective"), ("packing", "none", "--packing"),
    ("compile", "yes", "--compile"), ("corpus", "", "--corpus"),
    ("optimizer", "lamb", "--optimizer"), ("optimizer", 3, "--optimizer"),
    ("decoupled_weight_decay", "yes", "--decoupled-weight-decay"),
    ("unpadded", 1, "--unpadded"), ("batch_warmup_tokens", -1, "--batch-warmup-tokens"),
    ("batch_warmup_start", 0, "--batch-warmup-start"),
]


@pytest.mark.parametrize(("name", "value", "flag"), BAD,
                         ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_bad_field_is_one_line_naming_its_flag(name, value, flag):
    extra = {"grad_accum": 4} if (name, value) == ("batch_size", 10) else {}
    with pytest.raises(InvalidArgument) as error:
        PretrainConfig(**{name: value}, **extra)
    message = str(error.value)
    assert flag in message and "\n" not in message


@pytest.mark.parametrize("masking", [{"rate": 5}, {"corruption": [math.nan, 0, 0]}, 7],
                         ids=repr)
def test_bad_masking_is_one_line_naming_its_flag_before_the_run(masking):
    """The masking config is checked with the run's other checks (`check_config`, before any
    work or writing), not when the config is built: its checks need torch, and the config
    class is read by `mlmkit --help`."""
    from mlmkit.pretraining.run import check_config

    config = PretrainConfig(masking=masking)
    with pytest.raises(InvalidArgument) as error:
        check_config(config, world_size=1)
    message = str(error.value)
    assert "--masking" in message and "\n" not in message


def test_good_values_pass_and_counts_become_ints():
    config = PretrainConfig(seq_len=128.0, steps=None, time="10m", save_every=0, eval_every=0,
                            pppl_sentences=0, dropout=None, warmup=100, lr=5e-4)
    assert config.seq_len == 128 and isinstance(config.seq_len, int)
    assert PretrainConfig(seq_len=512).seq_len == 512  # the presets' position count


def test_seq_len_is_bounded_by_a_local_init_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "roberta", "max_position_embeddings": 130, "pad_token_id": 1}))
    assert PretrainConfig(init=str(tmp_path), seq_len=128).seq_len == 128
    with pytest.raises(InvalidArgument, match="--seq-len 129 is longer than --init"):
        PretrainConfig(init=str(tmp_path), seq_len=129)


def test_config_file_errors_are_one_line(tmp_path):
    binary = tmp_path / "bad.yaml"
    binary.write_bytes(b"steps: 10\nmodel: \xff\xfe\n")
    with pytest.raises(InvalidData, match="not UTF-8.*byte offset"):
        load_config(binary)
    typed = tmp_path / "typed.yaml"
    typed.write_text("steps: lots\n")
    with pytest.raises(InvalidArgument, match="--steps"):
        load_config(typed)


def test_model_init_help_lists_every_family_and_size():
    from mlmkit.cli import app
    from mlmkit.models.preset_table import ESM2_SIZES, FAMILIES, SIZES

    result = CliRunner().invoke(app, ["model", "init", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in (*FAMILIES, *SIZES, *ESM2_SIZES):
        assert name in text, name
    assert len(FAMILIES) == 14


@pytest.mark.parametrize("length", ["-1", "0", "100000", "1e9"])
def test_model_init_max_length_is_bounded(wordpiece_tokenizer, fixture_dir, tmp_path, length):
    from mlmkit.cli import app

    out = tmp_path / "m"
    result = CliRunner().invoke(app, ["model", "init", "tiny", "--tokenizer",
                                      str(fixture_dir / "tok-wordpiece"), "-o", str(out),
                                      "--max-length", length])
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and not out.exists()
    if length != "1e9":  # 1e9 is not an integer: a usage error (exit 2)
        assert result.exit_code == 1 and "--max-length" in result.output


def test_model_init_keeps_umask_and_leaves_no_staging(wordpiece_tokenizer, fixture_dir,
                                                      tmp_path):
    import os

    from mlmkit.cli import app

    leftover = tmp_path / ".m.abcd1234"  # a killed save of an older version, a day old
    leftover.mkdir()
    os.utime(leftover, (0, 0))
    old_mask = os.umask(0o022)
    try:
        result = CliRunner().invoke(app, ["model", "init", "tiny", "--tokenizer",
                                          str(fixture_dir / "tok-wordpiece"), "-o",
                                          str(tmp_path / "m")])
    finally:
        os.umask(old_mask)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o755  # not mkdtemp's 0o700
    assert (tmp_path / "m" / "config.json").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["max_position_embeddings"] == 512


def test_run_model_keeps_the_preset_positions(wordpiece_tokenizer):
    import torch

    from mlmkit.training.objectives.mlm import build_run_model
    from mlmkit.training.runtime import Runtime

    config = PretrainConfig(model="tiny", seq_len=32, steps=1)
    model = build_run_model(config, wordpiece_tokenizer, Runtime(device=torch.device("cpu")))
    assert model.config.max_position_embeddings == 512  # not --seq-len 32
