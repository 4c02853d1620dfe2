"""`mlmkit model init`: a fresh random model from a preset, saved with its tokenizer.

It makes every model-taking command runnable without a hub download: the directory loads
with `AutoModelForMaskedLM.from_pretrained` and `mlmkit.load`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

import mlmkit
from mlmkit.cli.options import TRUST_REMOTE_CODE, command_group, subcommand
from mlmkit.core import checks, staging
from mlmkit.errors import MlmkitError
from mlmkit.models.preset_table import (
    ESM2_SIZES,
    FAMILIES,
    FAMILY_INFO,
    MAX_POSITIONS,
    SIZES,
    parse_preset,
)

EXAMPLE = """
Example:

  mlmkit tokenizer train python-docs -o ./tok --kind wordpiece --vocab-size 8192

  mlmkit model init bert-tiny --tokenizer ./tok -o ./tiny-bert
"""

model_app = command_group(help="Create a random masked LM from a preset, saved with its "
                             "tokenizer; list the families; describe a model.\n" + EXAMPLE,
                        no_args_is_help=True)


@subcommand(
    model_app, "init",
    short_help="Build a random masked LM from a preset and save it with its tokenizer.",
    help="Build a randomly initialised masked LM from a preset and save it with the "
         "tokenizer (its vocabulary and special tokens).\n\n"
         f"Presets are SIZE or FAMILY-SIZE. Families: {', '.join(FAMILIES)} (default bert). "
         "Sizes: " + "; ".join(f"{name} ({s.layers} layers × {s.hidden} hidden, {s.heads} "
                               f"heads)" for name, s in SIZES.items()) + "; ESM-2 (esm2-SIZE): " +
         ", ".join(ESM2_SIZES) + ".\n" + EXAMPLE,
)
def init_command(
    preset: str = typer.Argument(..., help="Preset, e.g. tiny, bert-mini, roberta-small."),
    tokenizer: str = typer.Option(..., "--tokenizer", help="Tokenizer directory (see "
                                                           "`mlmkit tokenizer train`)."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory to save the model to."),
    max_length: int = typer.Option(None, "--max-length", help="Longest input, in tokens "
                                                              f"(position embeddings; 1 to "
                                                              f"{MAX_POSITIONS}; default: "
                                                              "512, ESM-2's 1,024 for esm2)."),
    seed: int = typer.Option(0, help="Seed of the random initialisation."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing directory."),
) -> None:
    from transformers import AutoTokenizer

    try:
        parse_preset(preset)
    except ValueError as error:
        raise MlmkitError(str(error)) from error
    if max_length is not None:
        checks.count("max_length", max_length, 1, MAX_POSITIONS)
    checks.count("seed", seed, 0, 2**32 - 1)
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
    if len(tok) <= len(set(tok.all_special_ids)):  # a folder without tokenizer files
        raise MlmkitError(f"--tokenizer {tokenizer!r} holds only special tokens (no tokenizer "
                          "files there?): pass the folder mlmkit tokenizer train wrote")
    if tok.mask_token is None:
        raise MlmkitError(f"--tokenizer {tokenizer!r} has no mask token: a masked LM needs one")
    model = mlmkit.models.build_mlm(preset, tok, max_length=max_length, seed=seed)
    # Save next to the target, then swap it in: a crash never leaves half a model.
    # (umask permissions, fsynced; see mlmkit.core.staging)
    staging.remove_leftovers(output.parent, legacy_age=86400, target=output.name)
    folder = staging.staging_dir(output)
    try:
        model.save_pretrained(folder)
        mlmkit.tokenizer.save_tokenizer(tok, folder)  # a class transformers 4.x loads too
        staging.publish_dir(folder, output)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    parameters = sum(p.numel() for p in model.parameters())
    Console().print(f"[green]saved[/green] {escape(preset)} ({type(model).__name__}, "
                    f"{parameters / 1e6:.2f}M parameters, vocabulary {len(tok):,}) to "
                    f"{escape(str(output))}")


@subcommand(
    model_app, "list",
    short_help="List every model family `model init` can build.",
    help="List every family `mlmkit model init` builds (FAMILY-SIZE presets), the "
         "transformers classes it uses and whether the installed transformers has them."
         "\n\nExample:\n\n  mlmkit model list --json\n",
)
def list_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    rows = [{"family": name, "classes": FAMILY_INFO[name].config_class,
             "available": mlmkit.models.family_available(name),
             "description": FAMILY_INFO[name].description}
            for name in FAMILIES]
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    console = Console(soft_wrap=True)
    for row in rows:
        mark = "" if row["available"] else " [red](not in this transformers)[/red]"
        console.print(f"[bold]{row['family']}[/bold] ({row['classes']}){mark}: "
                      f"{escape(row['description'])}")


@subcommand(
    model_app, "info",
    short_help="Describe a model: family, parameters, positions, head, features.",
    help="Describe a masked LM: family, parameter counts (embeddings and the rest), "
         "vocabulary, max positions, position scheme (absolute, relative, RoPE θ, ALiBi), "
         "attention implementation, whether an MLM head is present and trained, special "
         "tokens, and which mlmkit features will work on it.\n\nExample:\n\n"
         "  mlmkit model info ./tiny-bert --json\n",
)
def info_command(
    model: str = typer.Argument(..., help="Model name or directory."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    trust_remote_code: bool = TRUST_REMOTE_CODE,
) -> None:
    info = mlmkit.models.model_info(model, trust_remote_code=trust_remote_code or None)
    if as_json:
        print(info.to_json())
        return
    console = Console(soft_wrap=True)
    console.print(f"[bold]{escape(info.name)}[/bold]")
    for key, value in info.table():
        if key == "  score":
            console.print("features:")
        console.print(f"{escape(key):<18} {escape(value)}")


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model",
                  short_help="Create a random model from a preset, list the families, "
                             "describe a model, e.g. mlmkit model info ./tiny-bert")
