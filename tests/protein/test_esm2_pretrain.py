"""`mlmkit pretrain --recipe esm2` on a FASTA corpus: an ESM-2 trained on proteins, saved so
that transformers loads it with its amino-acid tokenizer, and usable for variant effects."""

from __future__ import annotations

import numpy as np
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
