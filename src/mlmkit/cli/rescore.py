"""`mlmkit rescore`: rerank n-best lists with am_score + weight × PLL; WER when refs exist."""

from __future__ import annotations

import warnings

import typer
from rich.console import Console
from rich.table import Table

import mlmkit
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, Runtime, command, trusting
from mlmkit.cli.score import ALLOW_UNTRAINED_HEAD, METRIC, SKIP_UNK
from mlmkit.core.output import check_output_path
from mlmkit.core.progress import console, status, warn
from mlmkit.errors import InvalidArgument

SHORT_HELP = "Rerank ASR/MT n-best lists with a masked LM's PLL; WER before/after."
EXAMPLE = """
Examples:

  mlmkit rescore ./tiny-bert nbest.json --weight 0.3 -o rescored.json --one-best best.tsv

  mlmkit rescore ./tiny-bert nbest.tsv --refs refs.tsv --tune-weight --json
"""


def rescore_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    nbest: str = typer.Argument(..., help="ESPnet-style JSON or TSV (utt, am_score, text); - "
                                "reads standard input."),
    weight: float = typer.Option(0.3, help="LM weight: combined = am_score + weight × PLL "
                                 "(finite, |weight| ≤ 1e6)."),
    normalize: bool = typer.Option(False, "--normalize",
                                   help="Divide each PLL by its number of tokens."),
    refs: str = typer.Option(None, "--refs", help="utt_id<TAB>reference (for TSV input)."),
    tune_weight: bool = typer.Option(False, "--tune-weight",
                                     help="Search the weight on a dev half of the references."),
    metric: str = METRIC,
    skip_unk: bool = SKIP_UNK,
    output: str = typer.Option(None, "-o", "--output", help="Write the rescored n-best JSON "
                               "here (- for standard output)."),
    one_best: str = typer.Option(None, "--one-best", help="Write utt_id<TAB>1-best text here "
                                 "(- for standard output)."),
    allow_untrained_head: bool = ALLOW_UNTRAINED_HEAD,
    *, encoding: str = ENCODING, encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
    as_json: bool = JSON,
) -> None:
    """Rescore ASR/MT n-best lists with a masked LM (Salazar et al. 2020): writes the
    rescored n-best and the 1-best, and reports WER before/after when references are
    present. The summary goes to standard output, or to standard error when an output
    is standard output."""
    with trusting(runtime.trust_remote_code):
        from mlmkit.scoring.rescore import check_weight

        unk = "skip" if skip_unk else "score"
        check_weight("weight", weight)
        mlmkit.scoring.text_scores.check_score_options(metric, unk, 1, runtime.batch_tokens)
        if output == "-" and one_best == "-":
            raise InvalidArgument("-o - and --one-best - both write standard output: send one of "
                                  "them to a file")
        inputs = [nbest, refs]
        for path, what in ((output, "-o/--output"), (one_best, "--one-best")):
            check_output_path(path, inputs=inputs, what=what)
        if output is not None and output == one_best and output != "-":
            raise InvalidArgument(f"-o and --one-best are both {output!r}: give two paths")
        runtime.seed_everything()
        mlm = mlmkit.load(model, **runtime.load_keywords(),
                          allow_untrained_head=allow_untrained_head)
        utterances = mlmkit.scoring.read_nbest(
            nbest, refs, encoding=encoding, errors=encoding_errors)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = mlm.rescore(utterances, weight=weight, normalize=normalize, metric=metric,
                                 tune_weight=tune_weight, unk=unk)
        for warning in caught:
            warn(str(warning.message))
        if output:
            mlmkit.scoring.nbest.write_nbest_json(output, result.utterances, inputs=inputs)
        if one_best:
            mlmkit.scoring.nbest.write_one_best(one_best, result.best, inputs=inputs)
        stdout_taken = "-" in (output, one_best)
        if as_json:
            text = result.to_json()
            if stdout_taken:
                status(text)
            else:
                print(text, flush=True)
            return

        table = Table(title=f"n-best rescoring of {'standard input' if nbest == '-' else nbest}")
        table.add_column("")
        table.add_column("value", justify="right")
        table.add_row("utterances", str(len(result.utterances)))
        table.add_row("weight" + (" (tuned on dev)" if tune_weight else ""), f"{result.weight:g}")
        if result.wer_before is not None:
            split = " (test half)" if tune_weight else ""
            table.add_row(f"WER before{split}", f"{100 * result.wer_before:.2f}%")
            table.add_row(f"WER after{split}", f"{100 * result.wer_after:.2f}%")
        if stdout_taken:
            console().print(table)
        else:
            Console(highlight=False, soft_wrap=True).print(table)


def register(app: typer.Typer) -> None:
    command(app, "rescore", rescore_command, short_help=SHORT_HELP, epilog=EXAMPLE)
