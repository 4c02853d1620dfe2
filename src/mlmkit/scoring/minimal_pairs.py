"""Minimal-pair evaluation (BLiMP, Warstadt et al. 2020): is score(good) > score(bad)?

Reads any jsonl with `sentence_good` / `sentence_bad` (a file or a folder of files);
the paradigm is the row's `UID` (else the file name), the field its `field`. Every
sentence of every pair is scored in one engine run.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core import checks
from mlmkit.core.records import display_name, read_json_objects
from mlmkit.core.results import Result, jsonable
from mlmkit.errors import InvalidArgument, InvalidData, PathError
from mlmkit.scoring.text_scores import (
    NO_TOKEN_WARNING,
    check_score_options,
    passes_runtime_to_score,
    score,
)


@dataclass
class MinimalPair:
    good: str
    bad: str
    paradigm: str
    field: str


@dataclass
class MinimalPairResult(Result):
    """Accuracies per paradigm, per field and overall (a pair is right when good > bad)."""

    overall: float
    n_pairs: int
    by_paradigm: dict[str, dict]  # name -> {"accuracy", "n", "field"}
    by_field: dict[str, dict]  # name -> {"accuracy", "n"}
    metric: str

    def to_dict(self) -> dict:
        return jsonable({"metric": self.metric, "overall": self.overall,
                         "n_pairs": self.n_pairs, "by_field": self.by_field,
                         "by_paradigm": self.by_paradigm})


def read_pairs(path, limit: int | None = None, paradigms: list[str] | None = None, *,
               encoding: str = "utf-8", errors: str = "strict") -> list[MinimalPair]:
    """Pairs from a jsonl file (`-`: standard input) or every `*.jsonl` in a folder;
    at most `limit` pairs per paradigm."""
    if limit is not None:
        limit = checks.count("limit", limit, 1)
    if not str(path).strip():
        raise PathError("minimal-pair data '' is empty: pass a jsonl file or a folder of them "
                        "(e.g. ../shared/data/blimp)")
    path = Path(path) if str(path) != "-" else "-"
    if path != "-" and not path.exists():
        raise PathError(f"minimal-pair data {str(path)!r} does not exist: pass a jsonl file "
                        "or a folder of them (e.g. ../shared/data/blimp)")
    files = sorted(path.glob("*.jsonl")) if path != "-" and path.is_dir() else [path]
    if not files:
        raise PathError(f"{str(path)!r} holds no *.jsonl files: pass a jsonl file or a folder "
                        "of them")
    is_folder = path != "-" and path.is_dir()
    wanted = set(paradigms) if paradigms else None
    pairs, counts = [], defaultdict(int)
    for file in files:
        stem = "-" if file == "-" else file.stem
        if wanted is not None and stem not in wanted and is_folder:
            continue
        for number, row in read_json_objects(file, encoding, errors, what="minimal-pair"):
            good, bad = row.get("sentence_good"), row.get("sentence_bad")
            if not isinstance(good, str) or not isinstance(bad, str):
                raise InvalidData(f"{display_name(file)} line {number}: needs the text fields "
                                  "'sentence_good' and 'sentence_bad'")
            if not good.strip() or not bad.strip():
                empty = "sentence_good" if not good.strip() else "sentence_bad"
                raise InvalidData(f"{display_name(file)} line {number}: {empty!r} is empty; "
                                  "a minimal pair needs two sentences: fix or remove the line")
            paradigm = str(row.get("UID", stem))
            if wanted is not None and paradigm not in wanted:
                continue
            if limit is not None and counts[paradigm] >= limit:
                continue
            counts[paradigm] += 1
            pairs.append(MinimalPair(good, bad, paradigm, str(row.get("field", "-"))))
    if not pairs:
        raise InvalidData(f"no minimal pairs found in {display_name(path)}"
                          + (f" for paradigms {sorted(wanted)}" if wanted else ""))
    absent = sorted(wanted - set(counts)) if wanted else []
    if absent:
        raise InvalidData(f"no minimal pairs of paradigm(s) {', '.join(map(repr, absent))} in "
                          f"{display_name(path)} (--paradigm takes one UID each time, e.g. "
                          f"{next(iter(counts))!r}): check the names")
    return pairs


@passes_runtime_to_score
def evaluate_pairs(
    model,
    pairs: list[MinimalPair],
    *,
    metric: str = "pll",
    unk: str = "score",
    **runtime,
) -> MinimalPairResult:
    """Score both sentences of every pair (`read_pairs`) and count how often the good one
    wins (strictly). The keywords: as `mlmkit.score`."""
    check_score_options(metric, unk, 1, runtime.get("batch_tokens"))
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise InvalidData("no minimal pairs to evaluate: read them with read_pairs()")
    if not all(isinstance(p, MinimalPair) for p in pairs):
        raise InvalidArgument("pairs must be MinimalPair items, as read_pairs() returns")
    for i, p in enumerate(pairs):
        if not isinstance(p.good, str) or not isinstance(p.bad, str) or not p.good.strip() \
                or not p.bad.strip():
            raise InvalidData(f"pairs[{i}] ({p.paradigm}) has an empty or non-text sentence: "
                              "a minimal pair needs two sentences (an empty one has no score)")
    unique = list(dict.fromkeys(s for p in pairs for s in (p.good, p.bad)))
    with warnings.catch_warnings():
        # said below by pair, not by an index into `unique` (other warnings pass)
        warnings.filterwarnings("ignore", message=NO_TOKEN_WARNING)
        results = score(model, unique, metric=metric, unk=unk, **runtime)
    pll = {text: r.pll for text, r in zip(unique, results, strict=True)}
    unscored = [i for i, p in enumerate(pairs) if pll[p.good] is None or pll[p.bad] is None]
    if unscored:
        first = unscored[0]
        warnings.warn(f"{len(unscored)} pair(s) with a sentence with no token to score (first: "
                      f"pairs[{first}] ({pairs[first].paradigm})): counted as wrong; only "
                      "special tokens" + (", or [UNK]s skipped with unk='skip'" if unk == "skip"
                                          else ""), stacklevel=2)
    right_p, total_p, right_f, total_f, field_of = (defaultdict(int), defaultdict(int),
                                                     defaultdict(int), defaultdict(int), {})
    for p in pairs:
        good, bad = pll[p.good], pll[p.bad]
        correct = int(good is not None and bad is not None and good > bad)
        right_p[p.paradigm] += correct
        total_p[p.paradigm] += 1
        right_f[p.field] += correct
        total_f[p.field] += 1
        field_of[p.paradigm] = p.field
    by_paradigm = {k: {"accuracy": right_p[k] / total_p[k], "n": total_p[k], "field": field_of[k]}
                   for k in sorted(total_p)}
    by_field = {k: {"accuracy": right_f[k] / total_f[k], "n": total_f[k]} for k in sorted(total_f)}
    return MinimalPairResult(overall=sum(right_p.values()) / len(pairs), n_pairs=len(pairs),
                             by_paradigm=by_paradigm, by_field=by_field, metric=metric)
