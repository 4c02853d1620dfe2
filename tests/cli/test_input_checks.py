"""Inputs that an outside audit found mishandled: each now a one-line error naming the input
(or a word on stderr), before the work it would have wasted."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mlmkit.cli import app


def _run(*args, input=None):
    return CliRunner().invoke(app, [str(a) for a in args], input=input)


def test_a_wrong_encoding_without_a_reason_is_one_line(saved_tiny_mlm, tmp_path):
    """UTF-16 asked of a file without a byte-order mark raised an AttributeError."""
    texts = tmp_path / "t.txt"
    texts.write_text("one line\nanother line\nand a third\n")
    result = _run("score", saved_tiny_mlm("bert"), texts, "--encoding", "utf-16",
                  "--threads", "1")
    assert result.exit_code == 1, result.output
    assert "is not valid utf-16" in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_embed_names_its_file_and_line(saved_tiny_mlm, tmp_path):
    """--sparse -o x.npy wrote JSON lines into it; an empty file was called standard input;
    a text too long for the model was named by its place in its chunk, after the work."""
    model = saved_tiny_mlm("bert")
    texts = tmp_path / "t.txt"
    texts.write_text("a short line\n" * 5 + " ".join(["word"] * 400) + "\n")
    sparse = _run("embed", model, texts, "--sparse", "-o", tmp_path / "x.npy")
    assert sparse.exit_code == 1 and "--sparse writes JSON lines, not an npy" in sparse.stderr
    assert not (tmp_path / "x.npy").exists()
    ignored = _run("embed", model, texts, "--sparse", "--pooling", "cls", "--dimensions", "8")
    assert ignored.exit_code == 1
    assert "--pooling, --dimensions shape dense vectors: leave them out" in ignored.stderr
    long = _run("embed", model, texts, "-o", tmp_path / "v.npy", "--chunk-texts", "2",
                "--threads", "1")
    assert long.exit_code == 1
    assert f"'{texts}' line 6 has " in long.stderr
    assert "tokens, more than the model's 128" in long.stderr
    (tmp_path / "empty.txt").write_text("")
    empty = _run("embed", model, tmp_path / "empty.txt", "--threads", "1")
    assert empty.exit_code == 1 and "empty.txt' holds no text" in empty.stderr


def test_blimp_refuses_a_paradigm_it_does_not_have(saved_tiny_mlm, shared_data):
    """An unknown paradigm beside a known one was dropped without a word."""
    result = _run("eval", "blimp", saved_tiny_mlm("bert"), shared_data / "blimp",
                  "--paradigm", "causative", "--paradigm", "nope", "--limit", "2",
                  "--threads", "1")
    assert result.exit_code == 1
    assert "no minimal pairs of paradigm(s) 'nope'" in result.stderr
    empty = _run("eval", "blimp", saved_tiny_mlm("bert"), "")
    assert empty.exit_code == 1 and "minimal-pair data '' is empty" in empty.stderr


def test_prompt_files_are_read_by_their_format_and_blank_lines_said(saved_tiny_mlm, tmp_path):
    """`generate --file x.jsonl` took each JSON line as a prompt; `infill --file` dropped
    blank lines silently, so its outputs no longer matched the lines."""
    model = saved_tiny_mlm("bert")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"text": "the cat"}) + "\n")
    result = _run("generate", model, "--file", prompts, "--length", "2", "--json",
                  "--threads", "1", "--seed", "0")
    assert result.exit_code == 0, result.output
    assert "{" not in json.loads(result.stdout.splitlines()[0])["prompt"]
    templates = tmp_path / "t.txt"
    templates.write_text("the [MASK] sat\n\non the [MASK]\n")
    result = _run("infill", model, "--file", templates, "--threads", "1", "--seed", "0")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.strip().splitlines()) == 2
    assert "1 blank line(s) of" in result.stderr and "one output per template" in result.stderr


def test_crows_of_one_pair_prints_without_a_gaussian(saved_tiny_mlm, shared_data):
    """One pair printed its tables, then failed on the Gaussian fit (exit 1)."""
    result = _run("bias", "crows", saved_tiny_mlm("bert"),
                  shared_data / "crows_pairs" / "crows_pairs_anonymized.csv", "--limit", "1",
                  "--bootstrap", "0", "--threads", "1")
    assert result.exit_code == 0, result.output
    assert "Gaussian fits: need at least 2 pairs" in result.stdout
