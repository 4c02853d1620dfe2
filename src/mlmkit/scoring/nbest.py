"""Read and write n-best lists: ESPnet-style JSON and a simple TSV (utt, am_score, text).

ESPnet JSON: `{utt: {"hyp_1": {"score": s, "text": t}, ..., "ref": r}}` (a top-level
`"utts"` wrapper is accepted). TSV: `utt_id<TAB>am_score<TAB>text` per line; references
for TSV come from an optional `utt_id<TAB>text` file. Errors name the file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mlmkit.cache import atomic_write_text
from mlmkit.errors import MlmkitError


@dataclass
class Hypothesis:
    """One hypothesis of an utterance with its acoustic (or translation) model score."""

    name: str
    text: str
    am_score: float
    pll: float | None = None
    n_tokens: int = 0
    combined: float | None = None


@dataclass
class Utterance:
    """An utterance's n-best list and, when known, its reference transcript."""

    utt_id: str
    hypotheses: list[Hypothesis] = field(default_factory=list)
    reference: str | None = None


def _read_json(path: Path) -> list[Utterance]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise MlmkitError(f"{path}: invalid JSON at line {error.lineno}, column {error.colno}: "
                          f"{error.msg}; fix the file or pass a TSV n-best list") from error
    if isinstance(data, dict) and isinstance(data.get("utts"), dict):
        data = data["utts"]
    if not isinstance(data, dict):
        raise MlmkitError(f"{path}: expected an object {{utt: {{hyp_1: ..., ref: ...}}}}")
    utterances = []
    for utt_id, entry in data.items():
        if not isinstance(entry, dict):
            raise MlmkitError(f"{path}: utterance {utt_id!r} is not an object of hypotheses")
        utt = Utterance(str(utt_id), reference=entry.get("ref"))
        for name, hyp in entry.items():
            if name == "ref":
                continue
            if not isinstance(hyp, dict) or "text" not in hyp or "score" not in hyp:
                raise MlmkitError(f"{path}: {utt_id!r}/{name!r} needs 'text' and 'score'")
            try:
                am = float(hyp["score"])
            except (TypeError, ValueError) as error:
                raise MlmkitError(f"{path}: {utt_id!r}/{name!r} has a non-numeric score "
                                  f"{hyp['score']!r}") from error
            utt.hypotheses.append(Hypothesis(str(name), str(hyp["text"]), am))
        if not utt.hypotheses:
            raise MlmkitError(f"{path}: utterance {utt_id!r} has no hypotheses")
        utterances.append(utt)
    return utterances


def _read_tsv(path: Path) -> list[Utterance]:
    by_id: dict[str, Utterance] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 3:
                raise MlmkitError(f"{path}, line {number}: expected utt_id<TAB>am_score<TAB>text, "
                                  f"found {len(parts)} field(s)")
            try:
                am = float(parts[1])
            except ValueError as error:
                raise MlmkitError(f"{path}, line {number}: am_score {parts[1]!r} is not a "
                                  "number") from error
            utt = by_id.setdefault(parts[0], Utterance(parts[0]))
            utt.hypotheses.append(Hypothesis(f"hyp_{len(utt.hypotheses) + 1}", parts[2], am))
    return list(by_id.values())


def read_references(path: str | Path) -> dict[str, str]:
    """`utt_id<TAB>reference text` per line."""
    path = Path(path)
    if not path.is_file():
        raise MlmkitError(f"references file {str(path)!r} does not exist")
    refs = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        utt_id, tab, text = line.partition("\t")
        if not tab:
            raise MlmkitError(f"{path}, line {number}: expected utt_id<TAB>reference")
        refs[utt_id] = text
    return refs


def read_nbest(path: str | Path, references: str | Path | None = None) -> list[Utterance]:
    """Read an n-best file (JSON by its content, else TSV), with optional references."""
    path = Path(path)
    if not path.is_file():
        raise MlmkitError(f"n-best file {str(path)!r} does not exist")
    with path.open(encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
    utterances = _read_json(path) if head.startswith("{") else _read_tsv(path)
    if not utterances:
        raise MlmkitError(f"{path}: no hypotheses found")
    if references is not None:
        refs = read_references(references)
        for utt in utterances:
            utt.reference = refs.get(utt.utt_id, utt.reference)
    return utterances


def write_nbest_json(path: str | Path, utterances: list[Utterance]) -> None:
    """The rescored n-best, hypotheses best first, in ESPnet-style JSON (atomic write)."""
    out = {}
    for utt in utterances:
        ranked = sorted(utt.hypotheses, key=lambda h: -(h.combined if h.combined is not None
                                                        else h.am_score))
        entry = {f"hyp_{k}": {"text": h.text, "score": h.combined, "am_score": h.am_score,
                              "pll": h.pll, "source": h.name}
                 for k, h in enumerate(ranked, start=1)}
        if utt.reference is not None:
            entry["ref"] = utt.reference
        out[utt.utt_id] = entry
    atomic_write_text(path, json.dumps(out, indent=1, ensure_ascii=False) + "\n")


def write_one_best(path: str | Path, best: dict[str, str]) -> None:
    """`utt_id<TAB>text` of the chosen hypothesis per utterance (atomic write)."""
    atomic_write_text(path, "".join(f"{u}\t{t}\n" for u, t in best.items()))
