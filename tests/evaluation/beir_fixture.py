"""A tiny BEIR-layout data set built from STS-B validation pairs (built at test time: the
shared data are never copied into the repository).

Query i is the first sentence of pair i; the corpus holds the second sentence of every pair
and, as distractors, both sentences of later pairs. Pair i's second sentence is judged with
its rounded similarity score (0–5: graded, zeros included); even queries also judge the
next pair's document with relevance 1, so some queries have two relevant documents.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlmkit.evaluation.sts import read_sts_pairs


def build_beir(stsb: Path, target: Path, queries: int = 40, distractors: int = 40) -> Path:
    firsts, seconds, scores = read_sts_pairs(stsb / "validation.tsv",
                                             limit=queries + distractors)
    target.mkdir(parents=True, exist_ok=True)
    (target / "qrels").mkdir(exist_ok=True)
    with open(target / "corpus.jsonl", "w", encoding="utf-8") as corpus:
        for i, text in enumerate(seconds):
            corpus.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
        for i in range(queries, queries + distractors):
            corpus.write(json.dumps({"_id": f"x{i}", "title": "Note", "text": firsts[i]})
                         + "\n")
    with open(target / "queries.jsonl", "w", encoding="utf-8") as out:
        for i in range(queries):
            out.write(json.dumps({"_id": f"q{i}", "text": firsts[i]}) + "\n")
    with open(target / "qrels" / "test.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for i in range(queries):
            out.write(f"q{i}\td{i}\t{int(round(scores[i]))}\n")
            if i % 2 == 0:
                out.write(f"q{i}\td{i + 1}\t1\n")
    return target
