"""The masked-diffusion ELBO of a text under any MLM: a likelihood bound, in float64.

For a text of N tokens, -log p(x) <= NELBO = sum_{l=1..N} (1/l) E_{|S|=l}[sum_{i in S}
-log p(x_i | x with S masked)]: MDLM's continuous-time bound E_t[(1/t) sum_masked -log p]
(each token masked with probability t) and LLaDA's E_l[(N/l) sum_masked -log p] (l masked
tokens) are two estimators of it. Both are stratified Monte-Carlo: `count` stratifies l
over 1..N, `time` stratifies t over (0, 1) (MDLM's low-discrepancy sampler). Reported as
nats/token and a perplexity bound.

The denoiser p(x_i | x_t) is MDLM's SUBS parameterisation by default
(`parameterization="subs"`): the [MASK] logit is set to -inf before the softmax, so the
model never predicts [MASK] (zero masking probabilities), and unmasked positions carry
their token over with probability 1, so only masked positions contribute. This is the
bound MDLM derives and the one mlmkit's diffusion objective trains. `"softmax"` keeps the
plain softmax over the whole vocabulary (the [MASK] token keeps its share of probability
mass): a valid but looser bound for a model that puts mass on [MASK], larger by
sum_masked -log(1 - p([MASK])) per sample; the two agree when p([MASK]) is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mlmkit.core import checks
from mlmkit.core.results import Result
from mlmkit.engine.batching import row_sums, run_jobs
from mlmkit.errors import InvalidArgument
from mlmkit.generation.canvas import special_wrap, text_ids
from mlmkit.generation.samplers import top_per_row
from mlmkit.generation.setup import check_texts
from mlmkit.models.load import prepare_mlm

METHODS = ("count", "time")
PARAMETERIZATIONS = ("subs", "softmax")
MAX_SAMPLES = 1_000_000


@dataclass
class Elbo(Result):
    """The bound for one text."""

    text: str
    n_tokens: int
    nats: float
    """Monte-Carlo estimate of the NELBO (an upper bound on -log p(text)), in nats."""
    stderr: float
    """Standard error of `nats` (from the sample variance; conservative when stratified)."""
    samples: int
    method: str = "count"
    parameterization: str = "subs"

    @property
    def nats_per_token(self) -> float:
        return self.nats / self.n_tokens

    @property
    def perplexity_bound(self) -> float:
        """exp(NELBO / N): an upper bound on the model's perplexity on this text."""
        try:
            return math.exp(self.nats_per_token)
        except OverflowError:
            return math.inf

    def to_dict(self) -> dict:
        return dict(super().to_dict(), nats_per_token=self.nats_per_token,
                    perplexity_bound=(self.perplexity_bound
                                      if math.isfinite(self.perplexity_bound) else None))


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
    raise InvalidArgument(f"unknown ELBO --method {method!r}: use one of {list(METHODS)}")


def masked_nll(mlm, ids: torch.Tensor, masked: torch.Tensor, offset: int, *,
               parameterization: str = "subs", batch_tokens: int | None = None,
               precision: str = "fp32", progress: bool | None = False) -> torch.Tensor:
    """float64 [K]: sum over each row's masked positions of -log p(token | the rest), for
    `ids` [L] a wrapped text and `masked` [K, N] over its N content tokens (from column
    `offset`). One batched call: `masked_nll_many` for one text."""
    return masked_nll_many(mlm, [ids], [masked], [offset], parameterization=parameterization,
                           batch_tokens=batch_tokens, precision=precision,
                           progress=progress)[0]


def masked_nll_many(mlm, texts: list[torch.Tensor], masks: list[torch.Tensor],
                    offsets: list[int], *, parameterization: str = "subs",
                    batch_tokens: int | None = None, precision: str = "fp32",
                    progress: bool | None = False) -> list[torch.Tensor]:
    """`masked_nll` of several texts, all their masked copies batched together
    (`mlmkit.engine.batching.run_jobs`: token budget, length buckets, head only at the
    masks)."""
    checks.choice("parameterization", parameterization, PARAMETERIZATIONS)
    mask_id = mlm.tokenizer.mask_token_id
    rows, columns, targets, owner = [], [], [], []
    for number, (ids, masked, offset) in enumerate(zip(texts, masks, offsets, strict=True)):
        ids = torch.as_tensor(ids, dtype=torch.long).cpu()
        where = torch.zeros(masked.shape[0], ids.shape[0], dtype=torch.bool)
        where[:, offset:offset + masked.shape[1]] = masked.cpu()
        copies = ids.repeat(masked.shape[0], 1)
        for row, cols in zip(copies.masked_fill(where, mask_id).tolist(), where, strict=True):
            picked = cols.nonzero().squeeze(1)
            rows.append(row)
            columns.append(picked.tolist())
            targets.append(ids[picked])
            owner.append(number)

    def reduce(batch, logits):
        logits = logits.double()
        if parameterization == "subs":
            logits[:, mask_id] = -math.inf
        wanted = torch.cat([targets[j] for j in batch.index.tolist()]).to(logits.device)
        logp = torch.log_softmax(logits, -1).gather(1, wanted.unsqueeze(1)).squeeze(1)
        return row_sums(batch, -logp)

    values = run_jobs(mlm, list(zip(rows, columns, strict=True)), reduce,
                      batch_tokens=batch_tokens, precision=precision, progress=progress,
                      description="elbo", unit="samples", call="logits")
    values = torch.from_numpy(np.asarray(values, dtype=np.float64))
    owner = torch.tensor(owner, dtype=torch.long)
    return [values[owner == number] for number in range(len(texts))]


def elbo(
    model,
    texts: str | Sequence[str],
    *,
    samples: int = 128,
    method: str = "count",
    parameterization: str = "subs",
    seed: int = 0,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
) -> Elbo | list[Elbo]:
    """The masked-diffusion NELBO of `texts` (a text, or a list), by stratified Monte-Carlo.

    Works on any MLM (`model`: an MLM, a name/path, or a (model, tokenizer) pair).
    `parameterization`: "subs" (MDLM, the default: [MASK] never predicted) or "softmax"
    (the plain softmax; see the module docstring). The masks of text i are drawn after
    those of texts 0..i-1 from one generator seeded with `seed`. `batch_tokens` bounds the
    padded tokens of a batch of masked copies (default: sized for the model).
    """
    samples = checks.count("samples", samples, 1, MAX_SAMPLES)
    checks.choice("method", method, METHODS)
    checks.choice("parameterization", parameterization, PARAMETERIZATIONS)
    seed = checks.count("seed", seed, 0, 2**63 - 1)
    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    if not texts:
        raise InvalidArgument("no texts given: pass a text or a list of texts")
    if not all(isinstance(t, str) for t in texts):
        raise InvalidArgument("elbo takes a text or a list of texts (str)")
    check_texts(texts, "text")
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    prefix, suffix = special_wrap(mlm.tokenizer)
    generator = torch.Generator().manual_seed(seed)
    wrapped, masks, n_tokens = [], [], []
    for index, one in enumerate(texts):
        content = text_ids(mlm.tokenizer, one)
        if not content:
            raise InvalidArgument(f"text {index + 1} is empty: the ELBO needs at least one "
                                  "token")
        ids = torch.tensor(prefix + content + suffix)
        if len(ids) > mlm.max_length:
            raise InvalidArgument(
                f"text {index + 1} ({one[:40]!r}) has {len(ids)} tokens but the model takes at "
                f"most {mlm.max_length}: split it into shorter texts"
            )
        masked, weights = draw_masks(len(content), samples, method, generator)
        wrapped.append(ids)
        masks.append((masked, weights))
        n_tokens.append(len(content))
    nll = masked_nll_many(mlm, wrapped, [m for m, _ in masks], [len(prefix)] * len(texts),
                          parameterization=parameterization, batch_tokens=batch_tokens,
                          precision=precision, progress=progress)
    results = []
    for one, n, (_, weights), values in zip(texts, n_tokens, masks, nll, strict=True):
        values = weights * values
        stderr = float(values.std(unbiased=True) / math.sqrt(samples)) if samples > 1 \
            else float("nan")
        results.append(Elbo(text=one, n_tokens=n, nats=float(values.mean()), stderr=stderr,
                            samples=samples, method=method, parameterization=parameterization))
    return results[0] if single else results
