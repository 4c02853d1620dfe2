"""The masked-diffusion ELBO of a text under any MLM: a likelihood bound, in float64.

For a text of N tokens, -log p(x) <= NELBO = sum_{l=1..N} (1/l) E_{|S|=l}[sum_{i in S}
-log p(x_i | x with S masked)]: MDLM's continuous-time bound E_t[(1/t) sum_masked -log p]
and LLaDA's E_l[(N/l) sum_masked -log p] (l masked tokens) are two estimators of it.
Both are stratified Monte-Carlo: `count` stratifies l over 1..N, `time` stratifies t
over (0, 1) (MDLM's low-discrepancy sampler). Reported as nats/token and a perplexity bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mlmkit.errors import MlmkitError
from mlmkit.generate.canvas import special_wrap, text_ids
from mlmkit.generate.samplers import top_per_row
from mlmkit.models import as_mlm, masked_log_probs

METHODS = ("count", "time")


@dataclass
class Elbo:
    """The bound for one text."""

    text: str
    n_tokens: int
    nats: float
    """Monte-Carlo estimate of the NELBO (an upper bound on -log p(text)), in nats."""
    stderr: float
    """Standard error of `nats` (from the sample variance; conservative when stratified)."""
    samples: int

    @property
    def nats_per_token(self) -> float:
        return self.nats / self.n_tokens

    @property
    def perplexity_bound(self) -> float:
        """exp(NELBO / N): an upper bound on the model's perplexity on this text."""
        return math.exp(self.nats_per_token)


def draw_masks(n_tokens: int, samples: int, method: str, generator) -> tuple[torch.Tensor,
                                                                             torch.Tensor]:
    """(bool [samples, N] masked positions, float64 [samples] weights) of one estimator.

    `count`: l_k = floor((k + u_k) N / K) + 1 masked uniformly, weight N / l_k;
    `time`: t_k = (k + u) / K, each token masked with probability t_k, weight 1 / t_k.
    """
    k = torch.arange(samples, dtype=torch.float64)
    if method == "count":
        u = torch.rand(samples, dtype=torch.float64, generator=generator)
        counts = torch.floor((k + u) / samples * n_tokens).long().clamp_max(n_tokens - 1) + 1
        scores = torch.rand(samples, n_tokens, dtype=torch.float64, generator=generator)
        masked = top_per_row(scores, counts)
        return masked, n_tokens / counts.double()
    if method == "time":
        u = torch.rand(1, dtype=torch.float64, generator=generator)
        t = ((k + u) / samples).clamp_min(torch.finfo(torch.float64).tiny)
        draws = torch.rand(samples, n_tokens, dtype=torch.float64, generator=generator)
        return draws < t.unsqueeze(1), 1.0 / t
    raise MlmkitError(f"unknown ELBO --method {method!r}: use one of {list(METHODS)}")


def masked_nll(mlm, ids: torch.Tensor, masked: torch.Tensor, offset: int,
               batch_rows: int) -> torch.Tensor:
    """float64 [K]: sum over each row's masked positions of -log p(token), `ids` [L] wrapped
    text and `masked` [K, N] over its N content tokens (starting at column `offset`)."""
    device = mlm.device
    mask_id = mlm.tokenizer.mask_token_id
    ids = ids.to(device)
    totals = []
    for start in range(0, masked.shape[0], batch_rows):
        part = masked[start:start + batch_rows].to(device)
        where = torch.zeros(part.shape[0], ids.shape[0], dtype=torch.bool, device=device)
        where[:, offset:offset + part.shape[1]] = part
        rows = ids.repeat(part.shape[0], 1)
        targets = rows[where]
        rows = rows.masked_fill(where, mask_id)
        logp = masked_log_probs(mlm.model, rows, None, where)
        nll = -logp.double().gather(1, targets.unsqueeze(1)).squeeze(1)
        row_of = where.nonzero()[:, 0]
        totals.append(torch.zeros(part.shape[0], dtype=torch.float64, device=device)
                      .index_add_(0, row_of, nll))
    return torch.cat(totals).cpu()


def elbo(
    model,
    text: str | Sequence[str],
    *,
    samples: int = 128,
    method: str = "count",
    seed: int = 0,
    batch_rows: int = 64,
) -> Elbo | list[Elbo]:
    """The masked-diffusion NELBO of `text` (or of each text of a list), by Monte-Carlo.

    Works on any MLM (`model`: an MLM, a name/path, or a (model, tokenizer) pair).
    """
    mlm = as_mlm(model)
    if samples < 1:
        raise MlmkitError(f"--samples {samples} must be at least 1")
    if method not in METHODS:
        raise MlmkitError(f"unknown ELBO --method {method!r}: use one of {list(METHODS)}")
    texts = [text] if isinstance(text, str) else list(text)
    prefix, suffix = special_wrap(mlm.tokenizer)
    generator = torch.Generator().manual_seed(seed)
    results = []
    with torch.inference_mode():
        for index, one in enumerate(texts):
            content = text_ids(mlm.tokenizer, one)
            if not content:
                raise MlmkitError(f"text {index + 1} is empty: the ELBO needs at least one token")
            ids = torch.tensor(prefix + content + suffix)
            if len(ids) > mlm.max_length:
                raise MlmkitError(
                    f"text {index + 1} has {len(ids)} tokens but the model takes at most "
                    f"{mlm.max_length}: split it into shorter texts"
                )
            masked, weights = draw_masks(len(content), samples, method, generator)
            values = weights * masked_nll(mlm, ids, masked, len(prefix), batch_rows)
            stderr = float(values.std(unbiased=True) / math.sqrt(samples)) if samples > 1 \
                else float("nan")
            results.append(Elbo(text=one, n_tokens=len(content), nats=float(values.mean()),
                                stderr=stderr, samples=samples))
    return results[0] if isinstance(text, str) else results
