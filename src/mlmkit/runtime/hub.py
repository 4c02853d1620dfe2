"""Hugging Face hub access: the local caches only, for a while (`--offline`)."""

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
