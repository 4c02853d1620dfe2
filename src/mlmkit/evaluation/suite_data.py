"""Where the evaluation suite finds its data sets, and how to fetch them from the Hugging
Face hub (`mlmkit data fetch NAME`).

The suite reads a folder holding `blimp/` (one JSON-lines file per paradigm), `sst2/`
(`train.tsv`, `validation.tsv`: sentence, label) and `agnews/` (`train.tsv`: text, label
name). Its default is `$MLMKIT_DATA`, else the `data` folder of mlmkit's cache: a path
that does not depend on the working directory (a default relative to this repository's
checkout meant nothing to an installed mlmkit). `fetch` fills it from the hub, in the
layout and columns the suite reads.

The embedding evaluations' data sets are fetched into the same folder: `stsb/`
(`train.tsv`, `validation.tsv`, `test.tsv`: sentence1, sentence2, score, from
mteb/stsbenchmark-sts), and BEIR folders (`corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv`):
`scifact/` (BeIR/scifact and its qrels) and `nanobeir/SET/`, one per NanoBEIR set (the
zeta-alpha-ai/Nano* sets: configs corpus, queries and qrels, each a `train` split; their
qrels have no score column, every pair listed is relevant).
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from mlmkit.core import hub
from mlmkit.core.cache import atomic_write_text
from mlmkit.core.data_dir import default_data_dir
from mlmkit.errors import InvalidArgument, PathError

NANOBEIR = {name.lower(): f"zeta-alpha-ai/Nano{name}" for name in (
    "ClimateFEVER", "DBPedia", "FEVER", "FiQA2018", "HotpotQA", "MSMARCO", "NFCorpus", "NQ",
    "QuoraRetrieval", "SCIDOCS", "ArguAna", "SciFact", "Touche2020")}
"""The NanoBEIR sets (50 queries and a few thousand documents each), by folder name."""

HUB_NAMES = {"blimp": "nyu-mll/blimp", "sst2": "stanfordnlp/sst2", "agnews": "fancyzhx/ag_news",
             "stsb": "mteb/stsbenchmark-sts", "scifact": "BeIR/scifact",
             "nanobeir": "zeta-alpha-ai/Nano*",
             **{f"nanobeir/{name}": repo for name, repo in NANOBEIR.items()}}
"""The data sets `fetch` knows, by their folder name, and their hub repositories."""

SCIFACT_QRELS = "BeIR/scifact-qrels"
STS_SPLITS = ("train", "validation", "test")
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")

LOCAL_INSTEAD = {
    "stsb": "pass an STS file (sentence1, sentence2, score) instead",
    "scifact": "pass a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) instead",
    "nanobeir": "pass a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) instead",
}
"""What to pass where a data set cannot be fetched (default: the suite's --data)."""


def local_instead(name: str) -> str:
    return LOCAL_INSTEAD.get(name.split("/")[0], "pass --data DIR to the suite")

BLIMP_FIELDS = ("sentence_good", "sentence_bad", "field", "linguistics_term", "UID", "pairID")


def missing_data(name: str, folder: Path, part: str, flag: str, parts_flag: str,
                 default: bool) -> str:
    """The message for a part whose data set `name` is not in `folder`: what to pass, and
    how to fetch it where the hub is reachable."""
    where = (f"the default data folder {str(folder)!r} ($MLMKIT_DATA)" if default
             else f"data {str(folder)!r} ({flag})")
    if hub.offline_now() or hub.hub_unreachable():
        get = (f"the Hugging Face hub cannot be reached from here: copy {name}/ there (as "
               f"'mlmkit data fetch {name}' writes it on a machine that reaches the hub), "
               f"or pass {flag} DIR, a folder holding blimp/, sst2/ and agnews/")
    else:
        get = (f"fetch it with 'mlmkit data fetch {name}'"
               + ("" if default else f" --data-dir {folder}")
               + f", or pass {flag} DIR, a folder holding blimp/, sst2/ and agnews/")
    return f"{where} has no {name}/ folder for the {part} part: {get}; or leave {part} " \
           f"out ({parts_flag})"


def fetch(name: str, data_dir: str | Path | None = None) -> Path:
    """Download the data set `name` (blimp, sst2, agnews, stsb, scifact, nanobeir or
    nanobeir/SET) from the hub into
    `data_dir/name` (default: `default_data_dir()`), in the suite's layout; the folder."""
    if name not in HUB_NAMES:
        shown = [n for n in HUB_NAMES if not n.startswith("nanobeir/")] + ["nanobeir/SET"]
        raise InvalidArgument(f"data set {name!r} is not known: use one of "
                              f"{', '.join(shown)} (SET: {', '.join(NANOBEIR)})")
    root = default_data_dir() if data_dir is None else Path(data_dir).expanduser()
    if root.exists() and not root.is_dir():
        raise PathError(f"--data-dir {str(root)!r} is a file: name a folder")
    if hub.offline_now() or hub.hub_unreachable():
        raise PathError(f"'mlmkit data fetch {name}' needs the Hugging Face hub "
                        f"({HUB_NAMES[name]}), which cannot be reached from here: fetch it on "
                        f"a machine that can and copy {name}/ into {str(root)!r}, or "
                        f"{local_instead(name)}")
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    if name.startswith("nanobeir/"):
        _nanobeir_set(name.split("/", 1)[1], folder)
    else:
        {"blimp": _blimp, "sst2": _sst2, "agnews": _agnews, "stsb": _stsb,
         "scifact": _scifact, "nanobeir": _nanobeir}[name](folder)
    return folder


def _blimp(folder: Path) -> None:
    for paradigm in datasets.get_dataset_config_names(HUB_NAMES["blimp"]):
        rows = datasets.load_dataset(HUB_NAMES["blimp"], paradigm, split="train")
        lines = (json.dumps({k: row[k] for k in BLIMP_FIELDS if k in row}) for row in rows)
        atomic_write_text(folder / f"{paradigm}.jsonl", "\n".join(lines) + "\n")


def _tsv(rows, columns: tuple[str, str], label_names=None) -> str:
    text, label = columns
    lines = ["\t".join(columns)]
    for row in rows:
        value = row[label] if label_names is None else label_names[row[label]]
        lines.append(f"{' '.join(str(row[text]).split())}\t{value}")
    return "\n".join(lines) + "\n"


def _sst2(folder: Path) -> None:
    for split in ("train", "validation"):
        rows = datasets.load_dataset(HUB_NAMES["sst2"], split=split)
        atomic_write_text(folder / f"{split}.tsv", _tsv(rows, ("sentence", "label")))


def _agnews(folder: Path) -> None:
    rows = datasets.load_dataset(HUB_NAMES["agnews"], split="train")
    names = rows.features["label"].names
    atomic_write_text(folder / "train.tsv", _tsv(rows, ("text", "label"), names))


def _flat(text) -> str:
    """One line of text: a TSV cell may hold no tab or newline."""
    return " ".join(str(text).split())


def _stsb(folder: Path) -> None:
    for split in STS_SPLITS:
        rows = datasets.load_dataset(HUB_NAMES["stsb"], split=split)
        lines = ["sentence1\tsentence2\tscore"] + [
            f"{_flat(row['sentence1'])}\t{_flat(row['sentence2'])}\t{float(row['score'])}"
            for row in rows]
        atomic_write_text(folder / f"{split}.tsv", "\n".join(lines) + "\n")


def write_beir(folder: Path, corpus, queries, qrels) -> None:
    """A BEIR folder from rows of the hub's corpus (_id, title, text), queries (_id, text)
    and qrels (query-id, corpus-id, score; no score: relevant). qrels/test.tsv is written
    last: a folder that has it is complete."""
    atomic_write_text(folder / "corpus.jsonl", "".join(
        json.dumps({"_id": str(row["_id"]), "title": row.get("title") or "",
                    "text": row["text"]}) + "\n" for row in corpus))
    atomic_write_text(folder / "queries.jsonl", "".join(
        json.dumps({"_id": str(row["_id"]), "text": row["text"]}) + "\n" for row in queries))
    (folder / "qrels").mkdir(exist_ok=True)
    atomic_write_text(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n" + "".join(
        f"{row['query-id']}\t{row['corpus-id']}\t{int(row.get('score', 1))}\n"
        for row in qrels))


def _scifact(folder: Path) -> None:
    repo = HUB_NAMES["scifact"]
    write_beir(folder, datasets.load_dataset(repo, "corpus", split="corpus"),
               datasets.load_dataset(repo, "queries", split="queries"),
               datasets.load_dataset(SCIFACT_QRELS, split="test"))


def _nanobeir_set(name: str, folder: Path) -> None:
    write_beir(folder, *(datasets.load_dataset(NANOBEIR[name], config, split="train")
                         for config in ("corpus", "queries", "qrels")))


def _nanobeir(folder: Path) -> None:
    for name in NANOBEIR:
        (folder / name).mkdir(exist_ok=True)
        _nanobeir_set(name, folder / name)
