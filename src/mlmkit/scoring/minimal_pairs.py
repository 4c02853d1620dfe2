"""Minimal-pair evaluation (BLiMP, Warstadt et al. 2020): is score(good) > score(bad)?

Reads any jsonl with `sentence_good` / `sentence_bad` (a file or a folder of files);
the paradigm is the row's `UID` (else the file name), the field its `field`. Every
sentence of every pair is scored in one engine run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from mlmkit.errors import MlmkitError
from mlmkit.scoring.text_scores import score


@dataclass
class MinimalPair:
    good: str
    bad: str
    paradigm: str
    field: str


@dataclass
class MinimalPairResult:
    """Accuracies per paradigm, per field and overall (a pair is right when good > bad)."""

    overall: float
    n_pairs: int
    by_paradigm: dict[str, dict]  # name -> {"accuracy", "n", "field"}
    by_field: dict[str, dict]  # name -> {"accuracy", "n"}
    metric: str

    def to_dict(self) -> dict:
        return {"metric": self.metric, "overall": self.overall, "n_pairs": self.n_pairs,
                "by_field": self.by_field, "by_paradigm": self.by_paradigm}


def read_pairs(path: str | Path, limit: int | None = None,
               paradigms: list[str] | None = None) -> list[MinimalPair]:
    """Pairs from a jsonl file or every `*.jsonl` in a folder; `limit` pairs per paradigm."""
    path = Path(path)
    if not path.exists():
        raise MlmkitError(f"minimal-pair data {str(path)!r} does not exist: pass a jsonl file "
                          "or a folder of them (e.g. ../shared/data/blimp)")
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise MlmkitError(f"{path} holds no *.jsonl files")
    wanted = set(paradigms) if paradigms else None
    pairs, counts = [], defaultdict(int)
    for file in files:
        if wanted is not None and file.stem not in wanted and path.is_dir():
            continue
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    good, bad = row["sentence_good"], row["sentence_bad"]
                except json.JSONDecodeError as error:
                    raise MlmkitError(f"{file}, line {number}: invalid JSON ({error.msg})") from error
                except (KeyError, TypeError) as error:
                    raise MlmkitError(f"{file}, line {number}: needs 'sentence_good' and "
                                      "'sentence_bad'") from error
                paradigm = str(row.get("UID", file.stem))
                if wanted is not None and paradigm not in wanted:
                    continue
                if limit is not None and counts[paradigm] >= limit:
                    continue
                counts[paradigm] += 1
                pairs.append(MinimalPair(good, bad, paradigm, str(row.get("field", "-"))))
    if not pairs:
        raise MlmkitError(f"no minimal pairs found in {path}"
                          + (f" for paradigms {sorted(wanted)}" if wanted else ""))
    return pairs


def evaluate_pairs(model, pairs: list[MinimalPair], metric: str = "pll", *,
                   batch_tokens: int | None = None, precision: str = "fp32",
                   progress: bool = False) -> MinimalPairResult:
    """Score both sentences of every pair and count how often the good one wins."""
    unique = list(dict.fromkeys(s for p in pairs for s in (p.good, p.bad)))
    results = score(model, unique, metric=metric, batch_tokens=batch_tokens,
                    precision=precision, progress=progress)
    pll = {text: r.pll for text, r in zip(unique, results, strict=True)}
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
