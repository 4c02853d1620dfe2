"""Masked diffusion (MDLM, Sahoo et al. 2024; LLaDA, Nie et al. 2025) on any bidirectional
encoder: the objective is the continuous-time NELBO of the absorbing-state process.

Forward process (linear schedule, mask-only; the masking engine's `diffusion` preset): each
sequence draws a time t ~ U(eps, 1), stratified over the global batch (one draw per
interval of width (1 - eps) / B), and every maskable token becomes [MASK] independently
with probability t. The loss is

    sum over masked tokens of -log p(x_i | x_t) / t,  divided by the number of tokens,

whose expectation is the NELBO in nats per token. SUBS parameterisation: the [MASK]
logit is -inf, so the model never predicts [MASK]; unmasked tokens are not scored. There
is no time conditioning, so the trained model is an ordinary Hugging Face masked LM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from mlmkit.errors import MlmkitError
from mlmkit.models import masked_logits
from mlmkit.tokenizer import save_tokenizer
from mlmkit.training.objective import LossOutput, Objective, Prepared
from mlmkit.training.objectives.mlm import build_masking_policy, build_run_model

EVAL_SAMPLES = 4  # corruptions (stratified times) per validation block
EVAL_SEED_OFFSET = 1_000_003  # evaluation masks never coincide with a training step's


def build_diffusion_policy(config, tokenizer):
    """The masking engine's policy for the run: the `diffusion` preset unless --masking
    names another mask-only, Bernoulli-count policy (e.g. a different eps)."""
    masking = "diffusion" if config.masking in (None, "default") else config.masking
    policy = build_masking_policy(config.replace(masking=masking), tokenizer)
    corruption, count = policy.corruption, policy.count
    if corruption.mask_p != 1.0 or getattr(count, "name", None) != "bernoulli":
        raise MlmkitError(
            f"--masking {masking!r} with --objective diffusion: the NELBO needs every chosen "
            f"token replaced by [MASK] (corruption [1, 0, 0]) and each token masked "
            f"independently with probability t (count: bernoulli); got "
            f"{policy.describe()}; use --masking diffusion")
    return policy


def subs_logits(logits: torch.Tensor, mask_id: int) -> torch.Tensor:
    """float32 logits with the [MASK] logit at -inf (SUBS: [MASK] is never predicted)."""
    never = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
    never[mask_id] = True
    return logits.float().masked_fill(never, float("-inf"))


def weighted_nll(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 mask: torch.Tensor, targets: torch.Tensor, t: torch.Tensor, mask_id: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum over masked tokens of CE / t_row, number of correct top-1 predictions).

    `targets` are the original ids at `mask` (row-major), `t` the time of each row.
    """
    logits = subs_logits(masked_logits(model, input_ids, attention_mask, mask), mask_id)
    nll = F.cross_entropy(logits, targets, reduction="none")
    weights = (1.0 / t.to(nll.device)).float()
    row_of = mask.nonzero()[:, 0]
    weighted = (nll * weights.index_select(0, row_of)).sum()
    correct = (logits.detach().argmax(-1) == targets).sum()
    return weighted, correct


@dataclass
class Nelbo:
    """The NELBO of held-out blocks: an upper bound on their negative log-likelihood."""

    nats_per_token: float
    tokens: int
    samples: int

    @property
    def perplexity_bound(self) -> float:
        """exp(NELBO per token): an upper bound on the model's perplexity."""
        return math.exp(self.nats_per_token)


class DiffusionObjective(Objective):
    """MDLM/LLaDA masked-diffusion training of an ordinary masked LM."""

    name = "diffusion"
    prepare_ahead = True  # prepare is a pure function of (batch, step, seed): prefetchable

    def __init__(self, config, tokenizer, runtime, init_model=None,
                 eval_samples: int = EVAL_SAMPLES):
        super().__init__(config, tokenizer, runtime)
        self.model = build_run_model(config, tokenizer, runtime, init_model)
        self.policy = build_diffusion_policy(config, tokenizer)
        self.eval_samples = eval_samples
        self.mask_id = tokenizer.mask_token_id
        self._eval_batches = None

    @property
    def modules(self) -> dict[str, torch.nn.Module]:
        return {"model": self.model}

    def corrupt(self, batch, step: int, seed: int, rows=None) -> dict[str, torch.Tensor]:
        """Per-row times and mask-only corruption of a `BlockBatch` by the masking engine."""
        out = self.policy(batch.input_ids, batch.attention_mask, step=step, seed=seed,
                          word_starts=batch.word_starts, document_ids=batch.document_ids,
                          rows=rows)
        return {"input_ids": out.input_ids, "attention_mask": batch.attention_mask,
                "mask": out.mask, "original": batch.input_ids, "t": out.rate,
                "maskable": self.policy.maskable(batch.input_ids, batch.attention_mask)}

    def prepare(self, batch, step: int, seed: int | None = None, rows=None) -> Prepared:
        # randomness from (seed, step) only: a resumed run draws the same times and masks
        tensors = self.corrupt(batch, step, self.config.seed if seed is None else seed,
                               rows=rows)
        return Prepared(tensors=tensors, counts={"tokens": float(tensors["maskable"].sum()),
                                                 "masked": float(tensors["mask"].sum())})

    def loss(self, tensors: dict[str, torch.Tensor], totals: dict[str, float]) -> LossOutput:
        t = tensors
        tokens, masked = max(totals["tokens"], 1.0), max(totals["masked"], 1.0)
        weighted, correct = weighted_nll(self.model, t["input_ids"], t["attention_mask"],
                                         t["mask"], t["original"][t["mask"]], t["t"],
                                         self.mask_id)
        loss = weighted / tokens
        return LossOutput(loss=loss, metrics={"loss": loss.detach(),
                                              "accuracy": correct.double() / masked})

    @torch.no_grad()
    def nelbo(self, blocks: list) -> Nelbo:
        """The NELBO of `blocks` in nats/token (float64), `eval_samples` fixed corruptions
        per block with times stratified over each batch of samples."""
        if self._eval_batches is None:  # fixed once: every evaluation sees the same masks
            seed, k = self.config.seed + EVAL_SEED_OFFSET, self.eval_samples
            self._eval_batches = [[self.corrupt(b, step=i * k + j, seed=seed) for j in range(k)]
                                  for i, b in enumerate(blocks)]
        total, tokens = 0.0, 0
        device = self.runtime.device
        for draws in self._eval_batches:
            tokens += int(draws[0]["maskable"].sum())
            for d in draws:
                if not d["mask"].any():
                    continue
                mask = d["mask"].to(device)
                with self.runtime.autocast():
                    weighted, _ = weighted_nll(
                        self.model, d["input_ids"].to(device), d["attention_mask"].to(device),
                        mask, d["original"].to(device)[mask], d["t"], self.mask_id)
                total += float(weighted.double()) / self.eval_samples
        return Nelbo(nats_per_token=total / max(tokens, 1), tokens=tokens,
                     samples=self.eval_samples)

    def evaluate(self, blocks: list, sentences: list[list[int]]) -> dict[str, float]:
        if not blocks:
            return {}
        was_training = self.model.training
        self.model.eval()
        try:
            result = self.nelbo(blocks)
        finally:
            self.model.train(was_training)
        return {"loss": result.nats_per_token, "nelbo": result.nats_per_token,
                "ppl_bound": result.perplexity_bound}

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        self.model.save_pretrained(directory)
        save_tokenizer(self.tokenizer, directory)  # a class transformers 4.x loads too

    def describe(self) -> str:
        return f"masked diffusion (MDLM/LLaDA NELBO, SUBS), masking: {self.policy.describe()}"
