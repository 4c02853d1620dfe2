"""Data names for the embedding evaluations: `stsb` (or `mteb/stsbenchmark-sts`) for STS,
`scifact` (or `BeIR/scifact`) and `nanobeir/SET` (or `zeta-alpha-ai/NanoSET`) for
retrieval, wherever an STS file or a BEIR folder is asked for.

A name stands for its folder in the default data folder (`$MLMKIT_DATA`, as `mlmkit data
fetch NAME` writes it), fetched from the hub the first time where the hub is reachable;
offline, the error says how to fetch it elsewhere and which local files to pass instead.
A path that exists always wins over a name, so a local folder called `scifact` is read
as it is.
"""

from __future__ import annotations

from pathlib import Path

from mlmkit.core import hub
from mlmkit.core.data_dir import default_data_dir
from mlmkit.core.progress import status
from mlmkit.errors import InvalidArgument, PathError
from mlmkit.evaluation import suite_data
from mlmkit.evaluation.suite_data import BEIR_FILES, NANOBEIR, STS_SPLITS

STS_NAMES = ("stsb", "mteb/stsbenchmark-sts")
STS_DEFAULT_SPLIT = "test"  # the split STS-B results are reported on (MTEB's, SBERT's)


def _beir_name(data: str) -> str | None:
    """The folder name of a BEIR data name (scifact, nanobeir/SET), None for other text."""
    key = data.lower().strip("/")
    if key in ("scifact", "beir/scifact"):
        return "scifact"
    for prefix in ("nanobeir/", "zeta-alpha-ai/nano"):
        if key.startswith(prefix) and key[len(prefix):] in NANOBEIR:
            return f"nanobeir/{key[len(prefix):]}"
    return None


def _fetch_missing(name: str, given: str, flag: str) -> Path:
    """Fetch `name` into the default data folder, or say in one line why it cannot be."""
    root = default_data_dir()
    if hub.offline_now() or hub.hub_unreachable():
        raise PathError(f"{flag} {given!r} names {suite_data.HUB_NAMES[name]}, which is not in "
                        f"{str(root / name)!r} and the Hugging Face hub cannot be reached from "
                        f"here: run 'mlmkit data fetch {name}' on a machine that can and copy "
                        f"{name}/ into {str(root)!r} ($MLMKIT_DATA), or "
                        f"{suite_data.local_instead(name)}")
    status(f"fetching {suite_data.HUB_NAMES[name]} into {root / name}")
    return suite_data.fetch(name, root)


def sts_file(data, split: str | None = None, flag: str = "DATA") -> Path:
    """The STS file `data` names: a file as given (whole: `split` must be None), or a split
    (default test) of the STS benchmark for `stsb` / `mteb/stsbenchmark-sts`."""
    name = str(data)
    if Path(name).exists() or name.lower() not in STS_NAMES:
        if split is not None:
            raise InvalidArgument(f"--split {split!r} picks a split of a data name "
                                  f"({', '.join(STS_NAMES)}); {name!r} is a file, read whole: "
                                  "drop --split")
        return Path(name)
    split = STS_DEFAULT_SPLIT if split is None else split
    if split not in STS_SPLITS:
        raise InvalidArgument(f"--split {split!r} is not a split of {name}: use one of "
                              f"{', '.join(STS_SPLITS)}")
    path = default_data_dir() / "stsb" / f"{split}.tsv"
    if not path.is_file():
        _fetch_missing("stsb", name, flag)
    return path


def beir_folder(data, flag: str = "--data") -> Path:
    """The BEIR folder `data` names: a path as given, or the fetched folder of a data name
    (scifact, BeIR/scifact, nanobeir/SET, zeta-alpha-ai/NanoSET)."""
    given = str(data)
    name = None if Path(given).exists() else _beir_name(given)
    if name is None:
        return Path(given)
    folder = default_data_dir() / name
    if not all((folder / file).is_file() for file in BEIR_FILES):
        _fetch_missing(name, given, flag)
    return folder
