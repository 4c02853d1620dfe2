"""`mlmkit embed`: JSON lines or .npy in input order, equal to the library's vectors."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app

runner = CliRunner()
TEXTS = ["Return the number of items.", "", "a b c", "Raise an error when the file is missing."]


def test_jsonl_rows_follow_the_input_lines(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "vectors.jsonl"
    result = runner.invoke(app, ["embed", model, str(source), "-o", str(out), "--pooling",
                                 "max", "--normalize", "--dimensions", "8"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line)["embedding"] for line in out.read_text().splitlines()]
    expected = mlmkit.embed(model, TEXTS, pooling="max", normalize=True, dimensions=8)
    assert np.abs(np.array(rows) - expected).max() < 1e-6


def test_npy_from_standard_input(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    out = tmp_path / "vectors.npy"
    result = runner.invoke(app, ["embed", model, "-", "--format", "npy", "-o", str(out)],
                           input="\n".join(TEXTS) + "\n")
    assert result.exit_code == 0, result.output
    vectors = np.load(out)
    assert vectors.dtype == np.float32
    assert np.abs(vectors - mlmkit.embed(model, TEXTS)).max() < 1e-6


def test_jsonl_field_input_to_standard_output(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps({"sentence": t}) + "\n" for t in TEXTS[:2]))
    result = runner.invoke(app, ["embed", model, str(source), "--text-field", "sentence",
                                 "--pooling", "cls"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2


def test_bad_input_is_a_one_line_error(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    source = tmp_path / "texts.txt"
    source.write_text("hello\n")
    for arguments, message in [(["--format", "xml"], "format='xml'"),
                               (["--dimensions", "0"], "dimensions"),
                               (["--pooling", "sum"], "'sum' is not one of")]:
        result = runner.invoke(app, ["embed", model, str(source), *arguments])
        assert result.exit_code != 0
        assert message in result.output
    result = runner.invoke(app, ["embed", model, str(tmp_path / "missing.txt")])
    assert result.exit_code == 1 and "does not exist" in result.output


def test_json_prints_a_summary(saved_tiny_mlm, tmp_path):
    source = tmp_path / "texts.txt"
    source.write_text("hello\nworld\n")
    result = runner.invoke(app, ["embed", str(saved_tiny_mlm("bert")), str(source), "-o",
                                 str(tmp_path / "v.npy"), "--format", "npy", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["texts"] == 2 and summary["dimensions"] > 0


def test_sparse_writes_top_k_token_weights(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    source = tmp_path / "texts.txt"
    source.write_text("Return the number of items.\nOpen the file.\n")
    out = tmp_path / "splade.jsonl"
    result = runner.invoke(app, ["embed", model, str(source), "--sparse", "--top-k", "5",
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    expected = mlmkit.embed_sparse(model, ["Return the number of items.", "Open the file."],
                                   top_k=5)
    assert [r["token_ids"] for r in rows] == [e.token_ids for e in expected]
    bad = runner.invoke(app, ["embed", model, str(source), "--sparse", "--format", "npy"])
    assert bad.exit_code == 1 and "--sparse writes JSON lines" in bad.output
