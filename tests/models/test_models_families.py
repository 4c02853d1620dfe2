"""The encoder families of 2024-26: EuroBERT, NeoBERT (remote code), Ettin and mmBERT
(ModernBERT classes, mmBERT's <bos>/<eos> tokenizer), DeBERTa-v3 (no MLM head)."""

from __future__ import annotations

import pytest
import torch
import transformers
from remote_code_fixture import write_remote_code_model
from typer.testing import CliRunner

from mlmkit.errors import InvalidArgument, ModelError
from mlmkit.models import FAMILIES, build_mlm, load_mlm, masked_log_probs
from mlmkit.models.load import complete_special_tokens

NEW_FAMILIES = ["eurobert", "ettin", "mmbert", "neobert", "deberta-v3"]


def _batch(tokenizer):
    return tokenizer(["The module returns a list of names.", "A short one."], padding=True,
                     return_tensors="pt")


def _check_primitive(model, tokenizer):
    batch = _batch(tokenizer)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    positions = attn.bool().clone()
    positions[:, 0] = False
    with torch.no_grad():
        expected = torch.log_softmax(model(input_ids=ids, attention_mask=attn).logits, -1)
        got = masked_log_probs(model, ids, attn, positions)
    torch.testing.assert_close(got, expected[positions], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", NEW_FAMILIES)
def test_new_family_builds_with_its_classes(tiny_mlm, family):
    mlm = tiny_mlm(family)
    expected = {"eurobert": "eurobert", "neobert": "eurobert", "ettin": "modernbert",
                "mmbert": "modernbert", "deberta-v3": "deberta-v2"}[family]
    assert mlm.model.config.model_type == expected
    assert mlm.model.config.vocab_size == len(mlm.tokenizer)
    _check_primitive(mlm.model, mlm.tokenizer)


def test_neobert_shape_is_deeper_than_eurobert(tiny_mlm):
    euro, neo = tiny_mlm("eurobert").model.config, tiny_mlm("neobert").model.config
    assert neo.num_hidden_layers == 2 * euro.num_hidden_layers
    assert neo.hidden_size == euro.hidden_size
    assert neo.hidden_act == "silu"  # SwiGLU


def test_model_init_builds_eurobert_and_loads(bpe_tokenizer, tmp_path):
    from mlmkit.cli import app

    tok_dir = tmp_path / "tok"
    bpe_tokenizer.save_pretrained(tok_dir)
    out = tmp_path / "euro"
    result = CliRunner().invoke(app, ["model", "init", "eurobert-tiny", "--tokenizer",
                                      str(tok_dir), "-o", str(out), "--max-length", "64"])
    assert result.exit_code == 0, result.output
    assert "EuroBertForMaskedLM" in result.output
    mlm = load_mlm(out, device="cpu")
    assert isinstance(mlm.model, transformers.EuroBertForMaskedLM)
    assert mlm.max_length == 64


def test_model_list_names_every_family():
    from mlmkit.cli import app

    result = CliRunner().invoke(app, ["model", "list", "--json"])
    assert result.exit_code == 0, result.output
    import json

    rows = json.loads(result.output)
    assert [r["family"] for r in rows] == list(FAMILIES)
    assert all(r["available"] for r in rows)
    assert {r["family"]: r["classes"] for r in rows}["mmbert"] == "ModernBertConfig"


def test_family_missing_from_transformers_is_a_clear_error(bpe_tokenizer, monkeypatch):
    from mlmkit.models import presets

    # an older transformers: its lazy module has no EuroBertConfig
    monkeypatch.setattr(presets, "family_available", lambda family: family != "eurobert")
    with pytest.raises(InvalidArgument, match="EuroBertConfig.*upgrade transformers"):
        build_mlm("eurobert-tiny", bpe_tokenizer)


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory, bpe_tokenizer):
    return write_remote_code_model(tmp_path_factory.mktemp("neobert") / "neobert-remote",
                                   bpe_tokenizer)


def test_remote_code_needs_trust(remote_dir, monkeypatch):
    monkeypatch.delenv("MLMKIT_TRUST_REMOTE_CODE", raising=False)
    with pytest.raises(ModelError, match="ships its own model code.*--trust-remote-code"):
        load_mlm(remote_dir, device="cpu")


def test_remote_code_loads_with_trust(remote_dir, monkeypatch):
    mlm = load_mlm(remote_dir, device="cpu", trust_remote_code=True)
    assert type(mlm.model).__name__ == "NeoBERTLMHead"
    _check_primitive(mlm.model, mlm.tokenizer)
    monkeypatch.setenv("MLMKIT_TRUST_REMOTE_CODE", "1")  # the CLI-wide switch
    assert type(load_mlm(remote_dir, device="cpu").model).__name__ == "NeoBERTLMHead"


def test_gemma_style_tokenizer_gets_cls_and_sep(bpe_tokenizer, tmp_path):
    """mmBERT's tokenizer names <bos>/<eos> only: mlmkit uses them as [CLS]/[SEP]."""
    gemma = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe_tokenizer.backend_tokenizer, bos_token="<s>", eos_token="</s>",
        pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    assert gemma.cls_token is None and gemma.sep_token is None
    model = build_mlm("mmbert-tiny", gemma, max_length=64)
    assert model.config.cls_token_id == gemma.bos_token_id
    assert model.config.sep_token_id == gemma.eos_token_id
    model.save_pretrained(tmp_path / "mm")
    gemma.save_pretrained(tmp_path / "mm")
    mlm = load_mlm(tmp_path / "mm", device="cpu")
    assert mlm.tokenizer.cls_token_id == gemma.bos_token_id
    assert mlm.tokenizer.sep_token_id == gemma.eos_token_id
    assert complete_special_tokens(gemma).cls_token == "<s>"


@pytest.fixture(scope="module")
def headless_deberta_v3(tmp_path_factory, tiny_mlm):
    """A DeBERTa-v3 release as published: the encoder's weights, no MLM head."""
    mlm = tiny_mlm("deberta-v3")
    path = tmp_path_factory.mktemp("debv3") / "deberta-v3-tiny"
    encoder = transformers.DebertaV2Model(mlm.model.config)
    encoder.load_state_dict(mlm.model.deberta.state_dict())
    encoder.save_pretrained(path)
    mlm.tokenizer.save_pretrained(path)
    return path


def test_deberta_v3_is_refused_where_an_mlm_head_is_needed(headless_deberta_v3):
    with pytest.raises(ModelError, match="no trained MLM head.*DeBERTa-v3"):
        load_mlm(headless_deberta_v3, device="cpu")


def test_deberta_v3_loads_for_training_its_head(headless_deberta_v3):
    mlm = load_mlm(headless_deberta_v3, device="cpu", allow_untrained_head=True)
    assert isinstance(mlm.model, transformers.DebertaV2ForMaskedLM)


def test_pretraining_mmbert_with_a_gemma_style_tokenizer(bpe_tokenizer, tmp_path):
    from mlmkit.pretraining import PretrainConfig
    from mlmkit.pretraining.run import build_run

    gemma = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe_tokenizer.backend_tokenizer, bos_token="<s>", eos_token="</s>",
        pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    gemma.save_pretrained(tmp_path / "gemma")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Return the value of item {i} from the list." for i in
                                range(200)))
    run = build_run(PretrainConfig(
        model="mmbert-tiny", tokenizer=str(tmp_path / "gemma"), corpus=str(corpus), steps=1,
        seq_len=32, batch_size=2, eval_blocks=2, pppl_sentences=0, progress=False,
        run_dir=str(tmp_path / "run"), threads=1, precision="fp32"))
    assert run.tokenizer.cls_token == "<s>" and run.tokenizer.sep_token == "</s>"
    run.step()
    assert run.data.train[[0]].input_ids[0, 0] == gemma.bos_token_id


def test_model_info_of_remote_code_needs_the_flag(remote_dir, monkeypatch):
    import json

    from mlmkit.cli import app

    monkeypatch.delenv("MLMKIT_TRUST_REMOTE_CODE", raising=False)
    refused = CliRunner().invoke(app, ["model", "info", str(remote_dir)])
    assert refused.exit_code == 1 and "--trust-remote-code" in refused.output
    done = CliRunner().invoke(app, ["model", "info", str(remote_dir), "--trust-remote-code",
                                    "--json"])
    assert done.exit_code == 0, done.output
    info = json.loads(done.output)
    assert info["remote_code"] is True and info["architecture"] == "NeoBERTLMHead"
    assert info["position_scheme"] == "rope" and info["rope_theta"] == {"all": 10000.0}
