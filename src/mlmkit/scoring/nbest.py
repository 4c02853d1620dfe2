"""Read and write n-best lists: ESPnet-style JSON and a simple TSV (utt, am_score, text).

ESPnet JSON: `{utt: {"hyp_1": {"score": s, "text": t}, ..., "ref": r}}` (a top-level
`"utts"` wrapper is accepted). TSV: `utt_id<TAB>am_score<TAB>text` per line; references
for TSV come from an optional `utt_id<TAB>text` file. Errors name the file and line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from mlmkit.core.output import write_text
from mlmkit.core.records import (
    check_input_file,
    decoded_lines,
    display_name,
    parse_json_document,
    read_lines,
)
from mlmkit.core.results import jsonable
from mlmkit.errors import InvalidData


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


def _am_score(value, where: str) -> float:
    try:
        am = float(value)
    except (TypeError, ValueError) as error:
        raise InvalidData(f"{where} has a non-numeric score {value!r}") from error
    if not math.isfinite(am):
        raise InvalidData(f"{where} has the score {value!r}: scores must be finite numbers")
    return am


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple]) -> dict:
    """json.loads keeps the last of two equal keys: a hypothesis or utterance lost."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _read_json(path, text: str) -> list[Utterance]:
    path = display_name(path)
    try:
        data = parse_json_document(text, path, "an n-best file is {utt: {hyp_1: {text, "
                                   "score}, ...}}, or pass a TSV n-best list",
                                   object_pairs_hook=_unique_keys)
    except _DuplicateKey as error:
        raise InvalidData(f"{path}: the key {error.args[0]!r} appears twice in one object (an "
                          "utterance or hypothesis would be lost): give each a unique "
                          "name") from None
    if isinstance(data, dict) and isinstance(data.get("utts"), dict):
        data = data["utts"]
    if not isinstance(data, dict):
        raise InvalidData(f"{path}: expected an object {{utt: {{hyp_1: ..., ref: ...}}}}")
    utterances = []
    for utt_id, entry in data.items():
        if not isinstance(entry, dict):
            raise InvalidData(f"{path}: utterance {utt_id!r} is not an object of hypotheses")
        reference = entry.get("ref")
        if reference is not None and not isinstance(reference, str):
            raise InvalidData(f"{path}: the 'ref' of {utt_id!r} is not text")
        utt = Utterance(str(utt_id), reference=reference)
        for name, hyp in entry.items():
            if name == "ref":
                continue
            if not isinstance(hyp, dict) or "text" not in hyp or "score" not in hyp:
                raise InvalidData(f"{path}: {utt_id!r}/{name!r} needs 'text' and 'score'")
            if not isinstance(hyp["text"], str):
                raise InvalidData(f"{path}: the 'text' of {utt_id!r}/{name!r} is not text")
            am = _am_score(hyp["score"], f"{path}: {utt_id!r}/{name!r}")
            utt.hypotheses.append(Hypothesis(str(name), hyp["text"], am))
        if not utt.hypotheses:
            raise InvalidData(f"{path}: utterance {utt_id!r} has no hypotheses")
        utterances.append(utt)
    return utterances


def _read_tsv(path, lines) -> list[Utterance]:
    by_id: dict[str, Utterance] = {}
    for number, line in lines:
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InvalidData(f"{display_name(path)} line {number}: expected "
                              f"utt_id<TAB>am_score<TAB>text, found {len(parts)} field(s)")
        am = _am_score(parts[1], f"{display_name(path)} line {number}")
        utt = by_id.setdefault(parts[0], Utterance(parts[0]))
        utt.hypotheses.append(Hypothesis(f"hyp_{len(utt.hypotheses) + 1}", parts[2], am))
    return list(by_id.values())


def read_references(path, encoding: str = "utf-8",
                    errors: str = "strict") -> dict[str, str]:
    """`utt_id<TAB>reference text` per line."""
    check_input_file(path, "references file")
    refs = {}
    for number, line in read_lines(path, encoding, errors):
        if not line.strip():
            continue
        utt_id, tab, text = line.partition("\t")
        if not tab:
            raise InvalidData(f"{display_name(path)} line {number}: expected "
                              "utt_id<TAB>reference")
        if utt_id in refs:
            raise InvalidData(f"{display_name(path)} line {number}: a second reference for "
                              f"{utt_id!r}: give one reference per utterance")
        refs[utt_id] = text
    if not refs:
        raise InvalidData(f"references file {display_name(path)} holds no references: write "
                          "utt_id<TAB>reference text, one per line")
    return refs


def read_nbest(path, references=None, *, encoding: str = "utf-8",
               errors: str = "strict") -> list[Utterance]:
    """Read an n-best file (JSON by its content, else TSV; `-` is standard input), with
    optional references (`utt_id<TAB>text` per line)."""
    check_input_file(path, "n-best file")
    if references is not None:
        check_input_file(references, "references file")
    lines = [(n, line.rstrip("\n").rstrip("\r")) for n, line in
             decoded_lines(path, encoding, errors)]
    first = next((line for _, line in lines if line.strip()), "")
    if first.lstrip().startswith("{"):
        utterances = _read_json(path, "\n".join(line for _, line in lines))
    else:
        utterances = _read_tsv(path, lines)
    if not utterances:
        raise InvalidData(f"{display_name(path)}: no hypotheses found; an n-best file is "
                          "ESPnet-style JSON or utt_id<TAB>am_score<TAB>text lines")
    if references is not None:
        refs = read_references(references, encoding, errors)
        if not any(utt.utt_id in refs for utt in utterances):
            raise InvalidData(f"none of the {len(refs)} utterance ids of references file "
                              f"{display_name(references)} is in the n-best list (e.g. "
                              f"{next(iter(refs))!r} vs {utterances[0].utt_id!r}): check that "
                              "the ids match")
        for utt in utterances:
            utt.reference = refs.get(utt.utt_id, utt.reference)
    return utterances


def write_nbest_json(path, utterances: list[Utterance], inputs=()) -> None:
    """The rescored n-best, hypotheses best first, in ESPnet-style JSON (atomic write;
    `-` is standard output)."""
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
    write_text(path, json.dumps(jsonable(out), indent=1, ensure_ascii=False, allow_nan=False)
               + "\n", inputs=inputs, what="rescored n-best output")


def write_one_best(path, best: dict[str, str], inputs=()) -> None:
    """`utt_id<TAB>text` of the chosen hypothesis per utterance (atomic write)."""
    write_text(path, "".join(f"{u}\t{t}\n" for u, t in best.items()), inputs=inputs,
               what="--one-best output")
