"""Streaming file scoring: chunking does not change results; inputs are checked line by line."""

from __future__ import annotations

import json

import pytest

import mlmkit
from mlmkit.errors import MlmkitError
from mlmkit.scoring.stream import count_lines, read_texts, score_file


def test_chunks_do_not_change_scores(tiny_mlm, tmp_path):
    mlm = tiny_mlm("bert")
    texts = ["Open the file.", "", "Close it again.", "Read a line.", "Write two lines."]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    assert count_lines(source) == 5
    out_small, out_big = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with pytest.warns(UserWarning, match="1 empty"):
        summary = score_file(mlm, source, out_small, chunk_texts=2)
    with pytest.warns(UserWarning, match="1 empty"):
        score_file(mlm, source, out_big, chunk_texts=100)
    small = [json.loads(x) for x in out_small.read_text().splitlines()]
    big = [json.loads(x) for x in out_big.read_text().splitlines()]
    assert summary.texts == 5 and summary.empty == 1 and summary.first_empty_line == 2
    assert [r["text"] for r in small] == texts
    for a, b in zip(small, big, strict=True):
        assert (a["pll"] is None and b["pll"] is None) or a["pll"] == pytest.approx(b["pll"],
                                                                                    abs=1e-5)
    assert small[2]["pll"] == pytest.approx(mlmkit.score(mlm, texts[2]).pll, abs=1e-5)


def test_input_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a"}\n{"text": 3}\n')
    with pytest.raises(MlmkitError, match="line 2"):
        list(read_texts(bad))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "a"}\n\n{"text": \n')
    with pytest.raises(MlmkitError, match="line 3.*invalid JSON"):
        list(read_texts(broken))
    with pytest.raises(MlmkitError, match="does not exist"):
        list(read_texts(tmp_path / "missing.txt"))
    plain = tmp_path / "plain.txt"
    plain.write_text("one\n\nthree")
    assert list(read_texts(plain)) == [(1, "one"), (2, ""), (3, "three")]
    assert count_lines(plain) == 3


def test_read_texts_errors_speak_json_and_explain_field_on_plain_text(tmp_path):
    """A null text was 'holds a NoneType'; --text-field on a plain text file blamed the file for
    not being JSONL without saying that --text-field asked for it."""
    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "ok"}\n{"text": null}\n', encoding="utf-8")
    with pytest.raises(MlmkitError, match=r"line 2: field 'text' holds null, not a string"):
        list(read_texts(path))
    plain = tmp_path / "texts.txt"
    plain.write_text("A plain line.\n", encoding="utf-8")
    with pytest.raises(MlmkitError, match=r"line 1: invalid JSON .*; --text-field 'text' reads "
                                          r"JSONL .* leave --text-field out"):
        list(read_texts(plain, field="text"))


def test_a_unicode_line_separator_in_a_text_keeps_its_record_on_one_line(tiny_mlm, tmp_path):
    """U+2028 / U+2029 / U+0085 inside a text were written raw: str.splitlines() (and many
    JSONL readers) cut the record in two. Escaped, the JSON is the same."""
    texts = ["one\u2028two", "three\u0085four\u2029five"]
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    score_file(tiny_mlm("bert"), source, out, progress=False)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["text"] for line in lines] == texts
    assert mlmkit.core.results.dumps({"t": texts[0]}) == '{"t": "one\\u2028two"}'
