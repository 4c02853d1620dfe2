"""The built-in `python-docs` corpus: English prose from the running Python's own docs.

It needs no file and no network: module, class and function docstrings of the standard
library (read with `ast`, nothing is imported) plus the pydoc topics. Prose paragraphs are
kept, code-like ones dropped, duplicates removed, and documents split deterministically
into train and validation by a hash of their text, so every machine with the same Python
gets the same corpus.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import sys
import sysconfig
from pathlib import Path

from mlmkit.core.cache import atomic_write_text, cache_dir

try:
    from pydoc_data.topics import topics
except ImportError:  # some minimal Python builds ship without pydoc_data
    topics = None

VALIDATION_SHARE = 0.05
FORMAT_VERSION = 1  # bump when the harvesting rules change: it keys the disk cache
MIN_WORDS = 8

_CODE_LINE = re.compile(r"^\s*(>>>|\.\.\.|\$ |[-=~^*]{3,}\s*$|[A-Za-z_][\w.]*\(.*\)\s*$)")
_SPACES = re.compile(r"\s+")


def _paragraphs(text: str):
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip("\n").splitlines()
        if not lines:
            continue
        if any(_CODE_LINE.match(line) for line in lines):
            continue
        if any(line.startswith(("    ", "\t")) for line in lines[1:]) and lines[0].startswith(
            ("    ", "\t")
        ):
            continue  # an indented block: code or a table
        paragraph = _SPACES.sub(" ", " ".join(lines)).strip()
        letters = sum(ch.isalpha() for ch in paragraph)
        if len(paragraph.split()) >= MIN_WORDS and letters >= 0.6 * len(paragraph):
            yield paragraph


def _docstrings(path: Path):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return
    nodes = [tree] + [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if doc:
            yield doc


def _stdlib_files():
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = ("site-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo", "__pycache__")
    for path in sorted(root.rglob("*.py")):
        if not any(part in skip for part in path.relative_to(root).parts):
            yield path


def _is_validation(text: str) -> bool:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < VALIDATION_SHARE


def _harvest() -> tuple[list[str], list[str]]:
    seen: set[str] = set()
    train: list[str] = []
    validation: list[str] = []
    sources = [doc for path in _stdlib_files() for doc in _docstrings(path)]
    if topics is not None:  # some minimal Python builds ship without pydoc_data
        sources += [topics[key] for key in sorted(topics)]
    for source in sources:
        document = "\n".join(_paragraphs(source))
        if not document or document in seen:
            continue
        seen.add(document)
        (validation if _is_validation(document) else train).append(document)
    return train, validation


@functools.lru_cache(maxsize=1)
def _documents() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Harvest once per Python build; later calls read the cached JSON (about 10 s saved)."""
    key = f"{sys.version}|{sysconfig.get_paths()['stdlib']}|{FORMAT_VERSION}"
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
    path = cache_dir("corpora") / f"python-docs-{digest}.json"
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        return tuple(cached["train"]), tuple(cached["validation"])
    except (OSError, ValueError, KeyError):
        pass
    train, validation = _harvest()
    atomic_write_text(path, json.dumps({"train": train, "validation": validation}))
    return tuple(train), tuple(validation)


def python_docs(split: str = "train") -> list[str]:
    """Documents of the built-in corpus: `split` is train, validation or all.

    A document is one docstring or pydoc topic; its paragraphs are separated by newlines.
    """
    train, validation = _documents()
    splits = {"train": train, "validation": validation, "all": train + validation}
    if split not in splits:
        raise ValueError(f"unknown split {split!r} of python-docs: use one of {list(splits)}")
    return list(splits[split])
