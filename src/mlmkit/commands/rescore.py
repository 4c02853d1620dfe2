"""`mlmkit rescore`: rerank n-best lists with am_score + weight × PLL; WER when refs exist."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

EXAMPLE = """
Example:

  mlmkit rescore ./tiny-bert nbest.json --weight 0.3 -o rescored.json --one-best best.tsv

  mlmkit rescore ./tiny-bert nbest.tsv --refs refs.tsv --tune-weight
"""


def rescore_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    nbest: Path = typer.Argument(..., help="ESPnet-style JSON or TSV (utt, am_score, text)."),
    weight: float = typer.Option(0.3, help="LM weight: combined = am_score + weight × PLL."),
    normalize: bool = typer.Option(False, "--normalize",
                                   help="Divide each PLL by its number of tokens."),
    refs: Path = typer.Option(None, "--refs", help="utt_id<TAB>reference (for TSV input)."),
    tune_weight: bool = typer.Option(False, "--tune-weight",
                                     help="Search the weight on a dev half of the references."),
    metric: str = typer.Option("pll", help="pll or pll_word_l2r."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the rescored n-best JSON."),
    one_best: Path = typer.Option(None, "--one-best", help="Write utt_id<TAB>1-best text."),
    precision: str = typer.Option("fp32", help="fp32 or bf16 (autocast)."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    from mlmkit.models import load_mlm
    from mlmkit.scoring import read_nbest, rescore
    from mlmkit.scoring.nbest import write_nbest_json, write_one_best

    utterances = read_nbest(nbest, refs)
    mlm = load_mlm(model, device=device)
    result = rescore(mlm, utterances, weight, normalize=normalize, metric=metric,
                     tune_weight=tune_weight, precision=precision, batch_tokens=batch_tokens,
                     progress=True)
    if output:
        write_nbest_json(output, result.utterances)
    if one_best:
        write_one_best(one_best, result.best)
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
        return
    table = Table(title=f"n-best rescoring of {nbest}")
    table.add_column("")
    table.add_column("value", justify="right")
    table.add_row("utterances", str(len(result.utterances)))
    table.add_row("weight" + (" (tuned on dev)" if tune_weight else ""), f"{result.weight:g}")
    if result.wer_before is not None:
        split = " (test half)" if tune_weight else ""
        table.add_row(f"WER before{split}", f"{100 * result.wer_before:.2f}%")
        table.add_row(f"WER after{split}", f"{100 * result.wer_after:.2f}%")
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command(
        "rescore",
        help="Rescore ASR/MT n-best lists with a masked LM (Salazar et al. 2020): writes the "
        "rescored n-best and the 1-best, and reports WER before/after when references "
        "are present." + EXAMPLE,
    )(rescore_command)
