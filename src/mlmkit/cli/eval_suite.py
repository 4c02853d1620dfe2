"""`mlmkit eval suite` and `mlmkit eval compare`: the downstream evaluation suite, and suite
results side by side with bootstrap intervals and paired tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

import mlmkit
from mlmkit.cli.eval import eval_app
from mlmkit.cli.options import JSON, OUTPUT, Runtime, command, trusting
from mlmkit.core.output import check_output_path, write_text
from mlmkit.core.progress import warn
from mlmkit.errors import PathError
from mlmkit.options import as_keywords
from mlmkit.options.evaluation import Suite

SUITE_HELP = "The evaluation suite: BLiMP, PPPL, cloze, few-shot and fine-tuned SST-2, AG News."
SUITE_EXAMPLE = """
Examples:

  mlmkit eval suite ./tiny-bert --data ../shared/data --quick --run-dir suite-tiny

  mlmkit eval suite ./tiny-bert --data ../shared/data --parts blimp,cloze --quick --json

  mlmkit eval suite ./my-encoder --parts sts,retrieval --data ../shared/data --retrieval scifact --run-dir suite-enc
"""
COMPARE_HELP = "Suite results side by side: bootstrap 95% intervals, paired tests."
COMPARE_EXAMPLE = """
Examples:

  mlmkit eval compare suite-a/suite.json suite-b/suite.json

  mlmkit eval compare runs/mask15 runs/mask40 --data ../shared/data --quick -o compare.md

  mlmkit eval compare suite-enc-a suite-enc-b -o retrieval.md
"""


def suite_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    *, suite: Suite, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """Run the evaluation suite on a model and print its table (Markdown)."""
    with trusting(runtime.trust_remote_code):
        run_dir = suite.run_dir
        if run_dir is not None:
            if Path(run_dir).exists() and not Path(run_dir).is_dir():
                raise PathError(f"--run-dir {run_dir!r} is a file: name a folder")
            check_output_path(str(Path(run_dir) / "suite.json"))

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = mlmkit.evaluation.evaluate_suite(model, **as_keywords(suite),
                                                      **runtime.run_keywords())
        for message in dict.fromkeys(str(w.message) for w in caught):
            warn(message)
        if as_json:
            print(result.to_json(), flush=True)
        else:
            print(result.markdown(), end="")


def compare_command(
    runs: list[str] = typer.Argument(..., help="suite.json files, folders holding one, run "
                                     "directories or models (the suite runs on those)."),
    data: str = typer.Option(None, "--data", help="Folder holding blimp/, sst2/ and agnews/ "
                             "(for runs and models without a suite.json; default: "
                             "$MLMKIT_DATA, else ~/.cache/mlmkit/data)."),
    quick: bool = typer.Option(False, "--quick", help="Quick suites for runs and models."),
    parts: str = typer.Option(None, "--parts", help="Parts of the suites to run (see eval "
                              "suite)."),
    retrieval: str = typer.Option(None, "--retrieval", help="A BEIR folder or data name "
                                  "(scifact, nanobeir/SET) for the retrieval part of runs and "
                                  "models (see eval suite)."),
    facts: str = typer.Option(None, "--facts", help="A facts jsonl for the facts part of "
                              "runs and models (see eval suite)."),
    variants: str = typer.Option(None, "--variants", help="A YAML list of deep mutational "
                                 "scans for the variants part of runs and models (see eval "
                                 "suite)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples (0: none)."),
    offline: bool = typer.Option(False, "--offline", help="Load hub model names from the "
                                 "local Hugging Face cache only, never the network."),
    *, runtime: Runtime, output: str = OUTPUT, as_json: bool = JSON,
) -> None:
    """Suite results side by side: each number with its bootstrap 95% interval, and each
    model's difference from the first with a paired test on the same items."""
    from mlmkit.core.statistics import check_bootstrap

    check_bootstrap(bootstrap, seed=runtime.seed)
    # bad runtime flags fail even when every run has its suite.json and no model loads
    mlmkit.core.devices.prepare(runtime.device, runtime.precision, runtime.threads)
    if data is not None and not any((Path(data) / n).is_dir() for n in ("blimp", "sst2",
                                                                          "agnews")):
        raise PathError(f"--data {data!r} is not a folder holding blimp/, sst2/ or agnews/: "
                        "pass the shared data sets' folder")
    check_output_path(output, inputs=runs)
    for source in runs:
        mlmkit.evaluation.check_source(source)
    if facts is not None:  # read now: a bad file fails before any suite runs
        mlmkit.evaluation.suite.read_facts_file(facts)
    if variants is not None:
        mlmkit.evaluation.suite.read_scans(variants)
    with trusting(runtime.trust_remote_code):
        suites = [mlmkit.evaluation.resolve_suite(
            r, data=data, quick=quick, parts=parts, retrieval=retrieval, facts=facts,
            variants=variants, offline=offline, **runtime.run_keywords())
            for r in runs]
    result = mlmkit.evaluation.compare_suites(suites, n_boot=bootstrap, seed=runtime.seed,
                                              names=list(runs))
    text = result.to_json() + "\n" if as_json else result.markdown()
    write_text(output, text, inputs=runs)


def register(app: typer.Typer) -> None:
    command(eval_app, "suite", suite_command, short_help=SUITE_HELP, epilog=SUITE_EXAMPLE)
    command(eval_app, "compare", compare_command, short_help=COMPARE_HELP,
            epilog=COMPARE_EXAMPLE)
