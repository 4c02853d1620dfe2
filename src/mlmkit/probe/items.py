"""Multiple-choice items from jsonl: explicit candidate statements, or COPA rows.

`{"candidates": ["...", "..."], "label": 0}` lists full statements (`label`, the index of
the right one, is optional; `answer` may give its text instead). COPA rows
(`premise`, `choice1`, `choice2`, `question`, `label`) become "premise because choice"
or "premise so choice" statements, as in Tamborrino et al. (2020).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlmkit.errors import InvalidData
from mlmkit.probe.jsonl import field, read_jsonl, row_name

GENERIC_FIELDS = {"candidates", "label", "answer", "id"}
COPA_FIELDS = {"premise", "choice1", "choice2", "question", "label", "idx", "id", "mirrored"}
CONNECTIVES = {"cause": "because", "effect": "so"}


@dataclass
class Item:
    """One multiple-choice question: candidate statements and, maybe, the right one."""

    candidates: list[str]
    gold: int | None = None
    item_id: str | None = None


def copa_statement(premise: str, choice: str, question: str) -> str:
    """'The man broke his toe because he dropped a hammer on his foot.'"""
    head = premise.rstrip().rstrip(".!?")
    tail = choice.strip()
    if tail[:1].isupper() and not tail[:2].isupper():
        tail = tail[0].lower() + tail[1:]
    return f"{head} {CONNECTIVES[question]} {tail}"


def _generic(row: dict, where: str) -> Item:
    candidates = field(row, "candidates", list, where)
    if len(candidates) < 2 or not all(isinstance(c, str) and c.strip() for c in candidates):
        raise InvalidData(f"{where}: 'candidates' needs at least two non-empty strings")
    twice = [c for k, c in enumerate(candidates) if c in candidates[:k]]
    if twice:
        raise InvalidData(f"{where}: the candidate {twice[0][:60]!r} is given twice; an item "
                          "needs distinct candidates: remove the duplicate")
    gold = field(row, "label", int, where, required=False)
    answer = field(row, "answer", str, where, required=False)
    if answer is not None:
        if answer not in candidates:
            raise InvalidData(f"{where}: 'answer' {answer!r} is not one of the candidates")
        if gold is not None and candidates[gold] != answer:
            raise InvalidData(f"{where}: 'label' and 'answer' disagree")
        gold = candidates.index(answer)
    if gold is not None and not 0 <= gold < len(candidates):
        raise InvalidData(f"{where}: 'label' {gold} is not a candidate index "
                          f"(0..{len(candidates) - 1})")
    item_id = row.get("id")
    return Item(list(candidates), gold, None if item_id is None else str(item_id))


def _copa(row: dict, where: str) -> Item:
    premise = field(row, "premise", str, where)
    question = field(row, "question", str, where)
    if question not in CONNECTIVES:
        raise InvalidData(f"{where}: 'question' must be one of {sorted(CONNECTIVES)}, "
                          f"got {question!r}")
    choices = [field(row, f"choice{k}", str, where) for k in (1, 2)]
    gold = field(row, "label", int, where, required=False)
    if gold is not None and gold not in (0, 1):
        raise InvalidData(f"{where}: COPA 'label' must be 0 or 1, got {gold}")
    item_id = row.get("idx", row.get("id"))
    return Item([copa_statement(premise, c, question) for c in choices], gold,
                None if item_id is None else str(item_id))


def read_items(path: str | Path) -> list[Item]:
    """Items of a jsonl file (generic or COPA rows); errors name the line."""
    items = []
    for number, row in read_jsonl(path, GENERIC_FIELDS | COPA_FIELDS, "items"):
        where = row_name(path, number)
        if "candidates" in row:
            extra = sorted(set(row) - GENERIC_FIELDS)
            if extra:
                raise InvalidData(f"{where}: field(s) {extra} do not go with 'candidates'; "
                                  f"a row with candidates may hold {sorted(GENERIC_FIELDS)}")
            items.append(_generic(row, where))
        elif "premise" in row:
            items.append(_copa(row, where))
        else:
            raise InvalidData(f"{where}: needs 'candidates' (a list of statements) or COPA "
                              "fields 'premise', 'choice1', 'choice2', 'question'")
    return items
