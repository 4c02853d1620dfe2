"""Pretraining objectives, chosen by name: `OBJECTIVES[config.objective]`.

An objective owns the trainable module(s), turns a batch of packed blocks into a loss,
evaluates, and exports to Hugging Face format. Each implements `mlmkit.training.objective.
Objective`, the interface pretraining drives; that interface is all objectives know of a
run, so a new objective (ELECTRA, masked diffusion, ...) is one file and one registry entry.
"""

from __future__ import annotations

from mlmkit.errors import MlmkitError
from mlmkit.training.objective import LossOutput, Objective, Prepared
from mlmkit.training.objectives.diffusion import DiffusionObjective
from mlmkit.training.objectives.electra import ElectraObjective
from mlmkit.training.objectives.mlm import MLMObjective
from mlmkit.training.objectives.retromae import RetroMAEObjective

# name -> the Objective class (a new objective is one file and one entry here)
OBJECTIVES: dict[str, type[Objective]] = {
    "mlm": MLMObjective, "electra": ElectraObjective, "diffusion": DiffusionObjective,
    "retromae": RetroMAEObjective}


def build_objective(config, tokenizer, runtime, init_model=None) -> Objective:
    """The objective named by `config.objective`; errors list the registered names."""
    if config.objective not in OBJECTIVES:
        raise MlmkitError(f"unknown objective {config.objective!r}: use one of "
                          f"{sorted(OBJECTIVES)}")
    return OBJECTIVES[config.objective](config, tokenizer, runtime, init_model=init_model)


__all__ = ["OBJECTIVES", "LossOutput", "Objective", "Prepared", "build_objective"]
