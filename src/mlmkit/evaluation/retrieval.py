"""Dense retrieval on a BEIR-layout data set: embed the corpus and the queries, exact top-k
search by cosine similarity, NDCG@10, MRR@10 and Recall@100 as trec_eval computes them.

The BEIR layout: `corpus.jsonl` ({"_id", "title", "text"}; a document's text is its title,
a space and its text, as BEIR embeds it), `queries.jsonl` ({"_id", "text"}) and a qrels TSV
(`query-id`, `corpus-id`, `score`, with a header; `qrels/test.tsv` when a folder is given).
Only the queries the qrels judge are embedded and searched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlmkit.core import checks
from mlmkit.core.output import open_output
from mlmkit.core.records import check_input_file, display_name, read_json_objects, read_table
from mlmkit.errors import InvalidArgument, InvalidData, PathError
from mlmkit.evaluation.data_names import beir_folder
from mlmkit.evaluation.ranking_metrics import METRICS, mean_metrics, per_query
from mlmkit.mlm import load

TOP_K = max(k for _, k in METRICS.values())  # the deepest cut a metric reads
QUERY_CHUNK, DOCUMENT_CHUNK = 1024, 32768  # a [1024, 32768] float32 block of scores: 128 MiB


@dataclass
class RetrievalResult:
    """Mean metrics over the judged queries, and the run they were computed from."""

    ndcg_at_10: float
    mrr_at_10: float
    recall_at_100: float
    queries: int
    documents: int
    run: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)
    """{query: {document: score}}: the top-k documents of each query."""

    def to_dict(self) -> dict:
        return {"ndcg@10": self.ndcg_at_10, "mrr@10": self.mrr_at_10,
                "recall@100": self.recall_at_100, "queries": self.queries,
                "documents": self.documents}


def _id(path, number: int, row: dict, name: str = "_id") -> str:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidData(f"{display_name(path)} line {number} has no {name!r}: BEIR records "
                          "need an id")
    return str(value)


def read_corpus(path) -> tuple[list[str], list[str]]:
    """(document ids, texts) of a BEIR corpus.jsonl; a title goes before the text."""
    check_input_file(path, "corpus")
    ids, texts, seen = [], [], set()
    for number, row in read_json_objects(path, what="documents"):
        doc = _id(path, number, row)
        if doc in seen:
            raise InvalidData(f"{display_name(path)} line {number}: document id {doc!r} "
                              "appears twice; give each document its own id")
        seen.add(doc)
        title, text = str(row.get("title") or "").strip(), str(row.get("text") or "")
        ids.append(doc)
        texts.append(f"{title} {text}" if title else text)
    if not ids:
        raise InvalidData(f"{display_name(path)} holds no document")
    return ids, texts


def read_queries(path) -> dict[str, str]:
    check_input_file(path, "queries")
    return {_id(path, number, row): str(row.get("text") or "")
            for number, row in read_json_objects(path, what="queries")}


def read_qrels(path) -> dict[str, dict[str, int]]:
    """{query: {document: relevance}} of a BEIR qrels TSV (or a folder's test.tsv)."""
    path = Path(path)
    if path.is_dir():
        path = path / "test.tsv"
        if not path.is_file():
            raise PathError(f"{path.parent} has no test.tsv: pass the qrels file itself")
    check_input_file(path, "qrels")
    qrels: dict[str, dict[str, int]] = {}
    for number, row in read_table(path, what="qrels"):
        query, doc = _id(path, number, row, "query-id"), _id(path, number, row, "corpus-id")
        try:
            relevance = int(float(row.get("score", "")))
        except ValueError:
            raise InvalidData(f"{display_name(path)} line {number}: score {row.get('score')!r} "
                              "is not a whole number") from None
        qrels.setdefault(query, {})[doc] = relevance
    if not qrels:
        raise InvalidData(f"{display_name(path)} holds no judgment")
    return qrels


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def search(queries: np.ndarray, documents: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k by inner product: (scores [m, k] float32, document rows [m, k]), best first
    (k is cut to the number of documents). Blocks of queries × documents bound the memory."""
    k = min(k, len(documents))
    top_scores = np.empty((len(queries), k), dtype=np.float32)
    top_rows = np.empty((len(queries), k), dtype=np.int64)
    for q in range(0, len(queries), QUERY_CHUNK):
        block = queries[q:q + QUERY_CHUNK]
        best_s = np.full((len(block), 0), -np.inf, dtype=np.float32)
        best_r = np.zeros((len(block), 0), dtype=np.int64)
        for d in range(0, len(documents), DOCUMENT_CHUNK):
            scores = block @ documents[d:d + DOCUMENT_CHUNK].T
            rows = np.broadcast_to(np.arange(d, d + scores.shape[1]), scores.shape)
            both_s = np.concatenate([best_s, scores], axis=1)
            both_r = np.concatenate([best_r, rows], axis=1)
            keep = np.argpartition(-both_s, k - 1, axis=1)[:, :k] if both_s.shape[1] > k \
                else np.broadcast_to(np.arange(both_s.shape[1]), both_s.shape)
            best_s = np.take_along_axis(both_s, keep, 1)
            best_r = np.take_along_axis(both_r, keep, 1)
        order = np.argsort(-best_s, axis=1, kind="stable")
        top_scores[q:q + len(block)] = np.take_along_axis(best_s, order, 1)
        top_rows[q:q + len(block)] = np.take_along_axis(best_r, order, 1)
    return top_scores, top_rows


@dataclass
class BeirSet:
    """A BEIR data set read and checked: the corpus, the judged queries and their qrels."""

    doc_ids: list[str]
    doc_texts: list[str]
    queries: dict[str, str]  # the judged queries only, in the qrels' order
    qrels: dict[str, dict[str, int]]


def read_beir(corpus, queries, qrels) -> BeirSet:
    """Read the three BEIR files; every judged query must be in the queries file."""
    doc_ids, doc_texts = read_corpus(corpus)
    all_queries = read_queries(queries)
    judged = read_qrels(qrels)
    missing = [q for q in judged if q not in all_queries]
    if missing:
        raise InvalidData(f"query {missing[0]!r} of {display_name(qrels)} is not in "
                          f"{display_name(queries)} ({len(missing)} missing): pass the queries "
                          "file of the same data set")
    return BeirSet(doc_ids, doc_texts, {q: all_queries[q] for q in judged}, judged)


def beir_files(folder, flag: str = "--data") -> tuple[Path, Path, Path]:
    """(corpus.jsonl, queries.jsonl, qrels/) of a BEIR folder, after checking they are
    there (as BEIR's downloads unpack and `mlmkit data fetch` writes); errors name `flag`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PathError(f"{flag} {str(folder)!r} is not a folder: pass a BEIR folder holding "
                        "corpus.jsonl, queries.jsonl and qrels/test.tsv, or a data name "
                        "(scifact, nanobeir/SET)")
    missing = [name for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
               if not (folder / name).is_file()]
    if missing:
        raise PathError(f"{flag} {str(folder)!r} has no {', '.join(missing)}: a BEIR folder "
                        "holds corpus.jsonl, queries.jsonl and qrels/test.tsv")
    return folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels"


def read_beir_folder(folder, flag: str = "--retrieval") -> BeirSet:
    """A BEIR folder read and checked: `corpus.jsonl`, `queries.jsonl` and
    `qrels/test.tsv`; errors name `flag`."""
    return read_beir(*beir_files(folder, flag))


def retrieve(mlm, data: BeirSet, top_k: int = TOP_K, embed=None, **embedding):
    """The run {query: {document: score}} of `mlm` on `data`: the top-`top_k` documents of
    each judged query by cosine similarity. `embed(texts, **embedding)` embeds (default:
    the model's own `embed`)."""
    embed = embed or mlm.embed
    documents = _unit(embed(data.doc_texts, **embedding))
    query_ids = list(data.queries)
    vectors = _unit(embed([data.queries[q] for q in query_ids], **embedding))
    scores, rows = search(vectors, documents, top_k)
    return {query: {data.doc_ids[r]: float(s) for s, r in zip(scores[i], rows[i], strict=True)}
            for i, query in enumerate(query_ids)}


def check_retrieval_inputs(data, corpus, queries, qrels) -> None:
    """Either `data` (a BEIR folder or data name) or all three files, not both."""
    files = (corpus, queries, qrels)
    if (data is None) == (files == (None, None, None)) or (data is None and None in files):
        raise InvalidArgument("pass a BEIR folder or data name (data=, --data) or all three "
                              "of corpus, queries and qrels (--corpus, --queries, --qrels), "
                              "not both")


def evaluate_retrieval(model, corpus=None, queries=None, qrels=None, *, data=None,
                       top_k: int = TOP_K, **embedding) -> RetrievalResult:
    """Embed `corpus` and the judged `queries` (BEIR files), retrieve each query's `top_k`
    documents by cosine similarity, and score the run against `qrels` as trec_eval does.
    `data` instead of the three files: a BEIR folder, or a data name (scifact,
    nanobeir/SET: `mlmkit.evaluation.data_names`). `embedding`: `embed`'s options (pooling,
    dimensions, prompt, batch_tokens)."""
    top_k = checks.count("top_k", top_k, 1)
    check_retrieval_inputs(data, corpus, queries, qrels)
    files = (corpus, queries, qrels) if data is None else beir_files(beir_folder(data))
    data = read_beir(*files)
    mlm = load(model, allow_untrained_head=True)
    run = retrieve(mlm, data, top_k, **embedding)
    means = mean_metrics(per_query(run, data.qrels))
    return RetrievalResult(ndcg_at_10=means["ndcg@10"], mrr_at_10=means["mrr@10"],
                           recall_at_100=means["recall@100"], queries=len(data.queries),
                           documents=len(data.doc_ids), run=run)


def write_run(run: dict[str, dict[str, float]], path) -> None:
    """The run in the TREC format (`query Q0 document rank score mlmkit`), best first."""
    with open_output(path, what="run file") as handle:
        for query, scores in run.items():
            ranking = sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
            for rank, (doc, score) in enumerate(ranking, start=1):
                handle.write(f"{query} Q0 {doc} {rank} {score!r} mlmkit\n")
