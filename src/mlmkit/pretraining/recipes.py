"""Training recipes: the published settings of an encoder, scaled to a small run.

Each recipe is a YAML file in `mlmkit/pretraining/recipe_files/` with its `source` (paper and
what it specifies), `scaled_down` (what mlmkit changes at small scale), `config` (fields of
`PretrainConfig`) and `phases` (see `mlmkit.pretraining.phases`). `recipe_config(name,
overrides)` gives the values of a run: the recipe's, then the flags given on top; a
`--steps` given with a recipe stretches its phases to it (each keeps its share).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from mlmkit.core.yaml_values import NotFinite, load_yaml
from mlmkit.errors import InvalidArgument
from mlmkit.models.preset_table import parse_preset
from mlmkit.models.presets import check_family
from mlmkit.pretraining.config import from_dict
from mlmkit.pretraining.phase_specs import scale_phases

RECIPE_DIR = Path(__file__).resolve().parent / "recipe_files"


@dataclass(frozen=True)
class Recipe:
    name: str
    source: str
    scaled_down: str
    config: dict
    phases: list

    def family(self) -> str:
        return parse_preset(self.config.get("model", "modernbert-mini"))[0]

    def to_dict(self) -> dict:
        return {"name": self.name, "source": self.source, "scaled_down": self.scaled_down,
                "config": dict(self.config), "phases": [dict(p) for p in self.phases]}


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


@cache
def _read(name: str) -> Recipe:
    values = yaml.safe_load((RECIPE_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    return Recipe(name=values["name"], source=" ".join(values["source"].split()),
                  scaled_down=" ".join(values["scaled_down"].split()),
                  config=values.get("config") or {}, phases=values.get("phases") or [])


def load_recipe(name: str) -> Recipe:
    """The recipe `name`; an unknown name is an error listing the known ones."""
    if not isinstance(name, str) or name not in recipe_names():
        raise InvalidArgument(f"--recipe {name!r} is not a recipe: use one of "
                              f"{', '.join(recipe_names())}")
    return _read(name)


def recipe_config(name: str, overrides: dict | None = None) -> dict:
    """The config values of a run of recipe `name` with `overrides` (flags) on top.

    The recipe's model family must be in the installed transformers (an error otherwise).
    """
    recipe = load_recipe(name)
    overrides = dict(overrides or {})
    values = {**recipe.config, "recipe": recipe.name,
              "phases": [dict(p) for p in recipe.phases]}
    check_family(recipe.family(), f"--recipe {name}")
    if "model" in overrides:
        try:
            family, _ = parse_preset(overrides["model"])
        except ValueError as error:
            raise InvalidArgument(f"--model: {error}") from error
        check_family(family)
    if "phases" not in overrides and overrides.get("steps") is not None:
        values["phases"] = scale_phases(values["phases"], int(overrides["steps"]))
        share = int(overrides["steps"]) / int(recipe.config.get("steps") or 1)
        if values.get("batch_warmup_tokens") and "batch_warmup_tokens" not in overrides:
            # the batch warm-up keeps its share of the run (tokens scale with the steps)
            values["batch_warmup_tokens"] = max(1, round(values["batch_warmup_tokens"] * share))
        if values.get("warmup", 0) >= 1 and "warmup" not in overrides:
            # a warm-up given in steps keeps its share too, as the phases' warm-ups do (50
            # steps of a 12-step run would never reach the peak learning rate)
            values["warmup"] = max(1, round(values["warmup"] * share))
    values.update(overrides)
    return values


def show_recipe(name: str, overrides: dict | None = None) -> str:
    """The recipe's source and scale-down notes, then the resolved run config (YAML)."""
    recipe = load_recipe(name)
    config = from_dict(recipe_config(name, overrides), source=f"recipe {name}")
    head = (f"# recipe: {recipe.name}\n# source: {recipe.source}\n"
            f"# scaled down: {recipe.scaled_down}\n")
    return head + config.to_yaml()


def recipe_from_flags(overrides: dict, show: bool, config_path, resume) -> dict | None:
    """What `mlmkit pretrain` does with --recipe / --show / --phases: the run's config values
    (None without --recipe), or, with --show, print the resolved recipe (returns None).
    `overrides` are the flags given; a --phases text is parsed as YAML in place."""
    text = overrides.get("phases")
    if isinstance(text, str):
        try:
            overrides["phases"] = load_yaml(text)
        except NotFinite as error:
            raise InvalidArgument(f"--phases: phases{error}") from None
        except yaml.YAMLError as error:
            raise InvalidArgument(f"--phases is not YAML: {' '.join(str(error).split())}"
                                  ) from error
    name = overrides.pop("recipe", None)
    if name is None:
        if show:
            raise InvalidArgument("--show prints a recipe: give --recipe NAME (one of "
                                  f"{', '.join(recipe_names())})")
        return None
    if resume is not None:
        raise InvalidArgument("--recipe starts a run; --resume continues one with the recipe "
                              "it started with: drop --recipe")
    if config_path is not None:
        raise InvalidArgument("give --recipe or --config, not both (flags override either)")
    if show:
        print(show_recipe(name, overrides), end="")
        return None
    return recipe_config(name, overrides)
