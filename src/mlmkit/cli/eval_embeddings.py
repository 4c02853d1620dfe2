"""`mlmkit eval sts` and `mlmkit eval retrieval`: an embedding model on semantic similarity
(Spearman / Pearson of cosine similarity) and on BEIR-layout retrieval (NDCG@10, MRR@10,
Recall@100)."""

from __future__ import annotations

import json

import typer

import mlmkit
from mlmkit.cli.eval import eval_app
from mlmkit.cli.options import JSON, OUTPUT, Runtime, command, trusting
from mlmkit.core.output import check_output_path, write_text
from mlmkit.options import as_keywords
from mlmkit.options.embedding import Embedding

STS_HELP = "Semantic similarity: Spearman and Pearson of the cosine of two texts' vectors."
STS_EXAMPLE = """
Examples:

  mlmkit eval sts ./tiny-bert ../shared/data/stsb/validation.tsv

  mlmkit eval sts ./tiny-bert stsb --split validation

  mlmkit eval sts ./tiny-bert stsb.jsonl --pooling cls --json
"""
RETRIEVAL_HELP = "BEIR retrieval: exact cosine top-k search; NDCG@10, MRR@10, Recall@100."
RETRIEVAL_EXAMPLE = """
Examples:

  mlmkit eval retrieval ./tiny-bert --data scifact

  mlmkit eval retrieval ./tiny-bert --data nanobeir/nfcorpus --json

  mlmkit eval retrieval ./tiny-bert --corpus scifact/corpus.jsonl --queries scifact/queries.jsonl --qrels scifact/qrels/test.tsv

  mlmkit eval retrieval ./tiny-bert --corpus c.jsonl --queries q.jsonl --qrels qrels --run run.trec --json
"""


def _embedding_options(embedding: Embedding) -> dict:
    return {k: v for k, v in as_keywords(embedding).items() if v is not None}


def _report(values: dict, as_json: bool, output: str, title: str) -> None:
    if as_json:
        text = json.dumps(values) + "\n"
    else:
        width = max(len(k) for k in values)
        text = title + "\n" + "".join(
            f"  {k:<{width}}  {v:.4f}\n" if isinstance(v, float) else f"  {k:<{width}}  {v}\n"
            for k, v in values.items())
    write_text(output, text)


def sts_command(
    model: str = typer.Argument(..., help="Model directory (a masked LM or a "
                                "sentence-transformers folder) or hub name."),
    data: str = typer.Argument(..., help="STS pairs: TSV/CSV with a header or JSONL with "
                               "sentence1, sentence2 and score (e.g. "
                               "../shared/data/stsb/validation.tsv), or the data name stsb "
                               "(or mteb/stsbenchmark-sts): fetched from the hub into "
                               "$MLMKIT_DATA the first time. A path that exists wins."),
    split: str = typer.Option(None, "--split", help="The split of a data name: train, "
                              "validation or test (default)."),
    limit: int = typer.Option(None, "--limit", min=2, help="Only the first N pairs."),
    *, embedding: Embedding, output: str = OUTPUT, as_json: bool = JSON, runtime: Runtime,
) -> None:
    with trusting(runtime.trust_remote_code):
        check_output_path(output, inputs=[data])
        path = mlmkit.evaluation.data_names.sts_file(data, split)  # fetched before the load
        runtime.seed_everything()
        mlm = mlmkit.load(model, **runtime.load_keywords(), allow_untrained_head=True)
        result = mlmkit.evaluation.evaluate_sts(mlm, path, limit=limit,
                                                **_embedding_options(embedding))
        _report(result.to_dict(), as_json, output, f"STS on {data}")


def retrieval_command(
    model: str = typer.Argument(..., help="Model directory (a masked LM or a "
                                "sentence-transformers folder) or hub name."),
    data: str = typer.Option(None, "--data", help="A BEIR folder (corpus.jsonl, "
                             "queries.jsonl, qrels/test.tsv), or a data name: scifact "
                             "(BeIR/scifact), nanobeir/SET (zeta-alpha-ai/NanoSET, e.g. "
                             "nanobeir/nfcorpus), fetched from the hub into $MLMKIT_DATA the "
                             "first time. A path that exists wins. Or the three flags:"),
    corpus: str = typer.Option(None, "--corpus", help="BEIR corpus.jsonl (_id, title, text)."),
    queries: str = typer.Option(None, "--queries", help="BEIR queries.jsonl (_id, text)."),
    qrels: str = typer.Option(None, "--qrels", help="BEIR qrels TSV (query-id, corpus-id, "
                              "score), or a qrels folder (its test.tsv)."),
    top_k: int = typer.Option(100, "--top-k", min=1, help="Documents retrieved per query."),
    run: str = typer.Option(None, "--run", help="Also write the run (TREC format: query Q0 "
                            "document rank score mlmkit) to this file."),
    *, embedding: Embedding, output: str = OUTPUT, as_json: bool = JSON, runtime: Runtime,
) -> None:
    with trusting(runtime.trust_remote_code):
        files = [f for f in (data, corpus, queries, qrels) if f is not None]
        check_output_path(output, inputs=files)
        if run is not None:
            check_output_path(run, inputs=files, what="run file")
        mlmkit.evaluation.retrieval.check_retrieval_inputs(data, corpus, queries, qrels)
        if data is not None:  # fetched and checked before the model loads
            data = str(mlmkit.evaluation.data_names.beir_folder(data, "--data"))
            mlmkit.evaluation.retrieval.beir_files(data, "--data")
        runtime.seed_everything()
        mlm = mlmkit.load(model, **runtime.load_keywords(), allow_untrained_head=True)
        result = mlmkit.evaluation.evaluate_retrieval(
            mlm, corpus, queries, qrels, data=data, top_k=top_k,
            **_embedding_options(embedding))
        if run is not None:
            mlmkit.evaluation.write_run(result.run, run)
        _report(result.to_dict(), as_json, output, f"retrieval on {data or corpus}")


def register(app: typer.Typer) -> None:
    command(eval_app, "sts", sts_command, short_help=STS_HELP, help=STS_HELP, epilog=STS_EXAMPLE)
    command(eval_app, "retrieval", retrieval_command, short_help=RETRIEVAL_HELP,
            help=RETRIEVAL_HELP, epilog=RETRIEVAL_EXAMPLE)
