"""Request bodies of the API: strict types, unknown fields refused, no NaN or Infinity.

Ranges and choices are checked by the library functions themselves (their `InvalidArgument`
becomes a 400 naming the field), and the server's bounds by `mlmkit.serve.app`; these
models only fix the shapes, so the OpenAPI schema documents every field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
    alternatives: int = Field(0, description="Per scored token, the k likeliest tokens at its "
                              "position when masked (needs per_token; 0: none).")


class SamplerFields(Body):
    model: str | None = None
    steps: int | None = None
    sampler: str = "confidence"
    confidence: str = "prob"
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    block_length: int | None = None
    cfg_scale: float = 0.0
    seed: int = 0
    stream: bool = Field(False, description="Server-sent events: the canvas after every step "
                         "(event 'step'), then the result (event 'result').")


class GenerateRequest(SamplerFields):
    prompt: Texts = ""
    length: int = 64


class InfillRequest(SamplerFields):
    template: Texts = Field(description="Text with [MASK], [MASK:n] or [MASK:a-b] spans.")
    max_candidates: int = 64


class ClassifyRequest(Body):
    texts: Texts
    model: str | None = None
    template: str = "{text} It was [MASK]."
    verbalizer: dict[str, list[str]] | None = Field(
        None, description="Label -> words (default: positive great/good, negative terrible/bad).")
    aggregate: Literal["logsumexp", "mean", "max"] = "logsumexp"


class CompareRequest(Body):
    text: str
    models: list[str] | None = Field(None, description="Two or more served models "
                                     "(default: every served model).")
    metric: Literal["pll", "pll_word_l2r"] = "pll"
