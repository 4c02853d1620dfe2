"""Corpora: the built-in python-docs corpus and readers for user files."""

from mlmkit.corpus.python_docs import python_docs

__all__ = ["python_docs"]
