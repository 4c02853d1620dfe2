"""The k-mer DNA tokenizer (Nucleotide Transformer layout): vocabulary, splitting, saved and
loaded by AutoTokenizer, and an ESM-architecture model over it."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from mlmkit.errors import InvalidArgument
from mlmkit.models import build_mlm, masked_log_probs
from mlmkit.protein import dna_tokenizer, dna_vocabulary


def test_vocabulary_layout():
    vocabulary = dna_vocabulary(6)
    assert len(vocabulary) == 6 + 4 ** 6 + 5 == 4107
    assert vocabulary[:6] == ["<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>"]
    assert vocabulary[6] == "AAAAAA" and vocabulary[-5:] == list("ATCGN")
    assert dna_vocabulary(1) == [*vocabulary[:6], "A", "T", "C", "G", "N"]
    with pytest.raises(InvalidArgument, match="k=0"):
        dna_vocabulary(0)
    for length in (-5, 0, 2, 2.0, True):
        with pytest.raises(InvalidArgument, match="max_length="):
            dna_tokenizer(3, max_length=length)


@pytest.mark.parametrize("text, tokens", [
    ("ACGTACGTA", ["ACGTAC", "G", "T", "A"]),
    ("ACGNACGTACGG", ["A", "C", "G", "N", "ACGTAC", "G", "G"]),
    ("acgtac gt", ["ACGTAC", "G", "T"]),
    ("ACG<mask>TTTTTT", ["A", "C", "G", "<mask>", "TTTTTT"]),
    ("ACGTXA", ["A", "C", "G", "T", "<unk>", "A"]),
])
def test_splits_into_kmers_then_letters(tmp_path, text, tokens):
    dna_tokenizer(6, tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["<cls>", *tokens, "<eos>"]


def test_an_esm_model_builds_over_it():
    tokenizer = dna_tokenizer(3)
    model = build_mlm("esm2-tiny", tokenizer, max_length=66).eval()
    assert model.config.vocab_size == len(tokenizer) == 6 + 64 + 5
    ids = torch.tensor([tokenizer("ACGTTTGGA<mask>CC")["input_ids"]])
    positions = torch.tensor([[0, 4]])
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids).logits, -1)[0, 4]
        torch.testing.assert_close(masked_log_probs(model, ids, None, positions)[0], full,
                                   atol=1e-5, rtol=0)


def test_the_cli_saves_the_fixed_alphabets(tmp_path):
    from typer.testing import CliRunner

    from mlmkit.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["tokenizer", "dna", "-o", str(tmp_path / "dna"), "--k", "3"])
    assert result.exit_code == 0, result.output
    assert AutoTokenizer.from_pretrained(tmp_path / "dna").convert_ids_to_tokens(
        AutoTokenizer.from_pretrained(tmp_path / "dna")("acgTA")["input_ids"]) == [
        "<cls>", "ACG", "T", "A", "<eos>"]
    result = runner.invoke(app, ["tokenizer", "protein", "-o", str(tmp_path / "protein")])
    assert result.exit_code == 0, result.output
    assert len(AutoTokenizer.from_pretrained(tmp_path / "protein")) == 33
    result = runner.invoke(app, ["tokenizer", "dna", "-o", str(tmp_path / "bad"), "--k", "9"])
    assert result.exit_code == 1 and "k=9" in result.output
    for command in (["protein"], ["dna"], ["train", "python-docs"]):  # - made a folder '-'
        result = runner.invoke(app, ["tokenizer", *command, "-o", "-"])
        assert result.exit_code == 1 and "a tokenizer is a folder of files" in result.stderr
    (tmp_path / "file").write_text("x")
    result = runner.invoke(app, ["tokenizer", "protein", "-o", str(tmp_path / "file")])
    assert result.exit_code == 1 and "is a file: name a directory" in result.stderr
