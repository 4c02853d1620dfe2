"""`mlmkit score`, `mlmkit rescore`, `mlmkit eval blimp`, and sharded scoring under torchrun."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app

TEXTS = ["Return the number of items in a container.", "", "Open the file for reading.",
         "Raise an error when the value is negative.", "   ", "The module defines a class."]


@pytest.fixture
def texts_file(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _one_line_error(result, *needles):
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def test_score_text_file(saved_tiny_mlm, texts_file, tmp_path):
    model = saved_tiny_mlm("bert")
    out = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(app, ["score", str(model), str(texts_file), "-o", str(out),
                                      "--per-word", "--chunk-texts", "2", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # status and warnings on stderr only
    records = _records(out)
    assert [r["line"] for r in records] == list(range(1, len(TEXTS) + 1))
    assert [r["pll"] is None for r in records] == [not t.strip() for t in TEXTS]
    assert "2 empty" in result.stderr and "scored 6 line(s)" in result.stderr
    expected = mlmkit.score(mlmkit.load_mlm(model, device="cpu"), TEXTS[0])
    assert records[0]["pll"] == pytest.approx(expected.pll, abs=1e-5)
    assert records[0]["words"][0]["word"] == "Return" and records[0]["n_unk"] == 0
    assert not list(tmp_path.glob(".scores.jsonl*"))  # no temporary file left behind


def test_score_stdin_to_stdout_and_json_summary(saved_tiny_mlm, texts_file, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    piped = CliRunner().invoke(app, ["score", model, "-", "--device", "cpu", "--json"],
                               input=texts_file.read_text())
    assert piped.exit_code == 0, piped.output
    rows = [json.loads(line) for line in piped.stdout.splitlines()]
    assert [r["text"] for r in rows] == TEXTS
    summary = json.loads(piped.stderr.strip().splitlines()[-1])
    assert summary["texts"] == 6 and summary["empty"] == 2
    out = tmp_path / "s.jsonl"
    to_file = CliRunner().invoke(app, ["score", model, str(texts_file), "-o", str(out),
                                       "--json", "--device", "cpu"])
    assert json.loads(to_file.stdout)["output"] == str(out)
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows


@pytest.mark.slow
def test_score_into_a_closed_pipe_has_no_traceback(saved_tiny_mlm, tmp_path, mlmkit_command):
    model = str(saved_tiny_mlm("bert"))
    many = tmp_path / "many.txt"
    many.write_text("Open the file for reading and return its lines.\n" * 400)
    done = subprocess.run(
        f"{shlex.join(mlmkit_command)} score {model} - -o - --chunk-texts 20 --device cpu "
        f"< {many} | head -n 2", shell=True, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, MLMKIT_THREADS="1"))
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 2
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


def test_score_input_errors_are_one_line(saved_tiny_mlm, tmp_path, mlmkit_command):
    model = str(saved_tiny_mlm("bert"))
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"sentence": TEXTS[0]}) + "\n" + json.dumps({"other": 1}) + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", model, str(data), "-o", str(out),
                                      "--text-field", "sentence"])
    _one_line_error(result, "line 2", "--text-field")
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl*"))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Open the file.\nRead the café menu.\n".encode("latin-1"))
    result = CliRunner().invoke(app, ["score", model, str(latin), "-o", str(out)])
    _one_line_error(result, "byte offset 27 (line 2)", "--encoding")
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl*"))
    result = CliRunner().invoke(app, ["score", model, str(latin), "-o", str(out),
                                      "--encoding", "latin-1", "--device", "cpu"])
    assert result.exit_code == 0 and _records(out)[1]["text"] == "Read the café menu."
    missing = subprocess.run([*mlmkit_command, "score", model, "nope.txt", "-o", str(out)],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "nope.txt" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_score_output_paths_are_checked_before_work(saved_tiny_mlm, texts_file, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    before = texts_file.read_bytes()
    result = CliRunner().invoke(app, ["score", model, str(texts_file), "-o", str(texts_file)])
    _one_line_error(result, "also an input")
    assert texts_file.read_bytes() == before
    result = CliRunner().invoke(app, ["score", model, str(texts_file), "-o", str(tmp_path)])
    _one_line_error(result, "is a directory")
    result = CliRunner().invoke(app, ["score", model, str(texts_file), "-o",
                                      str(texts_file / "out.jsonl")])
    _one_line_error(result, "is a file, not a directory")
    assert texts_file.read_bytes() == before


@pytest.mark.parametrize("flag,value", [("--batch-tokens", "0"), ("--stride", "0"),
                                        ("--chunk-texts", "0"), ("--metric", "ppl"),
                                        ("--precision", "fp16"), ("--threads", "0"),
                                        ("--seed", "-1")])
def test_score_numeric_and_choice_options_are_range_checked(saved_tiny_mlm, texts_file, flag,
                                                            value):
    result = CliRunner().invoke(app, ["score", str(saved_tiny_mlm("bert")), str(texts_file),
                                      flag, value])
    assert result.exit_code in (1, 2), result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("command", ["score", "rescore", "eval blimp"])
def test_a_missing_cuda_lists_the_devices(saved_tiny_mlm, texts_file, command):
    model = str(saved_tiny_mlm("bert"))
    args = {"score": [model, str(texts_file)], "rescore": [model, str(texts_file)],
            "eval blimp": [model, str(texts_file)]}[command]
    result = CliRunner().invoke(app, [*command.split(), *args, "--device", "cuda"])
    line = _one_line_error(result, "'cuda'", "cpu")
    assert "not on this machine" in line


def test_an_electra_discriminator_is_refused_by_score(tiny_mlm, texts_file, tmp_path):
    import transformers

    mlm = tiny_mlm("electra")
    path = tmp_path / "discriminator"
    transformers.ElectraForPreTraining(mlm.model.config).save_pretrained(path)
    mlm.tokenizer.save_pretrained(path)
    result = CliRunner().invoke(app, ["score", str(path), str(texts_file)])
    _one_line_error(result, "no trained MLM head", "--allow-untrained-head")
    allowed = CliRunner().invoke(app, ["score", str(path), str(texts_file),
                                       "--allow-untrained-head", "--device", "cpu"])
    assert allowed.exit_code == 0, allowed.output


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
    summary = json.loads(result.stdout)
    assert summary["wer_before"] == summary["wer_after"] == 0.0
    assert best.read_text() == f"u1\t{TEXTS[0]}\nu2\t{TEXTS[3]}\n"
    assert json.loads(rescored.read_text())["u1"]["hyp_1"]["text"] == TEXTS[0]
    to_stdout = CliRunner().invoke(app, ["rescore", model, "-", "-o", "-"],
                                   input=nbest.read_text())
    assert to_stdout.exit_code == 0, to_stdout.output
    assert json.loads(to_stdout.stdout)["u2"]["hyp_1"]["text"] == TEXTS[3]
    out = tmp_path / "blimp.json"
    result = CliRunner().invoke(app, ["eval", "blimp", model, str(shared_data / "blimp"), "--limit", "2", "--paradigm",
                                      "passive_1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "passive_1" in result.stdout and json.loads(out.read_text())["n_pairs"] == 2
    as_json = CliRunner().invoke(app, ["eval", "blimp", model, str(shared_data / "blimp"), "--limit", "2",
                                       "--paradigm", "passive_1", "--json"])
    assert json.loads(as_json.stdout) == json.loads(out.read_text())


@pytest.mark.parametrize("weight", ["nan", "inf", "-inf", "1e9"])
def test_rescore_refuses_bad_weights(saved_tiny_mlm, tmp_path, weight):
    nbest = tmp_path / "nbest.tsv"
    nbest.write_text(f"u1\t-1\t{TEXTS[0]}\n")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["rescore", str(saved_tiny_mlm("bert")), str(nbest),
                                      "--weight", weight, "-o", str(out)])
    _one_line_error(result, "weight")
    assert not out.exists()


def test_rescore_and_blimp_refuse_an_output_equal_to_an_input(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    nbest = tmp_path / "nbest.tsv"
    nbest.write_text(f"u1\t-1\t{TEXTS[0]}\n")
    before = nbest.read_bytes()
    for flag in ("-o", "--one-best"):
        result = CliRunner().invoke(app, ["rescore", model, str(nbest), flag, str(nbest)])
        _one_line_error(result, "also an input")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "A cat.", "sentence_bad": "A cats."}) + "\n")
    result = CliRunner().invoke(app, ["eval", "blimp", model, str(pairs), "-o",
                                      str(pairs)])
    _one_line_error(result, "also an input")
    assert nbest.read_bytes() == before
    result = CliRunner().invoke(app, ["eval", "blimp", model, str(pairs), "--limit",
                                      "0"])
    _one_line_error(result, "limit")


@pytest.mark.slow
def test_torchrun_two_ranks_merge_in_order(saved_tiny_mlm, texts_file, tmp_path, mlmkit_command):
    model = str(saved_tiny_mlm("bert"))
    single, sharded = tmp_path / "single.jsonl", tmp_path / "sharded.jsonl"
    assert CliRunner().invoke(app, ["score", model, str(texts_file), "-o", str(single),
                                    "--device", "cpu"]).exit_code == 0
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, MLMKIT_DIST_TIMEOUT="60", OMP_NUM_THREADS="1", MLMKIT_THREADS="1")
    run = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", "--no-python", *mlmkit_command,
         "score", model, str(texts_file), "-o", str(sharded), "--device", "cpu", "--chunk-texts", "2"],
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


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_score_an_input_without_text_is_an_error_and_writes_nothing(saved_tiny_mlm, tmp_path,
                                                                    content):
    model = str(saved_tiny_mlm("bert"))
    blank = tmp_path / "blank.txt"
    blank.write_text(content)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", model, str(blank), "-o", str(out)])
    _one_line_error(result, "holds no text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt"]
    piped = CliRunner().invoke(app, ["score", model, "-"], input=content)
    _one_line_error(piped, "standard input holds no text")
    assert piped.stdout == ""


def test_a_stride_past_the_window_is_one_line_not_a_traceback(saved_tiny_mlm, tmp_path):
    """A long text scored in windows that start at multiples of --stride: a stride past the
    window left tokens in no window (an IndexError, or a score read at a wrong column)."""
    long = tmp_path / "long.txt"
    long.write_text(" ".join(TEXTS) * 40 + "\n" + TEXTS[0] + "\n")
    result = CliRunner().invoke(app, ["score", str(saved_tiny_mlm("bert")), str(long),
                                      "--stride", "100000", "-o", str(tmp_path / "out.jsonl")])
    line = _one_line_error(result, "stride=100000 (--stride)", "use a stride of at most")
    assert line.startswith("error: stride=100000")


def test_score_reduction_mean_in_the_records(saved_tiny_mlm, texts_file, tmp_path):
    out = tmp_path / "mean.jsonl"
    path = str(saved_tiny_mlm("bert"))
    result = CliRunner().invoke(app, ["score", path, str(texts_file), "--reduction", "mean",
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    records = _records(out)
    assert [r["reduction"] for r in records] == ["mean"] * len(TEXTS)
    scored = [r for r in records if r["pll"] is not None]
    assert scored and all(abs(r["score"] - r["pll"] / r["n_tokens"]) < 1e-9 for r in scored)
    bad = CliRunner().invoke(app, ["score", path, str(texts_file), "--reduction", "max"])
    assert bad.exit_code in (1, 2) and "max" in bad.stderr
