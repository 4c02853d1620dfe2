"""Give freed memory back to the operating system once a burst of work is over.

The model's batches allocate and free large tensors; glibc's malloc keeps the freed pages in
its arenas (and raises its mmap threshold after large frees, so later large tensors come from
those arenas too), so a server's resident memory stayed at its burst's peak long after the
burst: a replica sized for its idle memory was killed by the next one. `malloc_trim` returns
the free pages of every arena; elsewhere (macOS, musl) there is nothing to call and nothing
is done.
"""

from __future__ import annotations

from mlmkit.core.libc import glibc


def release_free_memory() -> bool:
    """Return malloc's free pages to the system; False where the C library is not glibc."""
    libc = glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
