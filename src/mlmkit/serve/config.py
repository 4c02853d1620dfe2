"""What a server allows: bounds on every request, batching, timeouts and the API key.

Every bound is a flag of `mlmkit serve` with the same name; a request beyond one gets a 4xx
JSON error that names the bound and the flag, never a silent cut.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mlmkit.core import checks
from mlmkit.errors import InvalidArgument

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeConfig:
    """Bounds, batching and access of one server (each field is a flag of `mlmkit serve`)."""

    max_body_bytes: int = 1_000_000
    """Largest request body (--max-body-bytes); larger bodies get 413."""
    max_texts: int = 64
    """Texts (or prompts, templates) per request (--max-texts)."""
    max_tokens: int = 512
    """Tokens per text, and the longest generation (--max-tokens)."""
    max_steps: int = 512
    """Unmasking steps per generate/infill request (--max-steps)."""
    max_top_k: int = 100
    """Candidates per mask in fill, alternatives per token in score (--max-top-k)."""
    timeout: float = 60.0
    """Seconds a request may take, queueing included (--timeout); then 504."""
    batching: bool = True
    """Gather concurrent score/fill requests into one batch (--no-batching: one call each)."""
    batch_window_ms: float = 5.0
    """How long an idle worker waits for more requests before running a batch (--batch-window-ms)."""
    max_batch_texts: int = 512
    """Texts one gathered batch may hold (--max-batch-texts)."""
    batch_tokens: int | None = None
    """The token budget of the library calls (--batch-tokens; None: sized for the model)."""
    precision: str = "auto"
    threads: int | None = None
    api_key: str | None = None
    """When set, every /v1 request must send `Authorization: Bearer KEY` or `X-API-Key: KEY`."""

    def __post_init__(self):
        checks.count("max_body_bytes", self.max_body_bytes, 64)
        checks.count("max_texts", self.max_texts, 1, 100_000)
        checks.count("max_tokens", self.max_tokens, 1, 1_000_000)
        checks.count("max_steps", self.max_steps, 1, 100_000)
        checks.count("max_top_k", self.max_top_k, 1, 1_000_000)
        checks.positive("timeout", self.timeout)
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


def check_host(host: str, api_key: str | None) -> None:
    """A server reachable from other machines must ask for a key."""
    if not is_loopback(host) and api_key is None:
        raise InvalidArgument(
            f"--host {host} makes the server reachable from other machines, and it runs models "
            "for anyone who can reach it: pass --api-key KEY (or --api-key-file) too, or keep "
            "the default --host 127.0.0.1")
