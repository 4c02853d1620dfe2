"""`mlmkit recipe`: list the training recipes and show one (its source, what mlmkit scales
down, and the run config it resolves to)."""

from __future__ import annotations

import json

import typer

import mlmkit
from mlmkit.cli.options import JSON, command_group, subcommand

EXAMPLE = """
Example:

  mlmkit recipe show modernbert

  mlmkit pretrain --recipe modernbert --steps 200
"""

recipe_app = command_group(help="Training recipes of published encoders, scaled down: list "
                              "them, show one.\n" + EXAMPLE, no_args_is_help=True)


@subcommand(recipe_app, "list", short_help="List the recipes with their sources.",
                    help="List the recipes `mlmkit pretrain --recipe NAME` runs.\n\n"
                         "Example:\n\n  mlmkit recipe list --json\n")
def list_command(as_json: bool = JSON) -> None:
    library = mlmkit.pretraining.recipes
    recipes = [library.load_recipe(name) for name in library.recipe_names()]
    if as_json:
        print(json.dumps([r.to_dict() for r in recipes], indent=1))
        return
    for recipe in recipes:
        phases = len(recipe.phases)
        print(f"{recipe.name}: {recipe.config.get('model')}, {phases} "
              f"phase{'s' if phases != 1 else ''} ({recipe.source.split(',')[0]})")


@subcommand(recipe_app, "show", short_help="Print a recipe and the config it resolves to.",
                    help="Print a recipe's source, what mlmkit changes at small scale, and the "
                         "resolved run config (YAML, phases included): what `mlmkit pretrain "
                         "--recipe NAME --show` prints.\n" + EXAMPLE)
def show_command(name: str = typer.Argument(..., help="Recipe name (see mlmkit recipe list)."),
                 as_json: bool = JSON) -> None:
    if as_json:
        print(json.dumps(mlmkit.pretraining.recipes.load_recipe(name).to_dict(), indent=1))
        return
    print(mlmkit.pretraining.recipes.show_recipe(name), end="")


def register(app: typer.Typer) -> None:
    app.add_typer(recipe_app, name="recipe",
                  short_help="List and show training recipes, e.g. mlmkit recipe show "
                             "modernbert")
