"""`embed_file` and `mlmkit embed --shard I/N` / `embed merge`: a file embedded by chunks in
constant memory; a killed run resumes to the very file an uninterrupted one writes; N
shards merge into it, JSON lines or .npy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.embeddings import embed_file, merge_shards
from mlmkit.embeddings import file_job as embed_file_module
from mlmkit.errors import InvalidArgument, InvalidData, PathError

runner = CliRunner()
TEXTS = [f"Line {i}: " + " ".join(["open the file"] * (i % 4 + 1)) for i in range(23)]
TEXTS[6] = ""  # a blank line is the empty text: row 7 still exists


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


@pytest.mark.parametrize("suffix", ["npy", "jsonl"])
def test_a_file_embeds_by_chunks_to_the_librarys_vectors(tiny_mlm, corpus, tmp_path, suffix):
    mlm = tiny_mlm("bert")
    out = tmp_path / f"vectors.{suffix}"
    summary = embed_file(mlm, corpus, out, chunk_texts=5, pooling="mean", normalize=True,
                         progress=False)
    got = (np.load(out) if suffix == "npy" else
           np.array([json.loads(line)["embedding"] for line in out.read_text().splitlines()]))
    assert got.shape == (len(TEXTS), 128) and summary.texts == len(TEXTS)
    assert np.abs(got - mlmkit.embed(mlm, TEXTS, normalize=True)).max() < 1e-6
    assert not list(tmp_path.glob(".*partial"))  # renamed into place


@pytest.mark.parametrize("suffix", ["npy", "jsonl"])
def test_a_killed_run_resumes_to_the_uninterrupted_file(tiny_mlm, corpus, tmp_path,
                                                        monkeypatch, suffix):
    mlm = tiny_mlm("bert")
    whole = tmp_path / f"whole.{suffix}"
    embed_file(mlm, corpus, whole, chunk_texts=4, progress=False)
    out = tmp_path / f"vectors.{suffix}"
    real, calls = embed_file_module.embed, []

    def dies_on_the_third_chunk(mlm, texts, **kwargs):
        if texts:  # an empty call checks the options before the input is read
            calls.append(len(texts))
            if len(calls) == 3:
                raise KeyboardInterrupt
        return real(mlm, texts, **kwargs)

    monkeypatch.setattr(embed_file_module, "embed", dies_on_the_third_chunk)
    with pytest.raises(KeyboardInterrupt), pytest.warns(UserWarning, match="resumes"):
        embed_file(mlm, corpus, out, chunk_texts=4, progress=False)
    assert not out.exists() and len(list(tmp_path.glob(f".{out.name}.*.partial"))) == 1
    monkeypatch.setattr(embed_file_module, "embed", real)
    summary = embed_file(mlm, corpus, out, chunk_texts=4, progress=False)
    assert summary.resumed_texts == 8
    assert out.read_bytes() == whole.read_bytes()


@pytest.mark.parametrize("suffix", ["npy", "jsonl"])
def test_merged_shards_equal_one_run_byte_for_byte(saved_tiny_mlm, corpus, tmp_path, suffix):
    model = str(saved_tiny_mlm("bert"))
    single = tmp_path / f"single.{suffix}"
    assert runner.invoke(app, ["embed", model, str(corpus), "-o", str(single),
                               "--chunk-texts", "3"]).exit_code == 0
    parts = [tmp_path / f"part{i}.{suffix}" for i in range(3)]
    for index, part in enumerate(parts):
        result = runner.invoke(app, ["embed", model, str(corpus), "-o", str(part),
                                     "--chunk-texts", "3", "--shard", f"{index}/3"])
        assert result.exit_code == 0, result.output
    assert sum(len(np.load(p)) if suffix == "npy" else len(p.read_text().splitlines())
               for p in parts) == len(TEXTS)
    merged = tmp_path / f"merged.{suffix}"
    result = runner.invoke(app, ["embed", "merge", *map(str, reversed(parts)), "-o",
                                 str(merged), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"output": str(merged), "shards": 3,
                                         "lines": len(TEXTS)}
    assert merged.read_bytes() == single.read_bytes()


def test_what_cannot_be_a_shard_or_a_merge_is_refused(tiny_mlm, corpus, tmp_path):
    mlm = tiny_mlm("bert")
    parts = [tmp_path / f"part{i}.npy" for i in range(2)]
    for index, part in enumerate(parts):
        embed_file(mlm, corpus, part, chunk_texts=5, shard=(index, 2), progress=False)
    with pytest.raises(InvalidArgument, match="1/2 missing"):
        merge_shards([parts[0]], tmp_path / "out.npy")
    other = tmp_path / "other.npy"  # another width: another run
    embed_file(mlm, corpus, other, chunk_texts=5, shard=(1, 2), dimensions=8, progress=False)
    with pytest.raises(InvalidData, match="not a shard of the same run"):
        merge_shards([parts[0], other], tmp_path / "out.npy")
    with pytest.raises(PathError, match="a shard reads a file and writes a file"):
        embed_file(mlm, corpus, "-", shard="0/2")
    with pytest.raises(InvalidArgument, match="--shard 2/2"):
        embed_file(mlm, corpus, tmp_path / "x.npy", shard="2/2")
    result = runner.invoke(app, ["embed", "x", "--text", "a", "--shard", "0/2"])
    assert result.exit_code != 0 and "--shard splits an input file" in result.output
    assert not (tmp_path / "out.npy").exists()


def test_chunk_and_shard_flags_are_refused_before_a_model_loads(corpus):
    """A model path that does not exist would fail the load: the flag's error comes first."""
    for command in ("embed", "score"):
        bad_shard = runner.invoke(app, [command, "no-such-model", str(corpus), "--shard", "2/2",
                                        "-o", "x.jsonl"])
        assert bad_shard.exit_code != 0 and "--shard 2/2" in bad_shard.output
        bad_chunk = runner.invoke(app, [command, "no-such-model", str(corpus), "--chunk-texts",
                                        "0", "-o", "x.jsonl"])
        assert bad_chunk.exit_code != 0 and "--chunk-texts" in bad_chunk.output
