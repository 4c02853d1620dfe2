"""ESM's amino-acid tokenizer (saved, loaded by AutoTokenizer) and the ESM-2 presets."""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers import AutoModelForMaskedLM, AutoTokenizer

import mlmkit
from mlmkit.errors import PathError
from mlmkit.models import build_mlm, masked_log_probs
from mlmkit.models.preset_table import ESM2_SIZES, parse_preset
from mlmkit.protein import VOCABULARY, protein_tokenizer

ESM2_VOCABULARY = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T",
                   "I", "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U",
                   "Z", "O", ".", "-", "<null_1>", "<mask>"]


def test_saved_tokenizer_loads_with_autotokenizer(tmp_path):
    protein_tokenizer(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert list(VOCABULARY) == ESM2_VOCABULARY
    assert [tokenizer.convert_ids_to_tokens(i) for i in range(len(tokenizer))] == ESM2_VOCABULARY
    ids = tokenizer("MKVU<mask>A")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["<cls>", "M", "K", "V", "U", "<mask>", "A",
                                                    "<eos>"]
    assert (tokenizer.cls_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id,
            tokenizer.unk_token_id, tokenizer.mask_token_id) == (0, 1, 2, 3, 32)
    assert tokenizer.is_fast and tokenizer("MK V")["input_ids"] == [0, 20, 15, 7, 2]
    assert tokenizer("MKV").word_ids() == [None, 0, 1, 2, None]


def test_splits_as_transformers_esm_tokenizer_does(tmp_path):
    """The same ids as `EsmTokenizer` over the same vocabulary (how ESM-2 checkpoints
    ship)."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCABULARY) + "\n")
    esm = transformers.EsmTokenizer(str(vocab))
    ours = protein_tokenizer()
    for text in ("MKTAYIAKQR", "MKX<mask>UZOB", "ACDEFGHIKLMNPQRSTVWY"):
        assert ours(text)["input_ids"] == esm(text)["input_ids"]


def test_reads_lower_case_residues_as_upper_case(tmp_path):
    """A protein written in lower case is the same protein (as the FASTA reader and the
    variant scorers read it), not a row of <unk>; special tokens keep their spelling."""
    protein_tokenizer(tmp_path)
    for tokenizer in (protein_tokenizer(), AutoTokenizer.from_pretrained(tmp_path)):
        assert tokenizer("mktay<mask>iak")["input_ids"] == tokenizer("MKTAY<mask>IAK")["input_ids"]
        assert tokenizer.unk_token_id not in tokenizer("mkxbuzo")["input_ids"]
        # a letter outside the alphabet is one <unk> each, so residues still count tokens
        assert tokenizer.convert_ids_to_tokens(tokenizer("MKJ*")["input_ids"]) == [
            "<cls>", "M", "K", "<unk>", "<unk>", "<eos>"]


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(PathError, match="cannot write a tokenizer"):
        protein_tokenizer(blocker / "tok")
    with pytest.raises(PathError, match="'.*file': it is a file; pass a folder"):
        protein_tokenizer(blocker)
    assert blocker.read_text() == ""


def test_esm2_presets_have_the_published_shapes():
    assert parse_preset("esm2-8m")[1] == ESM2_SIZES["8m"]
    assert (ESM2_SIZES["8m"].layers, ESM2_SIZES["8m"].hidden) == (6, 320)
    assert (ESM2_SIZES["35m"].layers, ESM2_SIZES["35m"].hidden) == (12, 480)
    assert (ESM2_SIZES["150m"].layers, ESM2_SIZES["150m"].hidden) == (30, 640)
    with pytest.raises(ValueError, match="ESM-2 sizes are esm2-tiny"):
        parse_preset("esm2-base")
    config = transformers.EsmConfig  # the family is built with the installed classes
    assert config is not None


def test_esm2_8m_builds_with_its_parameter_count():
    model = build_mlm("esm2-8m", protein_tokenizer())
    assert model.config.max_position_embeddings == 1026
    assert 7.0e6 < sum(p.numel() for p in model.parameters()) < 8.5e6


def test_esm2_reads_1022_residues_as_the_released_models():
    """The released ESM-2 configs hold 1,026 positions, numbered after the padding index,
    and their tokenizer sets no limit: 1,024 tokens, 1,022 residues (ESM's crop)."""
    from mlmkit.models.load import model_max_length
    from mlmkit.protein.variants import _Protein

    tokenizer = protein_tokenizer()
    model = build_mlm("esm2-tiny", tokenizer)
    assert model_max_length(model, tokenizer) == 1024
    tokenizer.model_max_length = int(1e30)  # as `EsmTokenizer` of the hub checkpoints
    mlm = mlmkit.load((model, tokenizer), device="cpu")
    assert mlm.max_length == 1024
    assert _Protein(mlm, "M" * 1030).window == 1022


def test_tiny_esm_saves_loads_and_has_a_sparse_head(esm_dir):
    model = AutoModelForMaskedLM.from_pretrained(esm_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(esm_dir)
    assert isinstance(model, transformers.EsmForMaskedLM)
    batch = tokenizer(["MKTAYIAK", "MK<mask>A"], padding=True, return_tensors="pt")
    ids, attention = batch["input_ids"], batch["attention_mask"]
    positions = attention.bool()
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids, attention_mask=attention).logits, -1)
        sparse = masked_log_probs(model, ids, attention, positions)
    torch.testing.assert_close(sparse, full[positions], atol=1e-5, rtol=0)


def test_model_init_builds_esm2_with_its_positions(tmp_path):
    from typer.testing import CliRunner

    from mlmkit.cli import app

    protein_tokenizer(tmp_path / "tok")
    result = CliRunner().invoke(app, ["model", "init", "esm2-tiny", "--tokenizer",
                                      str(tmp_path / "tok"), "-o", str(tmp_path / "esm")])
    assert result.exit_code == 0, result.output
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "esm")
    assert model.config.max_position_embeddings == 1026
