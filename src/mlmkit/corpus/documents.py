"""A corpus document that remembers the id it had in its source.

Readers yield documents as plain strings; a source whose records are named (a FASTA
file: each record's header) yields `Document`s instead, strings that carry the name as
`.id`. Everything that reads text reads them as the strings they are; the shard builder
(`corpus.shards`) keeps the ids beside the tokens, so a pretraining shard's document i
can be traced back to the record it came from.
"""

from __future__ import annotations

from mlmkit.errors import InvalidData


class Document(str):
    """A document's text (the string itself) and its id in the source (`.id`)."""

    id: str

    def __new__(cls, text: str, id: str):
        if "\n" in id or "\r" in id:
            raise InvalidData(f"document id {id!r} spans lines: an id is one line")
        document = super().__new__(cls, text)
        document.id = id
        return document

    def __reduce__(self):  # pickled for the tokenizing workers: text and id both travel
        return Document, (str(self), self.id)


def document_id(document: str) -> str | None:
    """The source id of `document`, or None for a plain string."""
    return getattr(document, "id", None)
