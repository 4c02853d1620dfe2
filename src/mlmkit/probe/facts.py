"""Knowledge-probe facts (LAMA): a relation template with a subject, or a masked sentence.

Two row shapes are accepted (LAMA's own field names work too):

- `{"template": "[X] was born in [Y].", "subject": "Dante", "object": "Florence"}`
  (`sub_label` / `obj_label` / `predicate_id` are aliases of subject / object / relation);
- `{"masked_sentence": "Dante was born in [MASK].", "obj_label": "Florence"}`
  (`masked_sentences`, a list, is joined with spaces into one input).

The relation (for per-relation metrics) is `relation` / `predicate_id`, else the template.
LAMA's metadata fields (`obj_uri`, `evidences`, ...) are ignored; any other field is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlmkit.errors import InvalidData
from mlmkit.probe.jsonl import field, read_jsonl, row_name
from mlmkit.probe.prompt import Cloze, split_cloze

ALIASES = {"subject": "sub_label", "object": "obj_label", "relation": "predicate_id",
           "id": "uuid"}
# Metadata in LAMA's own files: accepted and ignored (anything else is a typo, an error).
LAMA_METADATA = {"sub_uri", "obj_uri", "sub_surface", "obj_surface", "evidences", "judgments",
                 "lineid", "pred", "masked_negations", "negated"}
FIELDS = {"template", "masked_sentence", "masked_sentences", *ALIASES, *ALIASES.values(),
          *LAMA_METADATA}
NO_RELATION = "-"


@dataclass(frozen=True)
class Fact:
    """One cloze fact: the prompt around the gap, the gold object, and its relation."""

    cloze: Cloze
    answer: str
    relation: str
    where: str  # "facts.jsonl, line 3": where the fact came from, for messages

    @property
    def prompt(self) -> str:
        return self.cloze.masked("[MASK]")


def _pick(row: dict, name: str, where: str, required: bool):
    alias = ALIASES[name]
    if name in row and alias in row and row[name] != row[alias]:
        raise InvalidData(f"{where}: {name!r} and {alias!r} disagree; give one of them")
    if name not in row and alias not in row:
        if required:
            raise InvalidData(f"{where}: missing field {name!r} (or {alias!r})")
        return None
    return field(row, name if name in row else alias, str, where)


def parse_fact(row: dict, where: str, templates: dict[str, str] | None = None) -> Fact:
    """A Fact from one row (either shape); errors name `where` and the field.

    `templates` maps relations to templates, for rows with a subject and a relation but
    no template of their own (LAMA's T-REx rows with its relations.jsonl).
    """
    unknown = sorted(set(row) - FIELDS)
    if unknown:
        raise InvalidData(f"{where}: unknown field(s) {unknown}; facts may hold {sorted(FIELDS)}")
    relation = _pick(row, "relation", where, required=False)
    sentence_given = "masked_sentence" in row or "masked_sentences" in row
    if "template" not in row and not sentence_given and templates and relation in templates:
        row = {**row, "template": templates[relation]}
    answer = _pick(row, "object", where, required=True).strip()
    if not answer:
        raise InvalidData(f"{where}: the object is empty")
    if "template" in row:
        if "masked_sentence" in row or "masked_sentences" in row:
            raise InvalidData(f"{where}: give a template or a masked sentence, not both")
        template = field(row, "template", str, where)
        subject = _pick(row, "subject", where, required=True)
        if template.count("[Y]") != 1 or "[X]" not in template:
            raise InvalidData(f"{where}: the template {template!r} needs [X] (the subject) and "
                              "exactly one [Y] (the object), e.g. '[X] was born in [Y].'")
        cloze = split_cloze(template.replace("[X]", subject).replace("[Y]", "[MASK]"),
                            f"{where}: the template")
        return Fact(cloze, answer, relation or template, where)
    if "masked_sentence" in row:
        sentence = field(row, "masked_sentence", str, where)
    elif "masked_sentences" in row:
        parts = field(row, "masked_sentences", list, where)
        if not parts or not all(isinstance(p, str) for p in parts):
            raise InvalidData(f"{where}: 'masked_sentences' must be a non-empty list of strings")
        sentence = " ".join(parts)
    else:
        raise InvalidData(f"{where}: needs 'template' (with 'subject' and 'object'), "
                          "'masked_sentence' (with 'obj_label'), or a relation that the "
                          "relation templates (--relations) give a template for")
    cloze = split_cloze(sentence, f"{where}: the masked sentence")
    return Fact(cloze, answer, relation or NO_RELATION, where)


def read_templates(path: str | Path) -> dict[str, str]:
    """relation -> template from a jsonl of `{"relation": "P19", "template": "[X] ..."}` rows
    (LAMA's relations.jsonl, with `relation` and `template` among its fields, works as is)."""
    templates = {}
    for number, row in read_jsonl(path, {"relation", "template", "label", "description",
                                         "type"}, "relation templates"):
        where = row_name(path, number)
        templates[field(row, "relation", str, where)] = field(row, "template", str, where)
    return templates


def read_facts(path: str | Path, templates: dict[str, str] | None = None) -> list[Fact]:
    """Every fact of a jsonl file, in order."""
    return [parse_fact(row, row_name(path, number), templates)
            for number, row in read_jsonl(path, FIELDS, "facts")]


def as_facts(facts, templates: dict[str, str] | None = None) -> list[Fact]:
    """Facts from a path, or a list of Facts / row dicts."""
    if isinstance(facts, (str, Path)):
        return read_facts(facts, templates)
    out = []
    for i, fact in enumerate(facts):
        if isinstance(fact, Fact):
            out.append(fact)
        elif isinstance(fact, dict):
            out.append(parse_fact(fact, f"fact {i}", templates))
        else:
            raise InvalidData(f"fact {i} is a {type(fact).__name__}: pass dicts or Facts")
    if not out:
        raise InvalidData("knowledge_probe needs at least one fact")
    return out
