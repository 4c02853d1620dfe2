"""Loading refuses what would give silent wrong results: no tokenizer, an untrained MLM head,
damaged weights, a device this machine lacks; each as one ModelError/DeviceError line."""

from __future__ import annotations

import shutil

import pytest
import torch
import transformers

from mlmkit.errors import DeviceError, InvalidArgument, ModelError, PathError
from mlmkit.models import as_mlm, load_mlm, prepare_mlm


@pytest.fixture(scope="session")
def discriminator_dir(tiny_mlm, fixture_dir):
    """An ELECTRA discriminator (ElectraForPreTraining) saved with its tokenizer."""
    mlm = tiny_mlm("electra")
    path = fixture_dir / "electra-discriminator"
    transformers.ElectraForPreTraining(mlm.model.config).save_pretrained(path)
    mlm.tokenizer.save_pretrained(path)
    return path


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_an_electra_discriminator_is_refused_with_the_reason(discriminator_dir):
    with pytest.raises(ModelError, match="no trained MLM head") as info:
        load_mlm(discriminator_dir, device="cpu")
    message = str(info.value)
    assert "discriminator" in message and "allow_untrained_head" in message
    assert "\n" not in message
    loaded = load_mlm(discriminator_dir, device="cpu", allow_untrained_head=True)
    assert type(loaded.model).__name__ == "ElectraForMaskedLM"


def test_an_untrained_head_of_any_family_is_refused(saved_tiny_mlm, tmp_path):
    """A checkpoint saved without its head (as DeBERTa-v3 releases are)."""
    from safetensors.torch import load_file, save_file

    path = _copy(saved_tiny_mlm("deberta-v2"), tmp_path / "headless")
    weights = load_file(path / "model.safetensors")
    kept = {k: v for k, v in weights.items() if k.startswith("deberta.")}
    assert len(kept) < len(weights)
    save_file(kept, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelError, match="DeBERTa-v3"):
        load_mlm(path, device="cpu")


def test_a_trained_mlm_loads_without_complaint(saved_tiny_mlm):
    for family in ("bert", "electra", "modernbert"):
        assert load_mlm(saved_tiny_mlm(family), device="cpu").model is not None


def test_a_model_without_a_tokenizer_is_an_error(tiny_mlm, tmp_path):
    path = tmp_path / "weights-only"
    tiny_mlm("bert").model.save_pretrained(path)
    with pytest.raises(ModelError, match="no tokenizer files"):
        load_mlm(path, device="cpu")


def test_a_tokenizer_of_another_model_is_an_error(tiny_mlm, saved_tiny_mlm, tmp_path):
    path = _copy(saved_tiny_mlm("bert"), tmp_path / "mismatch")
    config = transformers.AutoConfig.from_pretrained(path)
    config.vocab_size = 100
    transformers.AutoModelForMaskedLM.from_config(config).save_pretrained(path)
    with pytest.raises(ModelError, match="do not belong together"):
        load_mlm(path, device="cpu")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_damaged_weights_name_the_file(saved_tiny_mlm, tmp_path, damage):
    path = _copy(saved_tiny_mlm("bert"), tmp_path / f"damaged-{damage}")
    weights = path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x93" * 4096,
                         "empty": b""}[damage])
    with pytest.raises(ModelError) as info:
        load_mlm(path, device="cpu")
    message = str(info.value)
    assert str(weights) in message and "re-download or re-export" in message
    assert "\n" not in message


def test_damaged_config_and_missing_weights(saved_tiny_mlm, tmp_path):
    path = _copy(saved_tiny_mlm("bert"), tmp_path / "bad-config")
    (path / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="config"):
        load_mlm(path, device="cpu")
    path = _copy(saved_tiny_mlm("bert"), tmp_path / "no-weights")
    (path / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="no weight file"):
        load_mlm(path, device="cpu")
    with pytest.raises(PathError, match="is a file"):
        load_mlm(saved_tiny_mlm("bert") / "config.json", device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_missing_device_lists_the_devices(saved_tiny_mlm, tiny_mlm):
    with pytest.raises(DeviceError, match="cpu") as info:
        load_mlm(saved_tiny_mlm("bert"), device="cuda")
    assert "not on this machine" in str(info.value)
    with pytest.raises(DeviceError):
        as_mlm(tiny_mlm("bert"), device="cuda:1")
    with pytest.raises(DeviceError):
        prepare_mlm(saved_tiny_mlm("bert"), device="tpu")


def test_pairs_without_a_head_or_tokenizer_are_refused(tiny_mlm):
    mlm = tiny_mlm("electra")
    discriminator = transformers.ElectraForPreTraining(mlm.model.config)
    with pytest.raises(ModelError, match="no MLM head"):
        as_mlm((discriminator, mlm.tokenizer))
    with pytest.raises(InvalidArgument, match="tokenizer"):
        as_mlm(mlm.model)
    with pytest.raises(InvalidArgument, match="model is a int"):
        as_mlm((3, mlm.tokenizer))


def test_prepare_mlm_resolves_precision_and_threads(tiny_mlm, monkeypatch):
    monkeypatch.setenv("MLMKIT_THREADS", "1")
    mlm, precision = prepare_mlm(tiny_mlm("bert"), precision="auto")
    assert precision == "fp32" and mlm is tiny_mlm("bert") and torch.get_num_threads() == 1
    with pytest.raises(InvalidArgument, match="precision"):
        prepare_mlm(tiny_mlm("bert"), precision="fp64")
    with pytest.raises(InvalidArgument, match="threads"):
        prepare_mlm(tiny_mlm("bert"), threads=0)


def test_a_thread_count_asked_for_holds_for_later_library_calls(tiny_mlm, monkeypatch):
    """`mlmkit fill --threads 2` opened the model on 2 threads and then called fill_mask,
    whose threads=None reset the default: the flag held until the first library call."""
    from mlmkit import fill_mask
    from mlmkit.core.devices import set_threads

    monkeypatch.setenv("MLMKIT_THREADS", "1")
    mlm = tiny_mlm("bert")
    set_threads(2)
    fill_mask(mlm, f"a {mlm.tokenizer.mask_token} b")
    assert torch.get_num_threads() == 2
    set_threads(None)
    assert torch.get_num_threads() == 2


def test_the_cli_threads_flag_reaches_the_library_call(saved_tiny_mlm, monkeypatch):
    """The CLI's --threads is the count the library's batches run on (fill and score)."""
    import importlib

    from typer.testing import CliRunner

    import mlmkit.scoring.text_scores as text_scores
    from mlmkit.cli import app

    fill_mask = importlib.import_module("mlmkit.generation.fill_mask")  # the module

    seen = []

    def spying(original):
        def spy(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return original(*args, **kwargs)
        return spy

    monkeypatch.setattr(fill_mask, "run_jobs", spying(fill_mask.run_jobs))
    monkeypatch.setattr(text_scores, "score_token_ids", spying(text_scores.score_token_ids))
    monkeypatch.setenv("MLMKIT_THREADS", "1")
    model = str(saved_tiny_mlm("bert"))
    for command in (["fill", model, "a [MASK] b", "--threads", "2"],
                    ["score", model, "-", "--threads", "2"]):
        seen.clear()
        result = CliRunner().invoke(app, command, input="a b c\n")
        assert result.exit_code == 0, result.output
        assert seen and set(seen) == {2}, (command[0], seen)
