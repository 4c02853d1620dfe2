"""`mlmkit eval sts` and `mlmkit eval retrieval`: the library's figures, as a table or JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.evaluation import evaluate_retrieval, evaluate_sts

sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
from beir_fixture import build_beir  # noqa: E402

runner = CliRunner()


def test_eval_sts_json_equals_the_library(saved_tiny_mlm, shared_data):
    model, data = str(saved_tiny_mlm("bert")), shared_data / "stsb" / "validation.tsv"
    result = runner.invoke(app, ["eval", "sts", model, str(data), "--limit", "50",
                                 "--pooling", "cls", "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    expected = evaluate_sts(model, data, limit=50, pooling="cls")
    assert got == pytest.approx(expected.to_dict(), abs=1e-12)


def test_eval_retrieval_table_and_run_file(saved_tiny_mlm, shared_data, tmp_path):
    beir = build_beir(shared_data / "stsb", tmp_path / "beir", queries=10, distractors=10)
    model = str(saved_tiny_mlm("bert"))
    files = ["--corpus", str(beir / "corpus.jsonl"), "--queries", str(beir / "queries.jsonl"),
             "--qrels", str(beir / "qrels")]
    result = runner.invoke(app, ["eval", "retrieval", model, *files, "--run",
                                 str(tmp_path / "run.trec"), "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    expected = evaluate_retrieval(model, beir / "corpus.jsonl", beir / "queries.jsonl",
                                  beir / "qrels")
    assert got == pytest.approx(expected.to_dict(), abs=1e-12)
    assert len((tmp_path / "run.trec").read_text().splitlines()) == 10 * 30
    table = runner.invoke(app, ["eval", "retrieval", model, *files])
    assert table.exit_code == 0 and "ndcg@10" in table.stdout


def test_eval_sts_bad_data_is_one_line(saved_tiny_mlm, tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"sentence1": "a", "sentence2": "b"}) + "\n")
    result = runner.invoke(app, ["eval", "sts", str(saved_tiny_mlm("bert")), str(data)])
    assert result.exit_code == 1
    assert "has no 'score' field" in result.output
