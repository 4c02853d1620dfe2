"""`mlmkit pretrain --recipe esm2` on a FASTA corpus: an ESM-2 trained on proteins, saved so
that transformers loads it with its amino-acid tokenizer, and usable for variant effects."""

from __future__ import annotations

import json

import numpy as np
import pytest
import transformers
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app


def test_esm2_recipe_trains_on_a_fasta_corpus(shared_data, tmp_path):
    run = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "pretrain", "--recipe", "esm2", "--model", "esm2-tiny",
        "--corpus", str(shared_data / "protein" / "some_proteins.fasta"),
        "--steps", "2", "--batch-size", "2", "--seq-len", "64", "--run-dir", str(run),
        "--eval-every", "0", "--eval-blocks", "2", "--pppl-sentences", "0", "--threads", "1",
        "--precision", "fp32", "--save-every", "0", "--fill-mask-examples", "0"])
    assert result.exit_code == 0, result.output
    final = run / "final"
    model = transformers.AutoModelForMaskedLM.from_pretrained(final)
    tokenizer = transformers.AutoTokenizer.from_pretrained(final)
    assert isinstance(model, transformers.EsmForMaskedLM)
    assert tokenizer("MKV")["input_ids"] == [0, 20, 15, 7, 2]
    scores = mlmkit.load(final, device="cpu").variant_effects("MKTAYIAK", ["K2A", "T3G"])
    assert np.isfinite(scores).all()


def _pretrain(tmp_path, *arguments):
    return CliRunner().invoke(app, [
        "pretrain", "--recipe", "esm2", "--model", "esm2-tiny", "--steps", "1",
        "--batch-size", "2", "--seq-len", "32", "--run-dir", str(tmp_path / "run"),
        "--eval-every", "0", "--pppl-sentences", "0", "--fill-mask-examples", "0",
        "--threads", "1", "--precision", "fp32", *arguments])


def test_the_esm2_recipe_needs_a_protein_corpus(tmp_path):
    result = _pretrain(tmp_path)  # the default corpus is English text
    assert result.exit_code == 1
    assert "pass --corpus proteins.fasta" in result.output
    assert not (tmp_path / "run").exists()
    shown = CliRunner().invoke(app, ["recipe", "show", "esm2"])  # no corpus to check there
    assert shown.exit_code == 0, shown.output


def test_a_corpus_the_tokenizer_cannot_read_is_refused_and_a_few_unknowns_are_counted(
        tmp_path):
    digits = tmp_path / "digits.fasta"
    digits.write_text(">a\nMK12345678\n>b\n90123456KV\n")
    result = _pretrain(tmp_path, "--corpus", str(digits))
    assert result.exit_code == 1
    assert "of its tokens are <unk>" in result.output and "Traceback" not in result.output
    few = tmp_path / "few.fasta"
    few.write_text("".join(f">p{i}\nmktayiakqrqisfvkshfsrq*\n" for i in range(8)))
    result = _pretrain(tmp_path, "--corpus", str(few), "--run-dir", str(tmp_path / "few"))
    assert result.exit_code == 0, result.output
    # lower case is read as residues; each record's '*' is the one <unk> counted
    assert "8 <unk>" in result.output
    # the data line is kept in summary.json, where --no-progress silences it
    summary = json.loads((tmp_path / "few" / "summary.json").read_text())
    assert "8 <unk>" in summary["data"]


def test_dna_or_text_read_by_the_amino_acid_alphabet_is_refused(tmp_path, shared_data):
    """A, C, G, T are residues and upper-cased English mostly is: neither shows as <unk>,
    so the letters' shares say it."""
    dna = tmp_path / "dna.fasta"
    dna.write_text("".join(f">g{i}\nACGTTGCANNACGGTACCTTAGGCATCGATCGGATCCA\n" for i in range(8)))
    result = _pretrain(tmp_path, "--corpus", str(dna))
    assert result.exit_code == 1 and "reads as DNA, not proteins" in result.output, \
        result.output
    assert "mlmkit tokenizer dna" in result.output and not (tmp_path / "run").exists()
    text = tmp_path / "plays.txt"
    text.write_text((shared_data / "tinyshakespeare" / "input.txt").read_text()[:20_000])
    result = _pretrain(tmp_path, "--corpus", str(text))
    assert result.exit_code == 1 and "reads as text, not proteins" in result.output, \
        result.output
    assert _pretrain(tmp_path, "--corpus", str(shared_data / "protein" / "some_proteins.fasta"),
                     "--run-dir", str(tmp_path / "proteins")).exit_code == 0


def test_esm2_presets_read_esm2_s_1024_tokens():
    from mlmkit.errors import InvalidArgument
    from mlmkit.pretraining.config import PretrainConfig

    PretrainConfig(model="esm2-8m", seq_len=1024).validate()
    with pytest.raises(InvalidArgument, match="esm2-8m preset's 1024 positions"):
        PretrainConfig(model="esm2-8m", seq_len=1025).validate()
    with pytest.raises(InvalidArgument, match="mini preset's 512 positions"):
        PretrainConfig(model="mini", seq_len=1024).validate()


def test_a_tokenizer_trained_for_an_esm2_preset_declares_its_1024_tokens(tmp_path):
    corpus = tmp_path / "text.txt"
    corpus.write_text("".join(f"sentence number {i} of a small corpus.\n" for i in range(300)))
    result = CliRunner().invoke(app, [  # the esm2 shape with a WordPiece tokenizer of text
        "pretrain", "--model", "esm2-tiny", "--corpus", str(corpus), "--steps", "1",
        "--batch-size", "2", "--seq-len", "32", "--run-dir", str(tmp_path / "run"),
        "--eval-every", "0", "--pppl-sentences", "0", "--fill-mask-examples", "0",
        "--vocab-size", "300", "--threads", "1", "--precision", "fp32"])
    assert result.exit_code == 0, result.output
    final = tmp_path / "run" / "final"
    assert transformers.AutoTokenizer.from_pretrained(final).model_max_length == 1024
    assert json.loads((final / "tokenizer_config.json").read_text())["model_max_length"] == 1024


def test_a_protein_corpus_has_pppl_items_and_fill_mask_examples():
    from mlmkit.pretraining.data import validation_sentences
    from mlmkit.pretraining.examples import pick_examples
    from mlmkit.protein import protein_tokenizer

    tokenizer = protein_tokenizer()
    proteins = ["MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ", "MSLRGRELLTSEERLELVRIPEDISEQ", "MKV"]
    items = validation_sentences(proteins, tokenizer, 5, 12, seed=0)
    assert len(items) == 2 and all(len(ids) == 12 for ids in items)  # the first 12 residues
    examples = pick_examples(proteins, tokenizer, 2, seed=0)
    assert len(examples) == 2
    for example in examples:
        filled = example.template.replace("{mask}", example.answer)
        assert any(p.startswith(filled) for p in proteins) and len(example.answer) == 1


def test_the_recipe_s_data_line_counts_the_proteins_cropped(shared_data, tmp_path):
    """The esm2 recipe trains in phases, whose blocks did not pass the cropped count on."""
    result = _pretrain(tmp_path, "--corpus", str(shared_data / "protein" /
                                                 "some_proteins.fasta"))
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("data:"))
    assert "documents longer than a block" in line, line
