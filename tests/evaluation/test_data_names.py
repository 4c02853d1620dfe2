"""Data names for the embedding evaluations (stsb, scifact, nanobeir/SET and their hub
names): `mlmkit data fetch` writes the files `eval sts` / `eval retrieval` / the suite read,
a name is fetched the first time where the hub is reachable, a path that exists wins, and
offline the error says how to fetch it and what to pass instead.

The hub is `datasets.load_dataset` replaced by a few rows in the hub sets' own layouts:
mteb/stsbenchmark-sts (sentence1, sentence2, score; train/validation/test), BeIR/scifact
(configs corpus and queries, split named after the config) with BeIR/scifact-qrels (split
test), and the NanoBEIR sets (configs corpus, queries, qrels, split train; qrels without a
score column)."""

from __future__ import annotations

import json

import datasets
import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.core import hub
from mlmkit.errors import InvalidArgument, PathError
from mlmkit.evaluation import (
    data_names,
    evaluate_retrieval,
    evaluate_sts,
    evaluate_suite,
    suite_data,
)
from mlmkit.evaluation.retrieval import read_beir_folder
from mlmkit.evaluation.sts import read_sts_pairs

runner = CliRunner()

STS = {split: {"sentence1": [f"A man plays the {w}.", "A dog\truns\nfast.", "Kids sing."],
               "sentence2": [f"Someone plays a {w}.", "A dog is running.", "A cat sleeps."],
               "score": [4.5, 3.8, 0.25], "genre": ["main-news"] * 3}
       for split, w in (("train", "flute"), ("validation", "guitar"), ("test", "piano"))}
CORPUS = {"_id": ["d1", "d2", "d3"], "title": ["Cells", "", "Stars"],
          "text": ["Cells divide by mitosis.", "Rain falls in spring.", "Stars emit light."]}
QUERIES = {"_id": ["q1", "q2", "q3"], "text": ["How do cells divide?", "Why do stars shine?",
                                               "An unjudged query."]}


def hub_reachable(monkeypatch, reachable: bool):
    monkeypatch.setattr(hub, "offline_now", lambda: False)
    monkeypatch.setattr(hub, "hub_unreachable", lambda: not reachable)


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """The hub (reachable) and an empty default data folder; the list of requests."""
    calls = []

    def load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        if name == "mteb/stsbenchmark-sts":
            return datasets.Dataset.from_dict(STS[split])
        if name == "BeIR/scifact":
            assert split == config  # BeIR's splits are named after their configs
            return datasets.Dataset.from_dict(CORPUS if config == "corpus" else QUERIES)
        if name == "BeIR/scifact-qrels":
            assert split == "test"
            return datasets.Dataset.from_dict({"query-id": ["q1", "q2"],
                                               "corpus-id": ["d1", "d3"], "score": [1, 2]})
        assert name.startswith("zeta-alpha-ai/Nano") and split == "train"
        return datasets.Dataset.from_dict(
            {"corpus": {"_id": CORPUS["_id"], "text": CORPUS["text"]}, "queries": QUERIES,
             "qrels": {"query-id": ["q1", "q2"], "corpus-id": ["d1", "d3"]}}[config])

    monkeypatch.setattr(suite_data.datasets, "load_dataset", load_dataset)
    monkeypatch.setenv("MLMKIT_DATA", str(tmp_path / "data"))
    hub_reachable(monkeypatch, True)
    return calls


def test_fetch_stsb_writes_the_three_splits_read_sts_pairs_reads(fake_hub, tmp_path):
    assert suite_data.fetch("stsb") == tmp_path / "data" / "stsb"
    for split in ("train", "validation", "test"):
        firsts, seconds, scores = read_sts_pairs(tmp_path / "data" / "stsb" / f"{split}.tsv")
        assert firsts[1] == "A dog runs fast."  # a tab or newline in a cell is flattened
        assert seconds[0] == STS[split]["sentence2"][0]
        assert scores.tolist() == [4.5, 3.8, 0.25]


def test_fetch_scifact_and_nanobeir_write_beir_folders(fake_hub, tmp_path):
    scifact = read_beir_folder(suite_data.fetch("scifact"))
    assert scifact.doc_ids == ["d1", "d2", "d3"]
    assert scifact.doc_texts[0] == "Cells Cells divide by mitosis."  # title, then text
    assert scifact.qrels == {"q1": {"d1": 1}, "q2": {"d3": 2}}
    assert list(scifact.queries) == ["q1", "q2"]  # the judged queries only
    assert suite_data.fetch("nanobeir") == tmp_path / "data" / "nanobeir"
    folders = sorted(p.name for p in (tmp_path / "data" / "nanobeir").iterdir())
    assert folders == sorted(suite_data.NANOBEIR) and len(folders) == 13
    nano = read_beir_folder(tmp_path / "data" / "nanobeir" / "nfcorpus")
    assert nano.qrels == {"q1": {"d1": 1}, "q2": {"d3": 1}}  # no score column: relevant
    assert ("zeta-alpha-ai/NanoNFCorpus", "qrels", "train") in fake_hub


def test_a_name_is_fetched_once_and_a_path_that_exists_wins(fake_hub, tmp_path, monkeypatch):
    test = data_names.sts_file("mteb/stsbenchmark-sts")  # the hub name: test by default
    assert test == tmp_path / "data" / "stsb" / "test.tsv" and test.is_file()
    fetched = len(fake_hub)
    assert data_names.sts_file("stsb", "validation").name == "validation.tsv"
    assert data_names.beir_folder("BeIR/scifact") == tmp_path / "data" / "scifact"
    assert data_names.beir_folder("zeta-alpha-ai/NanoSciFact") == \
        tmp_path / "data" / "nanobeir" / "scifact"
    assert data_names.beir_folder("nanobeir/scifact") == tmp_path / "data" / "nanobeir" / \
        "scifact"
    assert len(fake_hub) == fetched + 3 + 3  # scifact, then one NanoBEIR set; stsb once
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stsb").write_text("sentence1\tsentence2\tscore\na\tb\t1\nc\td\t2\n")
    (tmp_path / "scifact").mkdir()
    assert data_names.sts_file("stsb").resolve() == tmp_path / "stsb"
    assert data_names.beir_folder("scifact").resolve() == tmp_path / "scifact"
    with pytest.raises(InvalidArgument, match="drop --split"):
        data_names.sts_file("stsb", "test")  # the local file is read whole
    with pytest.raises(InvalidArgument, match="use one of train, validation, test"):
        data_names.sts_file("mteb/stsbenchmark-sts", "dev")


@pytest.mark.parametrize(("name", "fetch", "instead"), [
    ("stsb", "stsb", "pass an STS file (sentence1, sentence2, score) instead"),
    ("BeIR/scifact", "scifact", "pass a BEIR folder (corpus.jsonl, queries.jsonl, "
                                "qrels/test.tsv) instead"),
    ("nanobeir/arguana", "nanobeir/arguana", "pass a BEIR folder")])
def test_offline_a_missing_name_says_how_to_fetch_it_and_what_to_pass(
        fake_hub, tmp_path, monkeypatch, name, fetch, instead):
    hub_reachable(monkeypatch, False)
    with pytest.raises(PathError) as caught:
        if fetch == "stsb":
            data_names.sts_file(name)
        else:
            data_names.beir_folder(name)
    message = str(caught.value)
    assert "\n" not in message and "cannot be reached from here" in message
    assert f"run 'mlmkit data fetch {fetch}' on a machine that can" in message
    assert str(tmp_path / "data") in message and instead in message
    away = runner.invoke(app, ["data", "fetch", fetch])
    assert away.exit_code == 1 and "cannot be reached from here" in away.stderr
    assert instead in " ".join(away.stderr.split())
    assert fake_hub == []


def test_eval_sts_and_retrieval_take_names(fake_hub, saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    sts = runner.invoke(app, ["eval", "sts", model, "stsb", "--split", "validation", "--json"])
    assert sts.exit_code == 0, sts.output
    expected = evaluate_sts(model, tmp_path / "data" / "stsb" / "validation.tsv")
    assert json.loads(sts.stdout) == pytest.approx(expected.to_dict(), abs=1e-12)
    assert evaluate_sts(model, "stsb", split="validation").to_dict() == expected.to_dict()

    done = runner.invoke(app, ["eval", "retrieval", model, "--data", "scifact", "--json"])
    assert done.exit_code == 0, done.output
    folder = tmp_path / "data" / "scifact"
    files = (folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels")
    expected = evaluate_retrieval(model, *files)
    assert json.loads(done.stdout) == pytest.approx(expected.to_dict(), abs=1e-12)
    assert evaluate_retrieval(model, data=str(folder)).to_dict() == expected.to_dict()

    both = runner.invoke(app, ["eval", "retrieval", model, "--data", "scifact", "--corpus",
                               str(files[0])])
    assert both.exit_code == 1 and "not both" in both.stderr
    neither = runner.invoke(app, ["eval", "retrieval", model, "--corpus", str(files[0])])
    assert neither.exit_code == 1 and "all three" in neither.stderr


def test_eval_suite_retrieval_takes_a_name(fake_hub, tiny_mlm, tmp_path):
    result = evaluate_suite(tiny_mlm("bert"), parts="retrieval", retrieval="nanobeir/scifact",
                            quick=True, progress=False)
    assert result.details["retrieval"]["data"] == "nanobeir/scifact"
    assert result.metrics["retrieval_ndcg@10"] is not None
    assert (tmp_path / "data" / "nanobeir" / "scifact" / "qrels" / "test.tsv").is_file()
