"""`mlmkit score`, `mlmkit rescore`, `mlmkit eval blimp`, and sharded scoring under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.errors import MlmkitError

TEXTS = ["Return the number of items in a container.", "", "Open the file for reading.",
         "Raise an error when the value is negative.", "   ", "The module defines a class."]




@pytest.fixture
def texts_file(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_score_text_file(saved_tiny_mlm, texts_file, tmp_path):
    model = saved_tiny_mlm("bert")
    out = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(app, ["score", str(model), str(texts_file), "-o", str(out),
                                      "--per-word", "--chunk-texts", "2", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    records = _records(out)
    assert [r["line"] for r in records] == list(range(1, len(TEXTS) + 1))
    assert [r["pll"] is None for r in records] == [not t.strip() for t in TEXTS]
    assert "2 empty" in result.output
    expected = mlmkit.score(mlmkit.load_mlm(model, device="cpu"), TEXTS[0])
    assert records[0]["pll"] == pytest.approx(expected.pll, abs=1e-5)
    assert records[0]["words"][0]["word"] == "Return"
    assert not list(tmp_path.glob(".scores.jsonl*"))  # no temporary file left behind


def test_score_jsonl_field_and_bad_input(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"sentence": TEXTS[0]}) + "\n" + json.dumps({"other": 1}) + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", model, str(data), "-o", str(out),
                                      "--field", "sentence"])
    assert isinstance(result.exception, MlmkitError) and "line 2" in str(result.exception)
    assert not out.exists()
    missing = subprocess.run([sys.executable, "-m", "mlmkit", "score", model, "nope.txt", "-o",
                              str(out)], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "nope.txt" in missing.stderr


def test_rescore_and_blimp_commands(saved_tiny_mlm, tmp_path, shared_data):
    model = str(saved_tiny_mlm("bert"))
    nbest = tmp_path / "nbest.json"
    nbest.write_text(json.dumps({
        "u1": {"hyp_1": {"score": -1.0, "text": TEXTS[0]},
               "hyp_2": {"score": -9.0, "text": TEXTS[2]}, "ref": TEXTS[0]},
        "u2": {"hyp_1": {"score": -2.0, "text": TEXTS[3]}, "ref": TEXTS[3]},
    }))
    rescored, best = tmp_path / "rescored.json", tmp_path / "best.tsv"
    result = CliRunner().invoke(app, ["rescore", model, str(nbest), "--weight", "0",
                                      "-o", str(rescored), "--one-best", str(best), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["wer_before"] == summary["wer_after"] == 0.0
    assert best.read_text() == f"u1\t{TEXTS[0]}\nu2\t{TEXTS[3]}\n"
    assert json.loads(rescored.read_text())["u1"]["hyp_1"]["text"] == TEXTS[0]
    out = tmp_path / "blimp.json"
    result = CliRunner().invoke(app, ["eval", "blimp", model, "--data",
                                      str(shared_data / "blimp"), "--limit", "2", "--paradigm",
                                      "passive_1", "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "passive_1" in result.output and json.loads(out.read_text())["n_pairs"] == 2


def test_torchrun_two_ranks_merge_in_order(saved_tiny_mlm, texts_file, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    single, sharded = tmp_path / "single.jsonl", tmp_path / "sharded.jsonl"
    assert CliRunner().invoke(app, ["score", model, str(texts_file), "-o", str(single),
                                    "--device", "cpu"]).exit_code == 0
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, MLMKIT_DIST_TIMEOUT="60", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "mlmkit", "score",
         model, str(texts_file), "-o", str(sharded), "--device", "cpu", "--chunk-texts", "2"],
        capture_output=True, text=True, timeout=240, env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got, want = _records(sharded), _records(single)
    assert [r["line"] for r in got] == [r["line"] for r in want]
    for a, b in zip(got, want, strict=True):
        assert (a["pll"] is None) == (b["pll"] is None)
        if a["pll"] is not None:
            assert a["pll"] == pytest.approx(b["pll"], abs=1e-5)
    assert not list(tmp_path.glob(".sharded.jsonl*"))
