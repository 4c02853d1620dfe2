"""Request bodies of the API: strict types, unknown fields refused, no NaN or Infinity.

The task options come from their dataclasses (`mlmkit.options`: `Scoring`, `Sampling`), so a
field added there is a request field here, with its type, default, help and range. Choices
and the finer checks (an open end of a range, one option needing another) are the library
functions' own (their `InvalidArgument` becomes a 400 naming the field, as a bad sampler
does), and the server's bounds are `mlmkit.serve.server`'s; these models fix the shapes and
every number's range (no float field is left unbounded), so the OpenAPI schema documents
every field (a choice lists the library's options as its enum).
"""

from __future__ import annotations

import typing

from pydantic import BaseModel, ConfigDict, Field, create_model

from mlmkit.generation.fill_mask import MODES
from mlmkit.options import default_of, fields_of, types_of
from mlmkit.options.sampler import Sampling
from mlmkit.options.scoring import Scoring
from mlmkit.probe.cloze import AGGREGATES

Texts = str | list[str]


def choice(options: tuple, **extra):
    """A field with the library's default (the first option) that lists `options` in the
    schema; the library's own check refuses anything else (a 400 with its message)."""
    return Field(options[0], json_schema_extra={"enum": list(options)}, **extra)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class FillRequest(Body):
    texts: Texts = Field(description="A text with [MASK] / <mask>, or a list of them.")
    model: str | None = Field(None, description="A served model (default: the first).")
    top_k: int = 5
    mode: str = choice(MODES)
    targets: list[str] | None = Field(None, description="Only these tokens as candidates "
                                      "(words, as FillMaskPipeline's targets), scored over "
                                      "the whole vocabulary.")


class EmbeddingsRequest(Body):
    """The OpenAI embeddings request, and mlmkit's pooling options beside it."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              protected_namespaces=())
    input: Texts = Field(description="A text or a list of texts (token arrays are not taken).")
    model: str | None = Field(None, description="A served model (default: the first).")
    dimensions: int | None = Field(None, description="Keep the first N dimensions "
                                   "(Matryoshka), then normalise.")
    encoding_format: str = choice(("float", "base64"), description="float: lists of numbers; "
                                  "base64: the little-endian float32 bytes, base64-encoded.")
    user: str | None = Field(None, description="OpenAI's end-user id: accepted, not used.")
    pooling: str | None = Field(None, description="mean, cls, max, weighted-mean or "
                                "last-k-layers (default: a sentence-transformers model's "
                                "own, else mean).", json_schema_extra={
                                    "enum": ["mean", "cls", "max", "weighted-mean",
                                             "last-k-layers"]})
    normalize: bool = Field(True, description="Unit-length vectors, as OpenAI's are.")
    prompt: str | None = Field(None, description="Text put before every input.")



class EmbedSparseRequest(Body):
    """SPLADE vectors of texts: the heaviest vocabulary entries of each (mlmkit.embed_sparse)."""

    input: Texts = Field(description="A text or a list of texts.")
    model: str | None = Field(None, description="A served model (default: the first).")
    top_k: int = Field(64, description="Vocabulary entries kept per text, heaviest first.")

def option_fields(cls) -> dict:
    """The fields of an options dataclass as pydantic fields: its type, default and help. A
    Literal is a string whose choices the schema lists (as `choice` does): the library's own
    check refuses another, with its message. A number's `range` (or `min` and `max`) is the
    field's: a value outside it is a 422 naming the field, before any work."""
    types, result = types_of(cls), {}
    for field in fields_of(cls):
        kind, extra = types[field.name], {}
        low, high = field.metadata.get("range", (field.metadata.get("min"),
                                                 field.metadata.get("max")))
        bounds = {"ge": low, "le": high}
        extra.update({k: v for k, v in bounds.items() if v is not None})
        literal = next((k for k in (kind, *typing.get_args(kind))
                        if typing.get_origin(k) is typing.Literal), None)
        if literal is not None:
            extra["json_schema_extra"] = {"enum": list(typing.get_args(literal))}
            kind = str | None if type(None) in typing.get_args(kind) else str
        result[field.name] = (kind, Field(default_of(field), description=field.metadata["help"],
                                          **extra))
    return result


ScoringFields = create_model("ScoringFields", __base__=Body, **option_fields(Scoring))
"""Every scoring option (the CLI's flags of `mlmkit score`) as a request field of /v1/score."""


class ScoreRequest(ScoringFields):
    texts: Texts = Field(description="A text or a list of texts to score.")
    model: str | None = None
    spans: list[list[int] | None] | None = Field(
        None, description="Per text, the [start, end) character range to score, the rest "
        "being context (conditional scoring), or null for the whole text.")
    alternatives: int = Field(0, description="Per scored token, the k likeliest tokens at its "
                              "position when masked (needs per_token; 0: none).")


SAMPLER_FIELDS = option_fields(Sampling)
"""Every sampler option (the CLI's sampler flags) as a request field of generate and infill."""

SamplerFields = create_model(
    "SamplerFields", __base__=Body, model=(str | None, None),
    stream=(bool, Field(False, description="Server-sent events: the canvas after every step "
                        "(event 'step'), then the result (event 'result').")),
    **SAMPLER_FIELDS)


class GenerateRequest(SamplerFields):
    prompt: Texts = ""
    length: int = 64
    constraints: dict[str, str | int] | None = Field(
        None, description="Fixed generated positions: {\"3\": \"the\"} (0 = the first "
        "generated token), as the CLI's --fix 3=the.")


class InfillRequest(SamplerFields):
    template: Texts = Field(description="Text with [MASK], [MASK:n] or [MASK:a-b] spans.")
    max_candidates: int = 64


class ClassifyRequest(Body):
    texts: Texts
    model: str | None = None
    template: str = "{text} It was [MASK]."
    verbalizer: dict[str, str | list[str]] | None = Field(
        None, description="Label -> a word or words (default: positive great/good, negative "
        "terrible/bad), as mlmkit.cloze_classify and the CLI's --verbalizer take it.")
    aggregate: str = choice(AGGREGATES)
    gold: str | int | list[str | int] | None = Field(
        None, description="The gold label of each text (a label of the verbalizer), for "
        "accuracy, as mlmkit.cloze_classify's gold and the CLI's label field.")


SCORING_FIELDS = option_fields(Scoring)

CompareRequest = create_model(
    "CompareRequest", __base__=Body, text=(str, ...),
    models=(list[str] | None, Field(None, description="Two or more served models (default: "
                                    "every served model).")),
    **{name: SCORING_FIELDS[name] for name in ("metric", "unk", "stride")})
"""One text under several models: the scoring options that apply to a side-by-side view."""
