"""The state every route shares: the served models, their workers and check tokenizers,
and the bounds (`ServeConfig`); the checks a request goes through before it reaches a model,
and the library calls the gathering workers run."""

from __future__ import annotations

import asyncio
import copy
import math
import time

from fastapi import Request

from mlmkit.errors import InvalidArgument
from mlmkit.options.serving import ServeConfig
from mlmkit.serve.adapters import stride_gap, token_alternatives
from mlmkit.serve.http_errors import HTTPError
from mlmkit.serve.worker import ModelWorker, Work

MAX_VERBALIZER_WORDS = 1_000
"""Words of a /v1/classify verbalizer, all labels together: 400 multi-token words cost 0.8 s
of the README's tiny model per text, and a 1 MB body held ~50,000 (hours for 64 texts)."""

MAX_CANDIDATES = 256
"""Span-length combinations of one /v1/infill template (a bound: beyond it is a 413)."""


class Server:
    """The models, their workers and check tokenizers, and the bounds."""

    def __init__(self, models: dict, config: ServeConfig):
        if not models:
            raise InvalidArgument("no model given: pass one or more models")
        self.models, self.config = models, config
        self.workers = {name: ModelWorker(name, config.batching, config.batch_window_ms,
                                          config.max_batch_texts, config.max_batch_tokens,
                                          patience=config.timeout / 4)
                        for name in models}
        self.admitted = 0  # requests queued or running, every model together
        # A copy per model, used on the event loop's thread for length checks, so no
        # tokenizer is ever shared between two threads.
        self.check_tokenizers = {name: copy.deepcopy(m.tokenizer) for name, m in models.items()}
        self.check_backends = {name: _length_backend(t) for name, t in
                               self.check_tokenizers.items()}
        self.started = time.time()
        self.on_rejected = None  # the metrics' counter of 429s

    # --- requests -------------------------------------------------------------------------------

    def model_name(self, name: str | None) -> str:
        if name is None:
            return next(iter(self.models))
        if name not in self.models:
            raise HTTPError(404, "UnknownModel", f"model {name!r} is not served here: use one "
                            f"of {', '.join(self.models)} (GET /v1/models)")
        return name

    def texts(self, value, what: str, *, allow_empty: bool = False) -> list[str]:
        texts = [value] if isinstance(value, str) else list(value)
        if not texts:
            raise HTTPError(400, "InvalidArgument", f"{what} is an empty list: send at least "
                            "one text")
        if len(texts) > self.config.max_texts:
            raise HTTPError(413, "TooLarge", f"{what} has {len(texts)} entries, more than "
                            f"{self.config.max_texts} (--max-texts): split the request")
        for i, text in enumerate(texts):
            name = what if isinstance(value, str) else f"{what}[{i}]"
            if not allow_empty and not text.strip():
                raise HTTPError(400, "InvalidArgument", f"{name} is empty: send text to "
                                "work on")
            if "\x00" in text:
                raise HTTPError(400, "InvalidArgument", f"{name} holds a NUL character: send "
                                "plain text")
            if len(text) > 20 * self.config.max_tokens:
                raise HTTPError(413, "TooLarge", f"{name} has {len(text):,} characters, too "
                                f"many for {self.config.max_tokens} tokens (--max-tokens)")
        return texts

    def token_lengths(self, name: str, texts: list[str], special: bool = True) -> list[int]:
        """Each text's length in tokens (the model's special tokens added when `special`)."""
        backend = self.check_backends[name]
        if backend is not None:
            return [len(e) for e in backend.encode_batch(texts, add_special_tokens=special)]
        tokenizer = self.check_tokenizers[name]
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=special,
                                              truncation=False, verbose=False)["input_ids"]]

    def check_tokens(self, name: str, texts: list[str], what: str, single: bool) -> list[int]:
        """Each text within --max-tokens and the request within --max-request-tokens; the
        lengths in tokens."""
        lengths = self.token_lengths(name, texts)
        for i, n in enumerate(lengths):
            if n > self.config.max_tokens:
                label = what if single else f"{what}[{i}]"
                raise HTTPError(413, "TooLarge", f"{label} has {n} tokens, more than "
                                f"{self.config.max_tokens} (--max-tokens): shorten it")
        self.request_tokens(sum(lengths), what)
        return lengths

    def request_tokens(self, total: int, what: str) -> None:
        """A request's tokens, all its filled templates together, within --max-request-tokens."""
        if total > self.config.max_request_tokens:
            raise HTTPError(413, "TooLarge", f"{what} make {total:,} tokens, more than "
                            f"{self.config.max_request_tokens:,} (--max-request-tokens): send "
                            "fewer or shorter texts")

    def filled_template(self, template: str, placeholder: str, texts: list[str],
                        single: bool) -> list[str]:
        """`template` with `placeholder` replaced by each text, checked BEFORE any is built:
        the length of each filled template is counted (placeholders times the text's length),
        so a template with thousands of placeholders is refused at once instead of building
        gigabytes of prompts. Each filled template is a text of --max-tokens at most (and
        ~20 characters per token is more than any tokenizer packs)."""
        c = self.config
        repeats = template.count(placeholder)
        rest = len(template) - repeats * len(placeholder)
        per_text, per_request = 20 * c.max_tokens, 20 * c.max_request_tokens
        total = 0
        for i, text in enumerate(texts):
            size = rest + repeats * len(text)
            total += size
            if size > per_text:
                label = "texts" if single else f"texts[{i}]"
                raise HTTPError(413, "TooLarge", f"template holds {placeholder} {repeats} "
                                f"time(s): with {label} it makes {size:,} characters, too "
                                f"many for {c.max_tokens} tokens (--max-tokens): use "
                                f"{placeholder} once, or shorter texts")
        if total > per_request:
            raise HTTPError(413, "TooLarge", f"template and texts make {total:,} characters, "
                            f"too many for {c.max_request_tokens:,} tokens "
                            "(--max-request-tokens): send fewer or shorter texts")
        return [template.replace(placeholder, text) for text in texts]

    def check_words(self, name: str, words: list[str]) -> list[int]:
        """Each verbalizer word within --max-word-tokens (a word of m tokens costs m model
        passes per text, each over the prompt and the word); their lengths in tokens."""
        c = self.config
        for word in words:
            if len(word) > 20 * c.max_word_tokens:
                raise HTTPError(413, "TooLarge", f"verbalizer word {word[:100]!r} has "
                                f"{len(word):,} characters, too many for {c.max_word_tokens} "
                                "tokens (--max-word-tokens): use short label words")
        lengths = self.token_lengths(name, words, special=False)
        for word, n in zip(words, lengths, strict=True):
            if n > c.max_word_tokens:
                raise HTTPError(413, "TooLarge", f"verbalizer word {word!r} has {n} tokens, "
                                f"more than {c.max_word_tokens} (--max-word-tokens): use "
                                "short label words")
        return lengths

    def count(self, name: str, value, low: int, high: int, flag: str | None = None) -> None:
        if value is None:
            return
        if value < low or (flag is None and value > high):
            # A zero or negative count is a bad value (400), not a request too large (413).
            raise HTTPError(400, "InvalidArgument", f"{name}={value} is outside {low}..{high}")
        if value > high:
            raise HTTPError(413, "TooLarge", f"{name}={value} is outside {low}..{high} ({flag})")

    def admit(self, name: str, work: Work) -> None:
        """Refuse `work` at once when it could never run (413) or the model's queue is full
        (429 with Retry-After): a request is never queued beyond what the model can get
        through, so every answer comes in bounded time."""
        c, worker = self.config, self.workers[name]
        cost = work.cost
        if cost > c.max_queued_tokens:
            raise HTTPError(413, "TooLarge", f"this request is {cost:,} tokens of model work, "
                            f"more than {c.max_queued_tokens:,} (--max-queued-tokens): send "
                            "fewer or shorter texts")
        if self.admitted >= c.max_concurrent_requests:
            raise self.overloaded(worker, f"{self.admitted} requests are queued or running, "
                                  f"the most this server takes (--max-concurrent-requests)")
        if worker.queued_cost + cost > c.max_queued_tokens:
            raise self.overloaded(worker, f"model {name!r} has {worker.queued_cost:,} tokens "
                                  f"of work queued; this request's {cost:,} would pass "
                                  f"{c.max_queued_tokens:,} (--max-queued-tokens)")

    def overloaded(self, worker: ModelWorker, why: str) -> HTTPError:
        wait = max(1, min(int(self.config.timeout), math.ceil(worker.seconds_to_drain())))
        if self.on_rejected is not None:
            self.on_rejected()
        return HTTPError(429, "Overloaded", f"the server is busy: {why}; retry after {wait} s",
                         headers={"Retry-After": str(wait)})

    async def answer(self, request: Request, name: str, work: Work):
        """Submit `work` to the model's worker; wait for it, the timeout or the client leaving."""
        self.admit(name, work)
        self.admitted += 1
        try:
            return await self.wait(request, self.workers[name].submit(work))
        finally:
            self.admitted -= 1

    async def answer_each(self, request: Request, works: list[tuple[str, Work]]) -> list:
        """One request's works on several models (compare), admitted all or none: a model
        whose queue is full refuses the request (429) before any other model works on it."""
        for name, work in works:
            self.admit(name, work)
        self.admitted += len(works)
        try:
            return await self.wait(request, asyncio.gather(
                *(self.workers[name].submit(work) for name, work in works)))
        finally:
            self.admitted -= len(works)

    async def wait(self, request: Request, future: asyncio.Future):
        """The result of a submitted work; its future cancelled on timeout or hang-up."""
        # Woken by whichever comes first: the result, the client hanging up (the server's
        # receive channel says so once the body is read) or the timeout. Polling both every
        # 50 ms cost each waiting request ~0.1 ms of the event loop's CPU per poll, most of the
        # loop's time when many requests queue (issue 16: batched vs unbatched score).
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({future, gone}, timeout=self.config.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if future in done:
            return future.result()
        future.cancel()
        if gone in done:
            raise HTTPError(499, "ClientClosed", "the client closed the connection")
        raise HTTPError(504, "Timeout", f"the request took more than {self.config.timeout:g} s "
                        "(--timeout): send fewer texts or fewer steps")

    # --- the library calls ----------------------------------------------------------------------

    def score_run(self, name: str, metric, per_token, per_word, unk, alternatives, stride,
                  reduction="sum"):
        """The score call over (text, span or None, what the request calls the text)
        inputs: requests with and without spans share one call (a None span is the whole
        text, as in `mlmkit.score`)."""

        mlm = self.models[name]

        def call(items):
            texts = [text for text, _, _ in items]
            spans = [span for _, span, _ in items]
            spans = None if all(s is None for s in spans) else spans
            gap = stride_gap(mlm, texts, unk, stride, spans)
            if gap is not None:  # the library's message, naming the request's text
                i, message = gap
                raise InvalidArgument(message.replace("of a text", f"of {items[i][2]}", 1))
            results = mlm.score(texts, metric=metric, per_token=per_token, per_word=per_word,
                                spans=spans, unk=unk, stride=stride, reduction=reduction,
                                progress=False)
            alts = token_alternatives(mlm, texts, alternatives, unk, metric=metric,
                                      stride=stride, spans=spans, batch_tokens=mlm.batch_tokens,
                                      precision=mlm.precision) \
                if alternatives else [None] * len(texts)
            return [(r.to_dict(), a) for r, a in zip(results, alts, strict=True)]

        return call

    def fill_run(self, name: str, top_k, mode, targets=None):
        mlm = self.models[name]

        def call(texts):
            return [r.to_dict() for r in mlm.fill(texts, top_k=top_k, mode=mode,
                                                  targets=targets, progress=False)]

        return call

    def embed_run(self, name: str, options: dict):
        """The embed call over gathered texts: one float32 row per text."""
        mlm = self.models[name]

        def call(texts):
            return list(mlm.embed(texts, progress=False, **options))

        return call



def score_costs(lengths: list[int], window: int) -> list[int]:
    """Tokens the model reads to score texts of `lengths` tokens: one masked copy (of the
    text, or of its window) per token."""
    return [n * min(n, window) for n in lengths]


def fill_costs(texts: list[str], lengths: list[int], mode: str) -> list[int]:
    """Tokens the model reads to fill texts of `lengths` tokens: once, or once per mask
    (joint)."""
    if mode != "joint":
        return list(lengths)
    return [n * max(1, t.count("[MASK]") + t.count("<mask>")) for t, n in
            zip(texts, lengths, strict=True)]


def server_of(request: Request) -> Server:
    """The server of the application a request reached (`create_app` sets it)."""
    return request.app.state.server


def _length_backend(tokenizer):
    """The Rust tokenizer of a fast `tokenizer` (its private copy), set up once as the
    library's call leaves it (special tokens added, no truncation, no padding), so a length
    check is one `encode_batch` without the Python wrapper's conversions (~0.2 ms per
    request on the event loop); None for a slow tokenizer (checked through its call)."""
    backend = getattr(tokenizer, "_tokenizer", None) if getattr(tokenizer, "is_fast",
                                                                 False) else None
    if backend is None or not hasattr(backend, "encode_batch"):
        return None
    tokenizer(["a"], add_special_tokens=True, truncation=False, verbose=False)
    if backend.truncation is not None or backend.padding is not None:
        return None
    return backend


async def _disconnected(request: Request) -> None:
    """Returns when the client has closed the connection (after the body was read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
