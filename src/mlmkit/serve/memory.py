"""Give freed memory back to the operating system once a burst of work is over.

The model's batches allocate and free large tensors; glibc's malloc keeps the freed pages in
its arenas (and raises its mmap threshold after large frees, so later large tensors come from
those arenas too), so a server's resident memory stayed at its burst's peak long after the
burst: a replica sized for its idle memory was killed by the next one. `malloc_trim` returns
the free pages of every arena; elsewhere (macOS, musl) there is nothing to call and nothing
is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def release_free_memory() -> bool:
    """Return malloc's free pages to the system; False where the C library has no
    `malloc_trim` (not glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
