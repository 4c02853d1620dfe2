"""Hugging Face hub access: the local caches only, for a while (`--offline`), and whether
the hub can be reached at all."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def hub_offline(enabled: bool):
    """With `enabled`: Hugging Face datasets names and hub models are read from the local
    caches only (no network) for the duration, as `HF_HUB_OFFLINE=1` would do, and the
    settings are restored afterwards (no process-wide side effect). Without it: nothing is
    changed (the libraries' normal behaviour, which honours `HF_HUB_OFFLINE` if it is set)."""
    if not enabled:
        yield
        return
    import importlib

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


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's host (`HF_ENDPOINT`, default huggingface.co) accepts a connection
    within `timeout` seconds. Without a network, huggingface_hub retries every request for
    about 25 s and logs each try before it falls back to the cache: asking once first lets a
    caller use the cache at once (`hub_offline`) and fail in one line."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False
