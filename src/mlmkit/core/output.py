"""One writer of result files: `-` is standard output; a file is written to a temporary
name beside it and renamed into place when complete, so a failure or a kill never leaves
half a file; an output that is one of the inputs is refused before any work."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from mlmkit.errors import PathError

STDOUT = "-"


def same_file(a, b) -> bool:
    if STDOUT in (str(a), str(b)):
        return False
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except OSError:
        return False


def check_output_path(path, inputs=(), what: str = "output") -> None:
    """Refuse an output that cannot be written, or that would overwrite an input."""
    if path is None or str(path) == STDOUT:
        return
    target = Path(path).expanduser()
    for source in inputs:
        if source is not None and same_file(target, source):
            raise PathError(f"{what} {str(path)!r} is also an input: writing it would destroy "
                            "the input; choose another output path")
    if target.is_dir():
        raise PathError(f"{what} {str(path)!r} is a directory: pass a file path (or - for "
                        "standard output)")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise PathError(f"{what} {str(path)!r}: {str(parent)!r} is a file, not a directory; "
                        "choose another output path")
    existing = next((p for p in [parent, *parent.parents] if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise PathError(f"{what} {str(path)!r} cannot be written: {str(existing)!r} is not "
                        "writable; choose another output path")


def temporary_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def open_output(path, inputs=(), what: str = "output", mode: str = "w"):
    """A text (or, with mode 'wb', binary) handle for `path`; `-` writes standard output.

    The file appears only when the block finishes without an exception; created with the
    process's umask (like any other file the user writes).
    """
    if str(path) == STDOUT:
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        yield stream
        stream.flush()
        return
    check_output_path(path, inputs, what)
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_path(target)
    try:
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with open(temporary, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
        fsync_directory(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def write_text(path, text: str, inputs=(), what: str = "output") -> None:
    """Write `text` atomically to `path` (or standard output for `-`)."""
    with open_output(path, inputs, what) as handle:
        handle.write(text)
