"""The state every route shares: the served models, their workers and check tokenizers,
and the bounds (`ServeConfig`); the checks a request goes through before it reaches a model,
and the library calls the gathering workers run."""

from __future__ import annotations

import asyncio
import copy
import time

from fastapi import Request

import mlmkit
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

PIECE_COST = 1_000_000
"""What one library call of a long request holds, in characters squared (PLL) or characters
times masks (joint fill): ~1,000 characters of text."""


class Server:
    """The models, their workers and check tokenizers, and the bounds."""

    def __init__(self, models: dict, config: ServeConfig):
        if not models:
            raise InvalidArgument("no model given: pass one or more models")
        self.models, self.config = models, config
        self.workers = {name: ModelWorker(name, config.batching, config.batch_window_ms,
                                          config.max_batch_texts) for name in models}
        # A copy per model, used on the event loop's thread for length checks, so no
        # tokenizer is ever shared between two threads.
        self.check_tokenizers = {name: copy.deepcopy(m.tokenizer) for name, m in models.items()}
        self.check_backends = {name: _length_backend(t) for name, t in
                               self.check_tokenizers.items()}
        self.started = time.time()

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

    def token_counts(self, name: str, texts: list[str]) -> list[int]:
        """Each text's tokens, special tokens included, by the model's check tokenizer."""
        backend = self.check_backends[name]
        if backend is not None:
            return [len(e) for e in backend.encode_batch(texts, add_special_tokens=True)]
        tokenizer = self.check_tokenizers[name]
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=True, truncation=False,
                                              verbose=False)["input_ids"]]

    def check_tokens(self, name: str, texts: list[str], what: str, single: bool) -> list[int]:
        """Refuse a text longer than --max-tokens (a 413 naming it); the token counts."""
        lengths = self.token_counts(name, texts)
        for i, n in enumerate(lengths):
            if n > self.config.max_tokens:
                label = what if single else f"{what}[{i}]"
                raise HTTPError(413, "TooLarge", f"{label} has {n} tokens, more than "
                                f"{self.config.max_tokens} (--max-tokens): shorten it")
        return lengths

    def count(self, name: str, value, low: int, high: int, flag: str | None = None) -> None:
        if value is None:
            return
        if value < low or (flag is None and value > high):
            # A zero or negative count is a bad value (400), not a request too large (413).
            raise HTTPError(400, "InvalidArgument", f"{name}={value} is outside {low}..{high}")
        if value > high:
            raise HTTPError(413, "TooLarge", f"{name}={value} is outside {low}..{high} ({flag})")

    async def answer(self, request: Request, name: str, work: Work):
        """Submit `work` to the model's worker; wait for it, the timeout or the client leaving."""
        return await self.wait(request, self.workers[name].submit(work))

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

    def score_run(self, name: str, metric, per_token, per_word, unk, alternatives, stride):
        """The score call over (text, span or None, what the request calls the text)
        inputs: requests with and without spans share one call (a None span is the whole
        text, as in `mlmkit.score`)."""

        mlm, c = self.models[name], self.config

        def call(items):
            texts = [text for text, _, _ in items]
            spans = [span for _, span, _ in items]
            spans = None if all(s is None for s in spans) else spans
            gap = stride_gap(mlm, texts, unk, stride, spans)
            if gap is not None:  # the library's message, naming the request's text
                i, message = gap
                raise InvalidArgument(message.replace("of a text", f"of {items[i][2]}", 1))
            results = mlmkit.score(mlm, texts, metric=metric, per_token=per_token,
                                   per_word=per_word, spans=spans, unk=unk, stride=stride,
                                   batch_tokens=c.batch_tokens, precision=c.precision,
                                   threads=c.threads, progress=False)
            alts = token_alternatives(mlm, texts, alternatives, unk, metric=metric,
                                      stride=stride, spans=spans, batch_tokens=c.batch_tokens,
                                      precision=c.precision) \
                if alternatives else [None] * len(texts)
            return [(r.to_dict(), a) for r, a in zip(results, alts, strict=True)]

        # PLL masks every token: a text's cost grows with its length squared.
        return self.in_pieces(name, call, lambda item: len(item[0]) ** 2)

    def fill_run(self, name: str, top_k, mode):
        mlm, c = self.models[name], self.config

        def call(texts):
            return [r.to_dict() for r in mlmkit.fill_mask(
                mlm, texts, top_k=top_k, mode=mode, batch_tokens=c.batch_tokens,
                precision=c.precision, threads=c.threads, progress=False)]

        if mode != "joint":
            return call  # one model call per text: nothing to stop in between
        return self.in_pieces(name, call, lambda text: len(text) * (
            text.count("[MASK]") + text.count("<mask>")))  # one model call per mask

    def embed_run(self, name: str, options: dict):
        """The embed call over gathered texts: one float32 row per text."""
        mlm, c = self.models[name], self.config

        def call(texts):
            vectors = mlmkit.embed(mlm, texts, batch_tokens=c.batch_tokens,
                                   precision=c.precision, threads=c.threads, progress=False,
                                   **options)
            return list(vectors)

        return call

    def in_pieces(self, name: str, call, cost):
        """`call` over the texts in pieces of about PIECE_COST (a piece holds one text at
        least), with a check in between: a gathered call whose requests were all given up
        (timeout, client gone) stops there. The largest request (64 texts of 512 tokens)
        took ~5 min of the model on the README's tiny model, long after its 504. A request of
        usual size is one piece, one library call."""
        worker = self.workers[name]

        def run(texts):
            out, piece, spent = [], [], 0
            for text in texts:
                if piece and spent + cost(text) > PIECE_COST:
                    worker.check()
                    out += call(piece)
                    piece, spent = [], 0
                piece.append(text)
                spent += cost(text)
            worker.check()
            return out + call(piece)

        return run


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
