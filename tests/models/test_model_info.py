"""`mlmkit model info`: what a checkpoint is and which features work on it."""

from __future__ import annotations

import json

import pytest
import transformers
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.models.info import ModelInfo, model_info


def test_info_of_bert_counts_parameters_and_positions(tiny_mlm):
    mlm = tiny_mlm("bert")
    info = model_info(mlm)
    assert isinstance(info, ModelInfo)
    model = mlm.model
    assert info.parameters == sum(p.numel() for p in model.parameters())
    emb = model.bert.embeddings
    expected = sum(m.weight.numel() for m in (emb.word_embeddings, emb.position_embeddings,
                                              emb.token_type_embeddings))
    assert info.embedding_parameters == expected
    assert info.other_parameters == info.parameters - expected
    assert info.position_scheme == "absolute (learned)" and info.rope_theta is None
    assert info.max_positions == 128
    assert info.mlm_head and info.mlm_head_trained
    assert info.features["score"] == "yes"
    assert info.special_tokens["mask"] == f"[MASK] ({mlm.tokenizer.mask_token_id})"
    assert info.sparse_last_layer is True


def test_info_of_modernbert_reports_rope_thetas_and_local_attention(tiny_mlm):
    info = model_info(tiny_mlm("ettin"))
    assert info.family == "modernbert" and info.position_scheme == "rope"
    assert info.rope_theta == {"global": 160000.0, "local": 10000.0}
    assert "local window" in info.attention


def test_info_of_eurobert_and_deberta_v3(tiny_mlm):
    euro = model_info(tiny_mlm("eurobert"))
    assert euro.position_scheme == "rope" and euro.rope_theta == {"all": 10000.0}
    assert euro.architecture == "EuroBertForMaskedLM"
    deb = model_info(tiny_mlm("deberta-v3"))
    assert deb.position_scheme.startswith("relative") and "256" in deb.position_scheme


@pytest.fixture(scope="module")
def headless(tmp_path_factory, tiny_mlm):
    mlm = tiny_mlm("deberta-v3")
    path = tmp_path_factory.mktemp("info") / "deberta-v3-headless"
    encoder = transformers.DebertaV2Model(mlm.model.config)
    encoder.load_state_dict(mlm.model.deberta.state_dict())
    encoder.save_pretrained(path)
    mlm.tokenizer.save_pretrained(path)
    return path


def test_cli_json_of_a_headless_checkpoint_says_what_will_not_work(headless):
    result = CliRunner().invoke(app, ["model", "info", str(headless), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["mlm_head"] is True and info["mlm_head_trained"] is False
    assert info["features"]["score"].startswith("no: the MLM head is not trained")
    assert info["features"]["finetune"].startswith("yes")


def test_cli_table(saved_tiny_mlm):
    result = CliRunner().invoke(app, ["model", "info", str(saved_tiny_mlm("roberta"))],
                                terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "RobertaForMaskedLM" in result.output
    assert "weights from the checkpoint" in result.output
    assert "features:" in result.output


def test_cli_missing_model_is_one_line_error(tmp_path):
    result = CliRunner().invoke(app, ["model", "info", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "does not exist" in result.output and "Traceback" not in result.output
