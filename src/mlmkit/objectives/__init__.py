"""Pretraining objectives, chosen by name: `OBJECTIVES[config.objective]`.

An objective owns the trainable module(s), turns a batch of packed blocks into a loss,
evaluates, and exports to Hugging Face format. The loop (`mlmkit.train.loop`) knows only
this interface, so a new objective (ELECTRA, masked diffusion, ...) is one file and one
registry entry.

The loss is computed in two phases so gradient accumulation and data parallelism stay
exact: `prepare` corrupts the whole global batch of a step (every micro-step and every
process; cheap next to the forward pass) and reports its counts (e.g. masked tokens);
the loop slices this process's micro-batches out of it, and `loss` divides by the global
counts. The masks therefore do not depend on how a step is split, and the summed
gradients equal those of one big batch on one process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mlmkit.errors import MlmkitError


@dataclass
class Prepared:
    """A corrupted global batch (CPU tensors, rows first) and its counts for normalisation."""

    tensors: dict[str, torch.Tensor]
    counts: dict[str, float]

    def rows(self, index: torch.Tensor, device) -> dict[str, torch.Tensor]:
        """The rows `index` of every tensor, on `device` (one micro-batch of one process)."""
        return {k: v.index_select(0, index).to(device, non_blocking=True)
                for k, v in self.tensors.items()}


@dataclass
class LossOutput:
    """The micro-step loss (already divided by the step totals) and metric contributions.

    Each metric value is this micro-step's share of the step's value (e.g. correct / total
    masked), so summing over micro-steps and processes gives the step's metric.
    """

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


class Objective(ABC):
    """The interface the training loop drives."""

    name: str = "objective"

    def __init__(self, config, tokenizer, runtime):
        self.config, self.tokenizer, self.runtime = config, tokenizer, runtime

    @property
    @abstractmethod
    def modules(self) -> dict[str, torch.nn.Module]:
        """The trainable modules by name (their state is saved in checkpoints)."""

    def train(self, mode: bool = True) -> None:
        for module in self.modules.values():
            module.train(mode)

    def compile(self) -> None:
        """Apply torch.compile to the hot path (optional)."""
        return None

    @abstractmethod
    def prepare(self, batch, step: int) -> Prepared:
        """Corrupt the global `BlockBatch` of training step `step` (deterministic in seed, step)."""

    @abstractmethod
    def loss(self, tensors: dict[str, torch.Tensor], totals: dict[str, float]) -> LossOutput:
        """The loss of one micro-batch (`Prepared.rows`) divided by the step's `totals`."""

    def after_step(self, step: int) -> None:
        """Called after each optimizer step (e.g. to update loss-based masking statistics)."""
        return None

    @abstractmethod
    def evaluate(self, blocks: list, sentences: list[list[int]]) -> dict[str, float]:
        """Metrics on held-out blocks (fixed corruption) and token-id sentences."""

    @abstractmethod
    def save_pretrained(self, directory: str | Path) -> None:
        """Write Hugging Face checkpoint(s) with the tokenizer into `directory`."""

    def state_dict(self) -> dict[str, Any]:
        """State other than module weights: the masking policy's (schedule, loss EMA), if any."""
        policy = getattr(self, "policy", None)
        return {"policy": policy.state_dict()} if hasattr(policy, "state_dict") else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        policy = getattr(self, "policy", None)
        if state.get("policy") and hasattr(policy, "load_state_dict"):
            policy.load_state_dict(state["policy"])

    def describe(self) -> str:
        return self.name


def _mlm():
    from mlmkit.objectives.mlm import MLMObjective

    return MLMObjective


def _electra():  # issue 6
    from mlmkit.objectives.electra import ElectraObjective

    return ElectraObjective


def _diffusion():  # issue 6
    from mlmkit.objectives.diffusion import DiffusionObjective

    return DiffusionObjective


# name -> a zero-argument function returning the Objective class (imported lazily)
OBJECTIVES: dict[str, Any] = {"mlm": _mlm, "electra": _electra, "diffusion": _diffusion}


def build_objective(config, tokenizer, runtime, init_model=None) -> Objective:
    """The objective named by `config.objective`; errors list the registered names."""
    if config.objective not in OBJECTIVES:
        raise MlmkitError(f"unknown objective {config.objective!r}: use one of "
                          f"{sorted(OBJECTIVES)}")
    cls = OBJECTIVES[config.objective]()
    return cls(config, tokenizer, runtime, init_model=init_model)


__all__ = ["OBJECTIVES", "LossOutput", "Objective", "Prepared", "build_objective"]
