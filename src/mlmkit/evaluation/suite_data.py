"""Where the evaluation suite finds its data sets, and how to fetch them from the Hugging
Face hub (`mlmkit data fetch NAME`).

The suite reads a folder holding `blimp/` (one JSON-lines file per paradigm), `sst2/`
(`train.tsv`, `validation.tsv`: sentence, label) and `agnews/` (`train.tsv`: text, label
name). Its default is `$MLMKIT_DATA`, else the `data` folder of mlmkit's cache: a path
that does not depend on the working directory (a default relative to this repository's
checkout meant nothing to an installed mlmkit). `fetch` fills it from the hub, in the
layout and columns the suite reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from mlmkit.core import hub
from mlmkit.core.cache import atomic_write_text
from mlmkit.core.data_dir import default_data_dir
from mlmkit.errors import InvalidArgument, PathError

HUB_NAMES = {"blimp": "nyu-mll/blimp", "sst2": "stanfordnlp/sst2", "agnews": "fancyzhx/ag_news"}
"""The data sets `fetch` knows, by their folder name, and their hub repositories."""

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
    """Download the data set `name` (blimp, sst2 or agnews) from the hub into
    `data_dir/name` (default: `default_data_dir()`), in the suite's layout; the folder."""
    if name not in HUB_NAMES:
        raise InvalidArgument(f"data set {name!r} is not known: use one of "
                              f"{', '.join(HUB_NAMES)}")
    root = default_data_dir() if data_dir is None else Path(data_dir).expanduser()
    if root.exists() and not root.is_dir():
        raise PathError(f"--data-dir {str(root)!r} is a file: name a folder")
    if hub.offline_now() or hub.hub_unreachable():
        raise PathError(f"'mlmkit data fetch {name}' needs the Hugging Face hub "
                        f"({HUB_NAMES[name]}), which cannot be reached from here: fetch it on "
                        f"a machine that can and copy {name}/ into {str(root)!r}, or pass "
                        "--data DIR to the suite")
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    {"blimp": _blimp, "sst2": _sst2, "agnews": _agnews}[name](folder)
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
