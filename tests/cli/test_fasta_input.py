"""`mlmkit score` and `mlmkit embed` read a FASTA file a protein per record (its sequence
over all its lines), each output row at its record's header line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app

FASTA = ">sp|P1|first\nMKTAYIAK\nQRQISF\n\n>P2 second\nMVLSPADK\n"


@pytest.fixture
def fasta(tmp_path):
    path = tmp_path / "proteins.fasta"
    path.write_text(FASTA)
    return path


def test_score_a_protein_per_record(esm_dir, fasta, tmp_path):
    out = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(app, ["score", str(esm_dir), str(fasta), "-o", str(out),
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["line"] for r in records] == [1, 5]
    assert [r["text"] for r in records] == ["MKTAYIAKQRQISF", "MVLSPADK"]
    expected = mlmkit.score(mlmkit.load(esm_dir, device="cpu"), "MKTAYIAKQRQISF")
    assert records[0]["pll"] == pytest.approx(expected.pll, abs=1e-5)
    refused = CliRunner().invoke(app, ["score", str(esm_dir), str(fasta), "--text-field", "seq",
                                       "--device", "cpu"])
    assert refused.exit_code == 1 and "a FASTA file has no fields" in refused.output


def test_embed_a_protein_per_record(esm_dir, fasta, tmp_path):
    out = tmp_path / "vectors.jsonl"
    result = CliRunner().invoke(app, ["embed", str(esm_dir), str(fasta), "-o", str(out),
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    vectors = [json.loads(line)["embedding"] for line in out.read_text().splitlines()]
    assert len(vectors) == 2
    expected = mlmkit.load(esm_dir, device="cpu").embed(["MVLSPADK"])
    np.testing.assert_allclose(vectors[1], np.asarray(expected)[0], atol=1e-5)


def test_fasta_on_standard_input_is_read_with_format_fasta_and_said_without(esm_dir,
                                                                           tmp_path):
    """FASTA piped to `score MODEL -` scored its header lines as proteins, without a word."""
    out = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(app, ["score", str(esm_dir), "-", "--format", "fasta", "-o",
                                      str(out), "--device", "cpu"], input=FASTA)
    assert result.exit_code == 0, result.output
    assert [json.loads(x)["text"] for x in out.read_text().splitlines()] == [
        "MKTAYIAKQRQISF", "MVLSPADK"]
    plain = CliRunner().invoke(app, ["score", str(esm_dir), "-", "-o", str(out), "--device",
                                     "cpu"], input=FASTA)
    assert plain.exit_code == 0, plain.output
    assert "standard input starts with '>' as FASTA does" in plain.stderr
    assert "--format fasta" in plain.stderr
