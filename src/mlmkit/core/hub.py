"""Hugging Face hub access: the local caches only, for a while (`--offline`), and whether
the hub can be reached at all."""

from __future__ import annotations

import importlib
import socket
import time
import urllib.request
from contextlib import contextmanager
from urllib.parse import urlparse

from huggingface_hub import constants


@contextmanager
def hub_offline(enabled: bool):
    """With `enabled`: Hugging Face datasets names and hub models are read from the local
    caches only (no network) for the duration, as `HF_HUB_OFFLINE=1` would do, and the
    settings are restored afterwards (no process-wide side effect). Without it: nothing is
    changed (the libraries' normal behaviour, which honours `HF_HUB_OFFLINE` if it is set)."""
    if not enabled:
        yield
        return
    saved = []  # transformers asks huggingface_hub.constants (is_offline_mode) at each call
    for module_name, names in (("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
                               ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in names:
            if hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, True)
    try:
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


def offline_now() -> bool:
    """Whether the hub libraries read the local caches only (`HF_HUB_OFFLINE=1`, or inside
    `hub_offline`)."""
    return bool(constants.HF_HUB_OFFLINE)


def hub_unreachable() -> bool:
    """Whether a hub request would wait on a network that is not there: not offline already,
    and `hub_reachable` finds no hub. Callers then read the caches at once (`hub_offline`)."""
    return not offline_now() and not hub_reachable()


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's host (`HF_ENDPOINT`, default huggingface.co) accepts a connection
    within `timeout` seconds. Without a network, huggingface_hub retries every request for
    about 25 s and logs each try before it falls back to the cache: asking once first lets a
    caller use the cache at once (`hub_offline`) and fail in one line. Behind a proxy
    (`HTTPS_PROXY`, ...) the host is not reached directly, so the libraries are left to try
    through it. The answer is kept for a minute (a run asks for each split and file)."""
    url = urlparse(constants.ENDPOINT)
    proxies = urllib.request.getproxies()
    if (proxies.get(url.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
            url.hostname or ""):
        return True
    key = (url.hostname, url.port, url.scheme)
    known = _REACHABLE.get(key)
    if known is not None and time.monotonic() - known[1] < 60:
        return known[0]
    answer = _connects(url, timeout)
    _REACHABLE[key] = (answer, time.monotonic())
    return answer


_REACHABLE: dict = {}


def _connects(url, timeout: float) -> bool:
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False
