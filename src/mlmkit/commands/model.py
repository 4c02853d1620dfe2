"""`mlmkit model init`: a fresh random model from a preset, saved with its tokenizer.

It makes every model-taking command runnable without a hub download: the directory loads
with `AutoModelForMaskedLM.from_pretrained` and `mlmkit.load_mlm`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from mlmkit.errors import MlmkitError

EXAMPLE = """
Example:

  mlmkit tokenizer train python-docs -o ./tok --kind wordpiece --vocab-size 8192

  mlmkit model init bert-tiny --tokenizer ./tok -o ./tiny-bert
"""

model_app = typer.Typer(help="Create models.", no_args_is_help=True)


@model_app.command(
    "init",
    help="Build a randomly initialised masked LM from a preset (SIZE or FAMILY-SIZE: "
         "tiny/mini/small/base × bert/roberta/modernbert) with the tokenizer's vocabulary, "
         "and save it with the tokenizer.\n" + EXAMPLE,
)
def init_command(
    preset: str = typer.Argument(..., help="Preset, e.g. tiny, bert-mini, roberta-small."),
    tokenizer: str = typer.Option(..., "--tokenizer", help="Tokenizer directory (see "
                                                           "`mlmkit tokenizer train`)."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory to save the model to."),
    max_length: int = typer.Option(512, "--max-length", help="Longest input, in tokens."),
    seed: int = typer.Option(0, help="Seed of the random initialisation."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing directory."),
) -> None:
    from transformers import AutoTokenizer

    from mlmkit.models import build_mlm, parse_preset

    try:
        parse_preset(preset)
    except ValueError as error:
        raise MlmkitError(str(error)) from error
    if not Path(tokenizer).is_dir():
        raise MlmkitError(f"--tokenizer {tokenizer!r} is not a directory: train one with "
                          "`mlmkit tokenizer train`")
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise MlmkitError(f"--output {str(output)!r} exists and is not empty: pass --overwrite "
                          "or choose another directory")
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as error:
        raise MlmkitError(f"--tokenizer {tokenizer!r}: cannot load a tokenizer "
                          f"({error})") from error
    if tok.mask_token is None:
        raise MlmkitError(f"--tokenizer {tokenizer!r} has no mask token: a masked LM needs one")
    model = build_mlm(preset, tok, max_length=max_length, seed=seed)
    # Save next to the target, then swap it in: a crash never leaves half a model.
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}."))
    try:
        model.save_pretrained(staging)
        tok.save_pretrained(staging)
        if output.exists():
            shutil.rmtree(output)
        staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    parameters = sum(p.numel() for p in model.parameters())
    Console().print(f"[green]saved[/green] {escape(preset)} ({type(model).__name__}, "
                    f"{parameters / 1e6:.2f}M parameters, vocabulary {len(tok):,}) to "
                    f"{escape(str(output))}")


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model",
                  help="Create a random model from a preset, e.g. mlmkit model init bert-tiny "
                       "--tokenizer ./tok -o ./tiny-bert")
