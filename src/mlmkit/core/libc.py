"""glibc's allocator controls (`mallopt`, `malloc_trim`), where the process runs on glibc.

Training keeps freed memory in the heap between steps (`mlmkit.training.runtime`), and the
server gives it back after a burst (`mlmkit.serve.memory`); both reach the C library here.
"""

from __future__ import annotations

import ctypes
import functools
import platform


@functools.cache
def glibc():
    """glibc's C library (for mallopt / malloc_trim), or None on another libc or OS."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None
