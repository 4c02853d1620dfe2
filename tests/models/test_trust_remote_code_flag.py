"""--trust-remote-code on every command that loads a model (one shared option,
mlmkit.cli.options): a checkpoint that ships its own code is refused in one line without
it and runs with it; the flag holds only for its command; Python loaders take
`trust_remote_code=`."""

from __future__ import annotations

import json

import pytest
import typer
from remote_code_fixture import write_remote_code_model
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.cli.options import MODEL_PARAMETERS
from mlmkit.errors import ModelError
from mlmkit.models import load_mlm, prepare_mlm


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory, bpe_tokenizer):
    return write_remote_code_model(tmp_path_factory.mktemp("remote") / "neobert-remote",
                                   bpe_tokenizer)


def commands(group, path=()):
    for name, command in getattr(group, "commands", {}).items():
        yield from commands(command, (*path, name))
    if not hasattr(group, "commands"):
        yield " ".join(path), command_params(group)


def command_params(command) -> set[str]:
    return {p.name for p in command.params}


def test_every_model_loading_command_has_the_flag():
    table = dict(commands(typer.main.get_command(app)))
    loading = {name for name, params in table.items() if params & set(MODEL_PARAMETERS)}
    assert {"score", "fill", "generate", "infill", "rescore", "serve", "finetune",
            "probe classify", "probe rank", "probe facts", "bias crows", "bias stereoset",
            "bias compare", "eval blimp", "eval elbo", "eval suite", "model info"} <= loading
    assert [name for name in sorted(loading) if "trust_remote_code" not in table[name]] == []


def test_score_refuses_remote_code_without_the_flag_and_runs_it_with(remote_dir, tmp_path,
                                                                     monkeypatch):
    monkeypatch.delenv("MLMKIT_TRUST_REMOTE_CODE", raising=False)
    texts = tmp_path / "texts.txt"
    texts.write_text("the value is returned\n", encoding="utf-8")
    args = ["score", str(remote_dir), str(texts), "--threads", "1"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1
    assert "--trust-remote-code" in refused.stderr and "Traceback" not in refused.output
    done = CliRunner().invoke(app, [*args, "--trust-remote-code"])
    assert done.exit_code == 0, done.output
    record = json.loads(done.stdout.splitlines()[0])
    assert record["pll"] < 0
    filled = CliRunner().invoke(app, ["fill", str(remote_dir), "a [MASK] value", "--json",
                                      "--threads", "1", "--trust-remote-code"])
    assert filled.exit_code == 0, filled.output
    # the flag held only for its command
    with pytest.raises(ModelError, match="--trust-remote-code"):
        load_mlm(remote_dir, device="cpu")


def test_python_loaders_take_the_keyword(remote_dir, monkeypatch):
    monkeypatch.delenv("MLMKIT_TRUST_REMOTE_CODE", raising=False)
    with pytest.raises(ModelError, match="ships its own model code"):
        prepare_mlm(remote_dir, device="cpu")
    mlm, precision = prepare_mlm(remote_dir, device="cpu", trust_remote_code=True)
    assert type(mlm.model).__name__ == "NeoBERTLMHead" and precision == "fp32"
