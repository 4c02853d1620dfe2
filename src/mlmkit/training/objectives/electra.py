"""ELECTRA (Clark et al. 2020): a small generator fills masked positions, a discriminator
tells original from replaced tokens at every position.

The generator is an `ElectraForMaskedLM` a fraction (default 1/4) of the discriminator's
width with the same depth; the discriminator is an `ElectraForPreTraining`. They share the
embedding layer (token, position and segment embeddings and their LayerNorm, as the
paper's tied embeddings), and the generator's output projection is tied to the token
embeddings. Replacements are drawn from the generator's softmax with Gumbel noise and are
not differentiated through; a sample equal to the original counts as original. The loss is
`MLM + rtd_weight × RTD` (λ = 50 by default). Both halves save as plain transformers models:
the generator as the run's masked LM, the discriminator in `discriminator/`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers

from mlmkit.core.gumbel import gumbel_noise
from mlmkit.errors import MlmkitError
from mlmkit.models import masked_logits, parse_preset, preset_config
from mlmkit.tokenizer import save_tokenizer
from mlmkit.training.objective import LossOutput, Objective, Prepared
from mlmkit.training.objectives.mlm import (
    build_masking_policy,
    mask_blocks,
    set_dropout,
    use_fast_attention,
)

RTD_WEIGHT = 50.0
GENERATOR_FRACTION = 0.25
DISCRIMINATOR_DIR = "discriminator"  # final/ itself holds the generator (the MLM)
EVAL_SEED_OFFSET = 1_000_003  # evaluation masks never coincide with a training step's


def default_masking() -> dict:
    """ELECTRA's masking: 15% of tokens, 85% of them [MASK], 15% kept (no random tokens)."""
    return {"preset": "bert", "rate": 0.15, "corruption": [0.85, 0.0, 0.15]}


def electra_configs(preset: str, tokenizer, max_length: int = 512,
                    fraction: float = GENERATOR_FRACTION
                    ) -> tuple[transformers.ElectraConfig, transformers.ElectraConfig]:
    """(generator, discriminator) configs for `preset` (SIZE or electra-SIZE).

    The generator keeps the discriminator's depth, head width and embedding size (so the
    embeddings can be shared) and scales hidden size, heads and feed-forward by `fraction`.
    """
    family, _ = parse_preset(preset)
    if family not in ("electra", "bert") or (family == "bert" and "-" in preset):
        raise MlmkitError(f"--model {preset!r}: the ELECTRA objective trains ELECTRA models; "
                          f"use a size (e.g. mini) or electra-SIZE (e.g. electra-mini)")
    if not 0 < fraction <= 1:
        raise MlmkitError(f"generator fraction {fraction}: use a value in (0, 1]")
    size = preset.rpartition("-")[2]
    discriminator = preset_config(f"electra-{size}", tokenizer, max_length=max_length)
    head_dim = discriminator.hidden_size // discriminator.num_attention_heads
    hidden = max(8, int(round(discriminator.hidden_size * fraction / 8)) * 8)
    heads = max(1, hidden // head_dim)
    while hidden % heads:
        heads -= 1
    generator = transformers.ElectraConfig(**{
        **discriminator.to_dict(),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "intermediate_size": hidden * discriminator.intermediate_size
        // discriminator.hidden_size,
        "embedding_size": discriminator.embedding_size,
    })
    return generator, discriminator


class ElectraPair(torch.nn.Module):
    """The generator and the discriminator as one module (one optimizer, one DDP wrapper)."""

    def __init__(self, generator: transformers.ElectraForMaskedLM,
                 discriminator: transformers.ElectraForPreTraining):
        super().__init__()
        self.generator, self.discriminator = generator, discriminator
        self.share_embeddings()

    def share_embeddings(self) -> None:
        """One embedding layer for both halves; the generator's output layer tied to it."""
        shared = self.discriminator.electra.embeddings
        if shared.word_embeddings.embedding_dim != self.generator.config.embedding_size:
            raise MlmkitError("the generator and discriminator have different embedding sizes: "
                              "they cannot share embeddings")
        self.generator.electra.embeddings = shared
        self.generator.generator_lm_head.weight = shared.word_embeddings.weight


def build_electra(preset: str, tokenizer, max_length: int = 512, seed: int = 0,
                  fraction: float = GENERATOR_FRACTION) -> ElectraPair:
    """A fresh (random, seeded) generator/discriminator pair for `preset`."""
    gen_config, disc_config = electra_configs(preset, tokenizer, max_length, fraction)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        discriminator = transformers.ElectraForPreTraining(disc_config)
        generator = transformers.ElectraForMaskedLM(gen_config)
    return ElectraPair(generator, discriminator)


def gumbel_sample(logits: torch.Tensor, generator: torch.Generator | None = None
                  ) -> torch.Tensor:
    """One token per row drawn from softmax(logits) by the Gumbel-max trick (no gradient).

    float32 noise: sampling replacements for training, the truncation of the tail below
    ~6e-8 of the top token's probability does not matter (generation uses float64).
    """
    with torch.no_grad():
        noise = gumbel_noise(logits.shape, generator, device=logits.device, dtype=torch.float32)
        return (logits.detach().float() + noise).argmax(-1)


def replace_tokens(original: torch.Tensor, mask: torch.Tensor, sampled: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(discriminator input, bool is-replaced labels) from the original ids [B, L], the
    masked positions [B, L] and one sampled token per masked position (row-major order).

    A position counts as replaced only when its sample differs from the original token.
    """
    corrupted = original.clone()
    corrupted[mask] = sampled.to(original.dtype)
    return corrupted, corrupted != original


@dataclasses.dataclass
class ElectraSums:
    """Sums over one micro-batch (divided by step totals by the objective)."""

    mlm_sum: torch.Tensor  # generator cross-entropy summed over masked positions
    rtd_sum: torch.Tensor  # discriminator binary cross-entropy summed over real tokens
    generator_correct: torch.Tensor  # masked positions where the generator's argmax is right
    rtd_correct: torch.Tensor  # real tokens the discriminator classifies right
    replaced: torch.Tensor  # real tokens that were replaced


def electra_sums(pair: ElectraPair, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 mask: torch.Tensor, original: torch.Tensor,
                 generator: torch.Generator | None = None) -> ElectraSums:
    """The generator MLM at `mask` (sparse head), sampling, and the discriminator's RTD."""
    logits = masked_logits(pair.generator, input_ids, attention_mask, mask).float()
    targets = original[mask]
    mlm_sum = F.cross_entropy(logits, targets, reduction="sum")
    sampled = gumbel_sample(logits, generator)
    corrupted, is_replaced = replace_tokens(original, mask, sampled)
    rtd_logits = pair.discriminator(input_ids=corrupted, attention_mask=attention_mask).logits
    real = attention_mask.bool()
    labels = is_replaced.float()
    per_token = F.binary_cross_entropy_with_logits(rtd_logits.float(), labels, reduction="none")
    rtd_sum = (per_token * real).sum()
    with torch.no_grad():
        generator_correct = (logits.argmax(-1) == targets).sum()
        rtd_correct = (((rtd_logits > 0) == is_replaced) & real).sum()
        replaced = (is_replaced & real).sum()
    return ElectraSums(mlm_sum, rtd_sum, generator_correct, rtd_correct, replaced)


class ElectraObjective(Objective):
    """Replaced-token detection with a jointly trained generator."""

    name = "electra"

    def __init__(self, config, tokenizer, runtime, init_model=None,
                 rtd_weight: float = RTD_WEIGHT, fraction: float = GENERATOR_FRACTION):
        super().__init__(config, tokenizer, runtime)
        if init_model is not None:
            raise MlmkitError("--init with --objective electra: continued pretraining of an "
                              "ELECTRA pair is not supported; train from a preset (--model)")
        self.rtd_weight = rtd_weight
        self.pair = build_electra(config.model, tokenizer,  # the preset's positions
                                  seed=config.seed, fraction=fraction)
        if config.dropout is not None:
            set_dropout(self.pair.generator, config.dropout)
            set_dropout(self.pair.discriminator, config.dropout)
        for model in (self.pair.generator, self.pair.discriminator):
            use_fast_attention(model, runtime)
        self.pair.to(runtime.device)
        masking = default_masking() if config.masking in (None, "default") else config.masking
        self.masking = masking
        self.policy = build_masking_policy(config.replace(masking=masking), tokenizer)
        self._eval_batches = None
        self._sampler: torch.Generator | None = None

    @property
    def modules(self) -> dict[str, torch.nn.Module]:
        return {"electra": self.pair}

    def _mask(self, batch, step: int, seed: int, device=None,
              rows=None) -> dict[str, torch.Tensor]:
        return mask_blocks(self.policy, batch, step, seed, device, targets="original",
                           rows=rows)

    def prepare(self, batch, step: int, seed: int | None = None, rows=None) -> Prepared:
        # replacements are sampled from a stream seeded by (seed, step, rank): exact on
        # resume, independent across processes, untouched by the global RNG (dropout)
        self._sampler = torch.Generator(device=self.runtime.device).manual_seed(
            (self.config.seed * 1_000_003 + step) * 1_009 + self.runtime.rank)
        tensors = self._mask(batch, step, self.config.seed if seed is None else seed,
                             rows=rows)
        return Prepared(tensors=tensors, counts={
            "masked": float(tensors["mask"].sum()),
            "tokens": float(tensors["attention_mask"].sum())})

    def loss(self, tensors: dict[str, torch.Tensor], totals: dict[str, float]) -> LossOutput:
        t = tensors
        masked, tokens = max(totals["masked"], 1.0), max(totals["tokens"], 1.0)
        sums = electra_sums(self.pair, t["input_ids"], t["attention_mask"], t["mask"],
                            t["original"], generator=self._sampler)
        mlm, rtd = sums.mlm_sum / masked, sums.rtd_sum / tokens
        loss = mlm + self.rtd_weight * rtd
        return LossOutput(loss=loss, metrics={
            "loss": loss.detach(), "mlm_loss": mlm.detach(), "rtd_loss": rtd.detach(),
            "accuracy": sums.generator_correct.double() / masked,
            "rtd_accuracy": sums.rtd_correct.double() / tokens,
            "replaced": sums.replaced.double() / tokens})

    @torch.no_grad()
    def evaluate(self, blocks: list, sentences: list[list[int]]) -> dict[str, float]:
        """Generator MLM loss/accuracy and discriminator RTD accuracy on fixed masks.

        `rtd_baseline` is the accuracy of always answering "original": the discriminator
        is learning something when `rtd_accuracy` exceeds it.
        """
        if not blocks:
            return {}
        if self._eval_batches is None:
            seed = self.config.seed + EVAL_SEED_OFFSET
            self._eval_batches = [self._mask(b, step=i, seed=seed, device=self.runtime.device)
                                  for i, b in enumerate(blocks)]
        was_training = self.pair.training
        self.pair.eval()
        totals = dict.fromkeys(("mlm", "rtd", "gen_correct", "rtd_correct", "replaced",
                                "masked", "tokens"), 0.0)
        # the sampled replacements are fixed by a seeded generator as well
        sampler = torch.Generator(device=self.runtime.device).manual_seed(self.config.seed)
        try:
            for t in self._eval_batches:
                with self.runtime.autocast():
                    sums = electra_sums(self.pair, t["input_ids"], t["attention_mask"],
                                        t["mask"], t["original"], generator=sampler)
                totals["mlm"] += float(sums.mlm_sum.double())
                totals["rtd"] += float(sums.rtd_sum.double())
                totals["gen_correct"] += float(sums.generator_correct)
                totals["rtd_correct"] += float(sums.rtd_correct)
                totals["replaced"] += float(sums.replaced)
                totals["masked"] += float(t["mask"].sum())
                totals["tokens"] += float(t["attention_mask"].sum())
        finally:
            self.pair.train(was_training)
        masked, tokens = max(totals["masked"], 1.0), max(totals["tokens"], 1.0)
        mlm, rtd = totals["mlm"] / masked, totals["rtd"] / tokens
        return {"loss": mlm + self.rtd_weight * rtd, "mlm_loss": mlm, "rtd_loss": rtd,
                "accuracy": totals["gen_correct"] / masked,
                "rtd_accuracy": totals["rtd_correct"] / tokens,
                "rtd_baseline": 1.0 - totals["replaced"] / tokens}

    def save_pretrained(self, directory: str | Path) -> None:
        save_electra(self.pair, self.tokenizer, directory)

    def describe(self) -> str:
        gen = self.pair.generator.config
        describe = getattr(self.policy, "describe", None)
        return (f"ELECTRA (generator hidden {gen.hidden_size}, λ = {self.rtd_weight:g}), "
                f"masking: {describe() if describe else self.masking}")


def save_electra(pair: ElectraPair, tokenizer, directory: str | Path) -> None:
    """The generator (`ElectraForMaskedLM`, the pair's masked LM) in `directory`, so that
    `AutoModelForMaskedLM` and every MLM command load the folder as it is; the
    discriminator (`ElectraForPreTraining`) in `directory/discriminator`; each with the
    tokenizer (its saved class loads in transformers 4.x and 5.x)."""
    directory = Path(directory)
    pair.generator.save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    pair.discriminator.save_pretrained(directory / DISCRIMINATOR_DIR)
    save_tokenizer(tokenizer, directory / DISCRIMINATOR_DIR)
