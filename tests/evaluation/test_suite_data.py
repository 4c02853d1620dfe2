"""The suite's data: a default folder that does not depend on the working directory, a
message that names what to pass (and `mlmkit data fetch NAME` where the hub is reachable),
and `fetch` writing the layout the suite reads."""

from __future__ import annotations

import json

import datasets
import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.core import hub
from mlmkit.errors import PathError
from mlmkit.evaluation import evaluate_suite, suite_data
from mlmkit.scoring import read_pairs


def hub_reachable(monkeypatch, reachable: bool):
    monkeypatch.setattr(hub, "offline_now", lambda: False)
    monkeypatch.setattr(hub, "hub_unreachable", lambda: not reachable)


def test_the_default_folder_is_mlmkit_data_or_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("MLMKIT_DATA", raising=False)
    monkeypatch.setenv("MLMKIT_CACHE", str(tmp_path / "cache"))
    assert suite_data.default_data_dir() == tmp_path / "cache" / "data"
    monkeypatch.setenv("MLMKIT_DATA", str(tmp_path / "mine"))
    assert suite_data.default_data_dir() == tmp_path / "mine"


@pytest.mark.parametrize("reachable", [True, False])
def test_missing_data_names_what_to_pass_and_how_to_fetch(tiny_mlm, tmp_path, monkeypatch,
                                                          reachable):
    monkeypatch.setenv("MLMKIT_DATA", str(tmp_path / "empty"))
    hub_reachable(monkeypatch, reachable)
    with pytest.raises(PathError) as caught:
        evaluate_suite(tiny_mlm("bert"), parts="blimp", progress=False)
    message = str(caught.value)
    assert message.startswith(f"the default data folder '{tmp_path / 'empty'}' ($MLMKIT_DATA) "
                              "has no blimp/ folder for the blimp part")
    assert "pass --data DIR, a folder holding blimp/, sst2/ and agnews/" in message
    assert "or leave blimp out (--parts)" in message
    assert ("fetch it with 'mlmkit data fetch blimp'" in message) == reachable
    assert ("cannot be reached from here" in message) != reachable
    assert "../shared" not in message


def fake_hub(monkeypatch):
    """The hub's data sets, a few rows each, as `datasets` returns them."""
    blimp = {"sentence_good": ["The cat sleeps.", "Dogs bark."],
             "sentence_bad": ["The cat sleep.", "Dogs barks."], "field": ["morphology"] * 2,
             "linguistics_term": ["agreement"] * 2, "UID": ["subject_verb"] * 2,
             "pairID": ["0", "1"], "one_prefix_method": [True, True]}
    sst2 = {"idx": [0, 1], "sentence": ["a fine  film ", "a dull film"], "label": [1, 0]}
    agnews = datasets.Dataset.from_dict(
        {"text": ["Stocks rose.", "The team won."], "label": [2, 1]},
        features=datasets.Features({"text": datasets.Value("string"), "label":
                                    datasets.ClassLabel(names=["World", "Sports", "Business",
                                                               "Sci/Tech"])}))

    def load_dataset(name, config=None, split=None):
        if name == "nyu-mll/blimp":
            return datasets.Dataset.from_dict(blimp)
        return agnews if name == "fancyzhx/ag_news" else datasets.Dataset.from_dict(sst2)

    monkeypatch.setattr(suite_data.datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(suite_data.datasets, "get_dataset_config_names",
                        lambda name: ["subject_verb_agreement_1"])
    hub_reachable(monkeypatch, True)


def test_fetch_writes_the_layout_the_suite_reads(tiny_mlm, tmp_path, monkeypatch):
    fake_hub(monkeypatch)
    monkeypatch.setenv("MLMKIT_DATA", str(tmp_path / "data"))
    for name in ("blimp", "sst2", "agnews"):
        assert suite_data.fetch(name) == tmp_path / "data" / name
    pairs = read_pairs(tmp_path / "data" / "blimp")
    assert [(p.good, p.bad) for p in pairs] == [("The cat sleeps.", "The cat sleep."),
                                                ("Dogs bark.", "Dogs barks.")]
    assert (tmp_path / "data" / "sst2" / "validation.tsv").read_text() == \
        "sentence\tlabel\na fine film\t1\na dull film\t0\n"
    assert (tmp_path / "data" / "agnews" / "train.tsv").read_text() == \
        "text\tlabel\nStocks rose.\tBusiness\nThe team won.\tSports\n"
    result = evaluate_suite(tiny_mlm("bert"), parts="blimp", progress=False)  # the default
    assert result.metrics["blimp"] is not None


def test_cli_data_fetch(tmp_path, monkeypatch):
    fake_hub(monkeypatch)
    done = CliRunner().invoke(app, ["data", "fetch", "sst2", "--data-dir", str(tmp_path),
                                    "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"name": "sst2", "folder": str(tmp_path / "sst2")}
    bad = CliRunner().invoke(app, ["data", "fetch", "glue", "--data-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "data set 'glue' is not known: use one of blimp, sst2, " \
                                  "agnews" in bad.stderr
    hub_reachable(monkeypatch, False)
    away = CliRunner().invoke(app, ["data", "fetch", "blimp", "--data-dir", str(tmp_path)])
    assert away.exit_code == 1 and "cannot be reached from here" in away.stderr
