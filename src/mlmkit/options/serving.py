"""The server's options: bounds on every request, batching, timeouts and the API key.

Every bound is a flag of `mlmkit serve` with the same name; a request beyond one gets a 4xx
JSON error that names the bound and the flag, never a silent cut. `check_host`: who may reach
the server (a non-loopback bind needs a key).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mlmkit.core import checks
from mlmkit.errors import InvalidArgument
from mlmkit.options import option


@dataclass(frozen=True)
class ServeConfig:
    """Bounds, batching and access of one server (each field is a flag of `mlmkit serve`)."""

    max_body_bytes: int = option(1_000_000, "Largest request body (larger ones get 413).",
                                 min=64)
    max_texts: int = option(64, "Texts (or prompts, templates) per request.", min=1)
    max_tokens: int = option(512, "Tokens per text, and the longest generation.", min=1)
    max_steps: int = option(512, "Unmasking steps per generate/infill request.", min=1)
    max_top_k: int = option(100, "Candidates per mask (fill) and alternatives per token "
                            "(score).", min=1)
    max_request_tokens: int = option(131_072, "Tokens of one request once its templates are "
                                     "filled: every prompt, plus the verbalizer words read "
                                     "with each text.", min=1)
    max_word_tokens: int = option(32, "Tokens of one verbalizer word (/v1/classify).", min=1)
    max_batch_tokens: int = option(65_536, "Model work of one gathered batch, in tokens read "
                                   "(a text of n tokens costs n to fill, n*n to score); a "
                                   "larger request is split into batches that interleave "
                                   "with others.", min=1)
    max_queued_tokens: int = option(33_554_432, "Model work queued per model, in tokens read; "
                                    "beyond it a request gets 429 with Retry-After.", min=1)
    max_concurrent_requests: int = option(256, "Requests admitted at once (queued or "
                                          "running); beyond it 429 with Retry-After.", min=1)
    timeout: float = option(60.0, "Seconds a request may take (queueing included); then 504.")
    read_timeout: float = option(30.0, "Seconds a connection has to send a whole request "
                                 "(headers and body); then it is closed.")
    keep_alive_timeout: float = option(5.0, "Seconds an idle connection is kept open after "
                                       "a response.")
    max_connections: int = option(1024, "Open connections (capped below the process's file "
                                  "descriptors); more are closed at once.", min=1)
    max_header_bytes: int = option(32_768, "Request line and headers (larger get 431).",
                                   min=1024)
    allowed_hosts: str | None = option(None, "Host names the server answers besides "
                                       "loopback's (comma-separated, e.g. the proxy's "
                                       "name); a loopback server refuses any other Host "
                                       "header (DNS rebinding).")
    access_log: bool = option(False, "One JSON line per request on stderr (time, client, "
                              "method, path, status, seconds).")
    ssl_certfile: str | None = option(None, "TLS: the certificate file (with "
                                      "--ssl-keyfile); without them, plain HTTP.")
    ssl_keyfile: str | None = option(None, "TLS: the private key file of --ssl-certfile.")
    batching: bool = option(True, "Gather concurrent score and fill requests into one batch.")
    batch_window_ms: float = option(5.0, "How long an idle model waits for more requests "
                                    "before a batch.")
    max_batch_texts: int = option(512, "Texts in one gathered batch.", min=1)
    batch_tokens: int | None = option(None, "The token budget of the library calls (None: "
                                      "sized for the model).")
    precision: str = option("auto", "auto, fp32 or bf16 (the library calls').")
    threads: int | None = option(None, "CPU threads of the library calls.")
    api_key: str | None = option(None, "When set, every /v1 request must send `Authorization: "
                                 "Bearer KEY` or `X-API-Key: KEY` (--api-key, --api-key-file).",
                                 cli=False)

    def __post_init__(self):
        checks.count("max_body_bytes", self.max_body_bytes, 64)
        checks.count("max_texts", self.max_texts, 1, 100_000)
        checks.count("max_tokens", self.max_tokens, 1, 1_000_000)
        checks.count("max_steps", self.max_steps, 1, 100_000)
        checks.count("max_top_k", self.max_top_k, 1, 1_000_000)
        checks.count("max_request_tokens", self.max_request_tokens, 1)
        checks.count("max_word_tokens", self.max_word_tokens, 1, 100_000)
        checks.count("max_batch_tokens", self.max_batch_tokens, 1)
        checks.count("max_queued_tokens", self.max_queued_tokens, 1)
        checks.count("max_concurrent_requests", self.max_concurrent_requests, 1, 1_000_000)
        checks.positive("timeout", self.timeout)
        checks.positive("read_timeout", self.read_timeout)
        checks.positive("keep_alive_timeout", self.keep_alive_timeout)
        checks.count("max_connections", self.max_connections, 1, 1_000_000)
        checks.count("max_header_bytes", self.max_header_bytes, 1024)
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise InvalidArgument("TLS needs both --ssl-certfile and --ssl-keyfile (or "
                                  "neither, for plain HTTP)")
        checks.non_negative("batch_window_ms", self.batch_window_ms)
        if self.batch_window_ms > 1000:  # each request that finds the model idle waits it
            raise InvalidArgument(f"batch_window_ms (--batch-window-ms) {self.batch_window_ms:g} "
                                  "is over a second, which every request would wait: a few "
                                  "milliseconds gather concurrent requests (default 5)")
        checks.count("max_batch_texts", self.max_batch_texts, 1, 1_000_000)
        if self.batch_tokens is not None:
            checks.count("batch_tokens", self.batch_tokens, 1)
        if self.api_key is not None and (not isinstance(self.api_key, str)
                                         or len(self.api_key.strip()) < 8):
            raise InvalidArgument("api_key (--api-key, --api-key-file) must have at least 8 "
                                  "characters: use a long random string, e.g. from `openssl "
                                  "rand -hex 16`")


LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, api_key: str | None) -> None:
    """A server reachable from other machines must ask for a key."""
    if not is_loopback(host) and api_key is None:
        raise InvalidArgument(
            f"--host {host} makes the server reachable from other machines, and it runs models "
            "for anyone who can reach it: pass --api-key KEY (or --api-key-file) too, or keep "
            "the default --host 127.0.0.1")
