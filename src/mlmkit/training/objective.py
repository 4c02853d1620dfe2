"""The interface between the training run and an objective (MLM, ELECTRA, diffusion, ...).

`mlmkit.pretraining` defines it and drives it; `mlmkit.training.objectives` implements it and imports
nothing else from `mlmkit.pretraining`. An objective receives the run's config, tokenizer and a
runtime that offers `device`, `precision` and `autocast()` (see `TrainingRuntime`).

The loss is computed in two phases so gradient accumulation and data parallelism stay
exact: the run has `prepare` corrupt each of this process's rows of a step, from (seed,
step, global row), and sums the counts it reports (e.g. masked tokens) over processes;
it slices micro-batches out of the rows, and `loss` divides by the global counts. The
masks therefore do not depend on how a step is split, and the summed gradients equal
those of one big batch on one process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch


class TrainingRuntime(Protocol):
    """What an objective may ask of the run's runtime."""

    device: torch.device
    precision: str  # "fp32" or "bf16"

    def autocast(self):
        """The mixed-precision context of the forward pass (a no-op in fp32)."""


@dataclass
class Prepared:
    """A corrupted batch of this process's rows (rows first; CPU tensors, or the model's
    device when the counter stream or the prefetching producer put them there) and its
    counts for normalisation."""

    tensors: dict[str, torch.Tensor]
    counts: dict[str, float]

    def rows(self, index: torch.Tensor, device) -> dict[str, torch.Tensor]:
        """The rows `index` of every tensor, on `device` (one micro-batch of one process)."""
        return {k: v.index_select(0, index.to(v.device)).to(device, non_blocking=True)
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
    """The interface the training run drives (`mlmkit.pretraining.run.Run.step`)."""

    name: str = "objective"
    prepare_ahead = False  # True: `prepare` keeps no state, later steps may be prepared early

    def __init__(self, config, tokenizer, runtime: TrainingRuntime):
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
    def prepare(self, batch, step: int, seed: int | None = None, rows=None) -> Prepared:
        """Corrupt a `BlockBatch` of training step `step`, deterministically from (`seed`,
        default the config's, and step). The run either calls it per row with a row's seed
        (the "row" stream) or once with `rows`, the global row number of each row (the
        counter stream: randomness keyed by (seed, step, row, position))."""

    @abstractmethod
    def loss(self, tensors: dict[str, torch.Tensor], totals: dict[str, float]) -> LossOutput:
        """The loss of one micro-batch (`Prepared.rows`) divided by the step's `totals`."""

    def after_step(self, step: int) -> None:
        """Called after each optimizer step on every process: ends the masking policy's
        step (loss-based weights learn once per step, from all micro-batches and ranks)."""
        weights = getattr(getattr(self, "policy", None), "weights", None)
        if hasattr(weights, "end_step"):
            weights.end_step()

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


__all__ = ["LossOutput", "Objective", "Prepared", "TrainingRuntime"]
