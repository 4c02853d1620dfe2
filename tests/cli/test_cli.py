"""The `mlmkit` app as `python -m mlmkit`; `model init`."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from mlmkit.cli import app

# Every command's help (description, example, -h) is held by tests/cli/test_cli_contract.py.


def test_python_dash_m_mlmkit_help():
    done = subprocess.run([sys.executable, "-m", "mlmkit", "--help"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fill" in done.stdout and "tokenizer" in done.stdout


def test_model_init_saves_a_loadable_model(wordpiece_tokenizer, tmp_path):
    from mlmkit.models import build_mlm, load_mlm

    out = tmp_path / "tiny-bert"
    args = ["model", "init", "bert-tiny", "--tokenizer", wordpiece_tokenizer.name_or_path,
            "-o", str(out), "--max-length", "64", "--seed", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    mlm = load_mlm(out, device="cpu")
    assert mlm.tokenizer.mask_token == "[MASK]"
    assert mlm.model.config.vocab_size == len(wordpiece_tokenizer)
    reference = build_mlm("bert-tiny", wordpiece_tokenizer, max_length=64, seed=3)
    for (name, saved), (_, fresh) in zip(mlm.model.state_dict().items(),
                                         reference.state_dict().items(), strict=True):
        assert saved.equal(fresh), name
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 1 and "exists and is not empty" in again.stderr
    assert CliRunner().invoke(app, [*args, "--overwrite"]).exit_code == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_model_init_bad_preset_and_tokenizer(wordpiece_tokenizer, tmp_path):
    bad = CliRunner().invoke(app, ["model", "init", "gpt-huge", "--tokenizer",
                                   wordpiece_tokenizer.name_or_path, "-o", str(tmp_path / "m")])
    assert bad.exit_code == 1 and "unknown model preset 'gpt-huge'" in bad.stderr
    bad = CliRunner().invoke(app, ["model", "init", "tiny", "--tokenizer",
                                   str(tmp_path / "none"), "-o", str(tmp_path / "m")])
    assert bad.exit_code == 1 and "is not a directory" in bad.stderr
    empty = tmp_path / "no-tokenizer-files"
    empty.mkdir()
    (empty / "config.json").write_text('{"model_type": "bert"}')
    bad = CliRunner().invoke(app, ["model", "init", "tiny", "--tokenizer", str(empty),
                                   "-o", str(tmp_path / "m")])
    assert bad.exit_code == 1 and "holds only special tokens" in bad.stderr
    assert not (tmp_path / "m").exists()
