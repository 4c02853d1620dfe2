"""Request bodies of the API: strict types, unknown fields refused, no NaN or Infinity.

Ranges and choices are checked by the library functions themselves (their `InvalidArgument`
becomes a 400 naming the field), and the server's bounds by `mlmkit.serve.app`; these
models only fix the shapes, so the OpenAPI schema documents every field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

Texts = str | list[str]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class FillRequest(Body):
    texts: Texts = Field(description="A text with [MASK] / <mask>, or a list of them.")
    model: str | None = Field(None, description="A served model (default: the first).")
    top_k: int = 5
    mode: Literal["independent", "joint"] = "independent"


class ScoreRequest(Body):
    texts: Texts = Field(description="A text or a list of texts to score.")
    model: str | None = None
    metric: Literal["pll", "pll_word_l2r"] = "pll"
    per_token: bool = False
    per_word: bool = False
    unk: Literal["score", "skip"] = "score"
    stride: int = Field(1, description="Texts longer than the model takes: windows start at "
                        "multiples of this (the CLI's --stride).")
    alternatives: int = Field(0, description="Per scored token, the k likeliest tokens at its "
                              "position when masked (needs per_token; 0: none).")


def _sampler_fields() -> dict:
    """Every field of `SamplerOptions` (the CLI's sampler flags), with its type and default,
    so a reveal policy added there is a request field here the same day."""
    import dataclasses
    import typing

    from mlmkit.generate.options import SamplerOptions

    hints = typing.get_type_hints(SamplerOptions)
    return {f.name: (hints[f.name], f.default) for f in dataclasses.fields(SamplerOptions)}


SAMPLER_FIELDS = _sampler_fields()

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
    aggregate: Literal["logsumexp", "mean", "max"] = "logsumexp"
    gold: str | int | list[str | int] | None = Field(
        None, description="The gold label of each text (a label of the verbalizer), for "
        "accuracy, as mlmkit.cloze_classify's gold and the CLI's label field.")


class CompareRequest(Body):
    text: str
    models: list[str] | None = Field(None, description="Two or more served models "
                                     "(default: every served model).")
    metric: Literal["pll", "pll_word_l2r"] = "pll"
    unk: Literal["score", "skip"] = "score"
    stride: int = 1
