"""Several corpora: --corpus lists and globs, Hugging Face datasets by name, and weighted
mixtures whose draws are a function of (seed, position): exact shares, resume, ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlmkit.corpus import read_corpus
from mlmkit.corpus.mixture import MixedBlocks, parse_corpus_spec, shares
from mlmkit.corpus.packing import BlockBatch, BlockOrder
from mlmkit.errors import MlmkitError

# ---- the --corpus value


def test_spec_lists_weights_and_paths_with_separators(tmp_path):
    odd = tmp_path / "a,b:0.5.txt"  # an existing path is one source, whatever it holds
    odd.write_text("x\n")
    assert [(p.source, p.weight) for p in parse_corpus_spec(str(odd))] == [(str(odd), None)]
    parts = parse_corpus_spec(["a.txt:0.7", "hf:user/set:cfg:3"])
    assert [(p.source, p.weight) for p in parts] == [("a.txt", 0.7), ("hf:user/set:cfg", 3.0)]
    assert [p.source for p in parse_corpus_spec("a.txt:1, data/[a,b]*.txt:2")] == [
        "a.txt", "data/[a,b]*.txt"]  # a comma inside a glob's [...] does not separate
    with pytest.raises(MlmkitError, match=r"'b.txt' has no weight while others do"):
        parse_corpus_spec("a.txt:0.7,b.txt")
    with pytest.raises(MlmkitError, match=r"--corpus 'b.txt:0': the weight 0 must be"):
        parse_corpus_spec(["a.txt:1", "b.txt:0"])
    with pytest.raises(MlmkitError, match="an empty source"):
        parse_corpus_spec("a.txt,,b.txt")


def test_lists_and_globs_are_read_in_order_and_checked_first(tmp_path):
    (tmp_path / "d").mkdir()
    for name, text in (("d/1.txt", "one\ntwo\n"), ("d/2.txt", "three\n"), ("e.txt", "four\n")):
        (tmp_path / name).write_text(text)
    glob = str(tmp_path / "d" / "*.txt")
    expected = ["one", "two", "three", "four"]
    assert list(read_corpus(f"{glob},{tmp_path / 'e.txt'}")) == expected
    assert list(read_corpus([glob, tmp_path / "e.txt"])) == expected
    missing = str(tmp_path / "none" / "*.txt")
    with pytest.raises(MlmkitError, match=r"corpus glob '.*none/\*\.txt' matches no corpus file"):
        read_corpus([glob, missing])  # before any document is read
    with pytest.raises(MlmkitError, match=r"weights \(SOURCE:W\) mix corpora in pretraining"):
        read_corpus(f"{glob}:0.5,{tmp_path / 'e.txt'}:0.5")


# ---- Hugging Face datasets by name (no hub here: a local data folder, and a stub)


def test_hf_name_streams_a_local_dataset_folder(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"text": ["first doc", " ", None, "second"], "n": [1, 2, 3, 4]}),
                   tmp_path / "data" / "train-00000-of-00001.parquet")
    assert list(read_corpus(f"hf:{tmp_path}")) == ["first doc", "second"]
    with pytest.raises(MlmkitError, match=r"has no column 'body'.*choose one with --text-field"):
        list(read_corpus(f"hf:{tmp_path}", field="body"))


def test_hf_name_falls_back_to_the_cache_and_fails_in_one_line(monkeypatch):
    import datasets

    calls = []

    def offline(name, config=None, split=None, streaming=False):
        calls.append((name, config, split, streaming))
        if streaming:
            raise ConnectionError("Couldn't reach 'org/set' on the Hub\nmore lines")
        if name == "org/set":  # in the local cache
            return datasets.Dataset.from_dict({"text": ["cached one", "cached two"]})
        raise FileNotFoundError(name)

    monkeypatch.setattr(datasets, "load_dataset", offline)
    assert list(read_corpus("hf:org/set:small", split="validation")) == ["cached one",
                                                                          "cached two"]
    assert calls == [("org/set", "small", "validation", True),
                     ("org/set", "small", "validation", False)]
    with pytest.raises(MlmkitError) as error:
        list(read_corpus("hf:org/other"))
    assert str(error.value) == (
        "corpus 'hf:org/other': cannot stream the dataset 'org/other' and it is not in the "
        "local cache (Couldn't reach 'org/set' on the Hub); check the name, --split and the "
        "network, or give a local file or a save_to_disk folder")


# ---- weighted mixtures


class _Source:
    """k's blocks: token ids (k, j) so a batch says where each row came from."""

    length = 4

    def __init__(self, k: int, n: int):
        self.k, self.n = k, n

    def __len__(self):
        return self.n

    def __getitem__(self, indices):
        indices = torch.as_tensor(np.asarray(indices))
        assert int(indices.max()) < self.n
        ids = torch.stack([torch.full_like(indices, self.k), indices, indices, indices], 1)
        ones = torch.ones_like(ids)
        return BlockBatch(ids, ones, ones.bool(), ones * 0)


def _mixed(sizes=(50, 7, 20), weights=(0.6, 0.3, 0.1)):
    return MixedBlocks([_Source(k, n) for k, n in enumerate(sizes)], weights,
                       [f"s{k}" for k in range(len(sizes))])


def test_a_pass_has_exact_shares_and_every_block():
    mixed = _mixed()
    n = len(mixed)  # max(50 / 0.6, 7 / 0.3, 20 / 0.1) → 200
    assert n == 200 and mixed.counts == [120, 60, 20] == shares([0.6, 0.3, 0.1], 200)
    batch = mixed[np.arange(n)]
    source, block = batch.input_ids[:, 0], batch.input_ids[:, 1]
    assert torch.bincount(source).tolist() == [120, 60, 20]
    for k, size in enumerate((50, 7, 20)):  # every block seen, a small source repeated
        seen = torch.bincount(block[source == k], minlength=size)
        assert seen.min() >= 1 and seen.max() - seen.min() <= 1


def test_realised_shares_resume_and_ranks():
    mixed = _mixed()
    order = BlockOrder(len(mixed), seed=3)
    rows = [mixed[order.next_indices(16)].input_ids[:, 0] for _ in range(100)]
    drawn = torch.bincount(torch.cat(rows), minlength=3).double() / (16 * 100)
    assert torch.allclose(drawn, torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64),
                          atol=0.02)
    # exact resume: the order's saved position gives the same next rows
    order = BlockOrder(len(mixed), seed=3)
    for _ in range(30):
        order.next_indices(16)
    state, expected = order.state_dict(), mixed[order.next_indices(16)].input_ids
    resumed = BlockOrder(len(mixed), seed=3)
    resumed.load_state_dict(state)
    indices = resumed.next_indices(16)
    assert torch.equal(mixed[indices].input_ids, expected)
    # two ranks read the global rows the one-rank run reads
    halves = [mixed[indices[r::2]].input_ids for r in range(2)]
    assert torch.equal(torch.stack(halves, 1).reshape(16, -1), expected)


def test_a_tiny_share_of_a_huge_corpus_is_refused():
    with pytest.raises(MlmkitError, match=r"--corpus s0:0.0001: so small a share"):
        _mixed(sizes=(1000, 10), weights=(0.0001, 0.9999))


def test_pretrain_build_mixes_the_weighted_corpora(tmp_path, monkeypatch, wordpiece_tokenizer):
    from mlmkit.pretraining.config import PretrainConfig
    from mlmkit.pretraining.data import build_data

    monkeypatch.setenv("MLMKIT_CACHE", str(tmp_path / "cache"))  # the shards of each source
    (tmp_path / "a.txt").write_text("".join(f"alpha text number {i} here\n" for i in range(40)))
    (tmp_path / "b.txt").write_text("".join(f"beta words {i}\n" for i in range(12)))
    config = PretrainConfig(
        model="tiny", seq_len=16, batch_size=8, steps=2,
        corpus=f"{tmp_path / 'a.txt'}:0.75,{tmp_path / 'b.txt'}:0.25", validation_share=0.0,
        eval_every=0, pppl_sentences=0, save_every=0, run_dir=str(tmp_path / "run"),
        progress=False, fill_mask_examples=0, threads=1, precision="fp32")
    data = build_data(config, wordpiece_tokenizer, show_progress=False)
    mixed = data.train
    assert isinstance(mixed, MixedBlocks) and mixed.weights == [0.75, 0.25]
    a, b = (s.n_tokens for s in data.train_shards.parts)
    assert a > 0 and b > 0 and data.train_shards.n_tokens == a + b
    source = mixed.source_of(np.arange(len(mixed)))
    assert np.bincount(source).tolist() == mixed.counts
    assert abs(mixed.counts[0] / len(mixed) - 0.75) < 1 / len(mixed)
    assert f"a.txt 0.75 of {mixed.sizes[0]:,} blocks" in data.describe()


def test_a_mixture_run_resumes_bit_identically(tmp_path, monkeypatch, wordpiece_tokenizer):
    from safetensors.torch import load_file

    from mlmkit.pretraining import pretrain
    from mlmkit.pretraining.config import PretrainConfig

    monkeypatch.setenv("MLMKIT_CACHE", str(tmp_path / "cache"))
    wordpiece_tokenizer.save_pretrained(tmp_path / "tok")
    (tmp_path / "a.txt").write_text("".join(f"alpha text number {i} here\n" for i in range(40)))
    (tmp_path / "b.txt").write_text("".join(f"beta words {i}\n" for i in range(12)))
    base = dict(model="tiny", tokenizer=str(tmp_path / "tok"), seq_len=16, batch_size=4,
                steps=2, corpus=f"{tmp_path / 'a.txt'}:0.6,{tmp_path / 'b.txt'}:0.4",
                eval_every=0, eval_blocks=2, pppl_sentences=0, save_every=0, progress=False,
                validation_share=0.0,
                fill_mask_examples=0, threads=1, precision="fp32")
    pretrain(PretrainConfig(**base, run_dir=str(tmp_path / "straight")))
    halted = pretrain(PretrainConfig(**base, run_dir=str(tmp_path / "cut"), halt_after=1))
    assert halted.interrupted and halted.summary["steps"] == 1
    pretrain(resume=tmp_path / "cut", overrides={"halt_after": None})
    a, b = (load_file(str(tmp_path / name / "final" / "model.safetensors"))
            for name in ("straight", "cut"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_pretrain_cli_repeated_corpus_flags_fail_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from mlmkit.cli import app

    (tmp_path / "a.txt").write_text("alpha beta\n")
    run_dir = tmp_path / "run"
    for corpus, message in (
            ([f"{tmp_path / 'a.txt'}:0.7", str(tmp_path / "a.txt")], "has no weight while"),
            ([str(tmp_path / "none" / "*.txt"), str(tmp_path / "a.txt")],
             "none/*.txt' matches no corpus file")):
        flags = [arg for value in corpus for arg in ("--corpus", value)]
        result = CliRunner().invoke(app, ["pretrain", *flags, "--steps", "1", "--run-dir",
                                          str(run_dir)])
        assert result.exit_code == 1 and result.output.startswith("error: --corpus"
                                                                  if "weight" in message
                                                                  else "error: corpus glob")
        assert message in result.output and result.output.count("\n") == 1
        assert not run_dir.exists()  # refused before anything is written


def test_python_docs_in_a_list_keeps_its_own_splits(tmp_path):
    """Listed with other sources, python-docs gives its own validation split to validation
    and its train split to training, never a hashed share of its training documents."""
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.pretraining.data import corpus_documents

    notes = tmp_path / "notes.txt"
    notes.write_text("".join(f"Note number {i} about files.\n" for i in range(200)))
    corpus = f"{notes}:0.7,python-docs:0.3"
    validation = list(corpus_documents(corpus, "validation")())
    train = list(corpus_documents(corpus, "train")())
    docs_validation, docs_train = python_docs("validation"), python_docs("train")
    assert [t for t in validation if not t.startswith("Note number")] == docs_validation
    assert [t for t in train if not t.startswith("Note number")] == docs_train
    notes_seen = [t for t in validation + train if t.startswith("Note number")]
    assert sorted(notes_seen) == sorted(f"Note number {i} about files." for i in range(200))
