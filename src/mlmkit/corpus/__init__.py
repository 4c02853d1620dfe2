"""Corpora: the built-in python-docs corpus and lazy readers for user files."""

from mlmkit.corpus.python_docs import python_docs
from mlmkit.corpus.readers import SUFFIXES, corpus_stats, read_corpus

__all__ = ["SUFFIXES", "corpus_stats", "python_docs", "read_corpus"]
