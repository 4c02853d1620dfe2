"""`mlmkit score --shard I/N` scores every N-th piece of the input, resumably; `mlmkit score
merge` joins the shards into the very file a single run writes, and refuses shards that
do not make up one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.corpus.python_docs import python_docs

CHUNK = 4
N_TEXTS = 30  # 8 pieces: 4, 4, 4, 4, 4, 4, 4, 2 lines


def _score(model, texts, out, *extra):
    result = CliRunner().invoke(app, ["score", str(model), str(texts), "-o", str(out),
                                      "--chunk-texts", str(CHUNK), "--device", "cpu",
                                      "--threads", "1", *extra])
    assert result.exit_code == 0, result.output
    return result


def _one_line_error(result, *needles):
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def scored(saved_tiny_mlm, tmp_path_factory):
    """One single run and three shards of the same input."""
    folder = tmp_path_factory.mktemp("shards")
    texts = [t.replace("\n", " ")[:40] for t in python_docs("validation")[:N_TEXTS]]
    texts[6] = ""  # an empty line is a record too
    source = folder / "texts.txt"
    source.write_text("\n".join(texts) + "\n")
    model = saved_tiny_mlm("bert")
    single = folder / "single.jsonl"
    _score(model, source, single)
    shards = [folder / f"part{i}.jsonl" for i in range(3)]
    for i, path in enumerate(shards):
        _score(model, source, path, "--shard", f"{i}/3")
    return {"model": model, "source": source, "single": single, "shards": shards,
            "folder": folder}


def test_a_shard_scores_every_nth_piece(scored):
    lines = [[json.loads(r)["line"] for r in p.read_text().splitlines()]
             for p in scored["shards"]]
    # pieces of 4 lines: shard 0 holds pieces 0, 3, 6; shard 1: 1, 4, 7; shard 2: 2, 5
    assert lines[0] == [*range(1, 5), *range(13, 17), *range(25, 29)]
    assert lines[1] == [*range(5, 9), *range(17, 21), 29, 30]
    assert lines[2] == [*range(9, 13), *range(21, 25)]
    info = json.loads(Path(str(scored["shards"][1]) + ".shard.json").read_text())
    assert (info["shard"], info["of"], info["records"], info["input_lines"]) == (1, 3, 10, 30)


def test_merged_shards_equal_a_single_run_byte_for_byte(scored, tmp_path):
    merged = tmp_path / "merged.jsonl"
    shards = [str(p) for p in reversed(scored["shards"])]  # any order
    result = CliRunner().invoke(app, ["score", "merge", *shards, "-o", str(merged), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"output": str(merged), "shards": 3, "lines": 30}
    assert merged.read_bytes() == scored["single"].read_bytes()


def test_a_killed_shard_resumes_without_rescoring_its_finished_pieces(scored, tmp_path,
                                                                      monkeypatch):
    import mlmkit.scoring.stream as stream

    out = tmp_path / "part1.jsonl"
    real, calls = stream.score, []

    def interrupted(mlm, texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 2:  # killed while scoring the shard's second piece
            raise KeyboardInterrupt
        return real(mlm, texts, **kwargs)

    monkeypatch.setattr(stream, "score", interrupted)
    kwargs = dict(chunk_texts=CHUNK, device="cpu", threads=1, shard="1/3", progress=False)
    with pytest.raises(KeyboardInterrupt):
        stream.score_file(str(scored["model"]), scored["source"], out, **kwargs)
    assert not out.exists()
    calls.clear()
    monkeypatch.setattr(stream, "score", lambda mlm, texts, **kw: (calls.append(len(texts)),
                                                                    real(mlm, texts, **kw))[1])
    with pytest.warns(UserWarning, match="1 empty"):  # line 7, reported again
        summary = stream.score_file(str(scored["model"]), scored["source"], out, **kwargs)
    assert summary.resumed_lines == 4 and calls == [4, 2]  # pieces 4 and 7 only
    assert out.read_bytes() == scored["shards"][1].read_bytes()


def test_merge_refuses_what_is_not_one_complete_run(scored, tmp_path):
    first, second, third = (str(p) for p in scored["shards"])
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    _one_line_error(runner.invoke(app, ["score", "merge", first, third, "-o", str(out)]),
                    "1/3", "missing")
    _one_line_error(runner.invoke(app, ["score", "merge", first, first, second, third, "-o",
                                        str(out)]), "given twice")
    other = tmp_path / "other0.jsonl"  # another piece size: another run
    _score(scored["model"], scored["source"], other, "--shard", "0/3", "--chunk-texts", "5")
    _one_line_error(runner.invoke(app, ["score", "merge", str(other), second, third, "-o",
                                        str(out)]), "not a shard of the same run")
    _one_line_error(runner.invoke(app, ["score", "merge", str(scored["single"]), "-o",
                                        str(out)]), "shard.json")
    assert not out.exists()
    bad = runner.invoke(app, ["score", str(scored["model"]), str(scored["source"]), "-o",
                              str(out), "--shard", "3/3"])
    _one_line_error(bad, "--shard 3/3")


def test_a_shard_counts_its_own_lines_and_blank_lines(scored, tmp_path):
    """Line 7 (blank) is in piece 1, so shard 1/3 reports it and shard 0/3 does not; each
    reports the records it wrote, not the input's 30 lines."""
    summaries = []
    for i in (0, 1):
        result = _score(scored["model"], scored["source"], tmp_path / f"p{i}.jsonl",
                        "--shard", f"{i}/3", "--json")
        summaries.append(json.loads(result.stdout.strip().splitlines()[-1]))
        assert ("warning: 1 empty" in result.stderr) == (i == 1), result.stderr
    assert [(s["texts"], s["empty"], s["first_empty_line"]) for s in summaries] == \
        [(12, 0, None), (10, 1, 7)]
