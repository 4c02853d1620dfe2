"""Files and folders written whole or not at all, durably, and no debris of killed writers.

A writer builds `.NAME.HOST-PID.staging` (a folder) or `.NAME.HOST-PID.tmp` (a file) next
to its target, fsyncs it, renames it into place and fsyncs the parent folder. Both get
the process's umask (not owner-only, as `tempfile` or safetensors would make them). A writer killed
half-way leaves its staging entry behind; `remove_leftovers` (called when a run or a cache
lookup starts) removes those whose process is gone, and the random-suffix leftovers of
older versions (`tempfile.mkstemp` / `mkdtemp` names) once they are `legacy_age` old.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
from pathlib import Path

from mlmkit.core.output import fsync_directory

_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"
_OURS = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.(staging|tmp|old)$")
# tempfile's names: prefix + 8 characters of [a-z0-9_] (+ ".tmp" where a suffix was given)
_LEGACY = re.compile(r"^\..+\.[a-z0-9_]{8}(\.tmp)?$")


def _tag() -> str:
    return f"{_HOST}-{os.getpid()}"


def staging_path(target: Path, kind: str = "staging") -> Path:
    """`.NAME.HOST-PID.KIND` next to `target` (kind: staging, tmp or old)."""
    return target.with_name(f".{target.name}.{_tag()}.{kind}")


def staging_dir(target: str | Path, attempts: int = 5) -> Path:
    """An empty staging folder for `target` (umask permissions), replacing a stale one.
    The parent is made again if another process removes it meanwhile (a shared cache
    folder that a concurrent build empties and removes when it is done)."""
    target = Path(target)
    path = staging_path(target)
    for attempt in range(attempts):
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        try:
            path.mkdir(mode=0o777)
            break
        except FileNotFoundError:  # the parent went between the two mkdirs
            if attempt == attempts - 1:
                raise
    return path


def process_umask() -> int:
    """The process's umask (read without changing it where /proc tells it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def apply_umask(path: str | Path) -> None:
    """Give every file under `path` mode 0o666 and every folder 0o777, less the umask, as
    if created by open()/mkdir(): some writers (tempfile, safetensors) create owner-only
    files, which other users of a shared run or model folder could not read."""
    mask = process_umask()
    for root, dirs, files in os.walk(path):
        for name in dirs:
            os.chmod(Path(root) / name, 0o777 & ~mask)
        for name in files:
            target = Path(root) / name
            if not target.is_symlink():
                os.chmod(target, 0o666 & ~mask)
    os.chmod(path, 0o777 & ~mask)


def fsync_tree(path: str | Path) -> None:
    """fsync every file under `path`, then every folder (deepest first), then `path`."""
    path = Path(path)
    folders = []
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(Path(root) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        folders.append(Path(root))
    for folder in reversed(folders):
        fsync_directory(folder)


def publish_dir(staging: Path, target: str | Path) -> Path:
    """Make the filled `staging` folder `target`, durably, replacing an older `target`."""
    target = Path(target)
    apply_umask(staging)
    fsync_tree(staging)
    if target.exists():
        old = staging_path(target, "old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, target)
    fsync_directory(target.parent)
    return target


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file, fsync it and the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = staging_path(path, "tmp")
    try:
        with open(temporary, "wb") as handle:  # open(): the process's umask applies
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_leftovers(folder: str | Path, legacy_age: float = 0.0,
                     target: str | None = None) -> list[Path]:
    """Remove the staging entries of dead writers in `folder`; the removed paths.

    Ours are removed when their process (on this host) is gone, or, from another host,
    after a day. `tempfile`-named leftovers of older versions are removed when older than
    `legacy_age` seconds (0 for a run folder, which only one process writes). `target`
    limits the clean-up to the leftovers of that one name (in a folder the user owns).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    now = time.time()
    for entry in folder.iterdir():
        name = entry.name
        if not name.startswith(f".{target}." if target else "."):
            continue
        match = _OURS.match(name)
        try:
            age = now - entry.lstat().st_mtime
        except OSError:
            continue
        if match:
            pid = int(match.group("pid"))
            if match.group("host") == _HOST:
                stale = pid != os.getpid() and not _alive(pid)
            else:
                stale = age > 86400
        else:
            stale = bool(_LEGACY.match(name)) and age >= legacy_age
        if not stale:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed
