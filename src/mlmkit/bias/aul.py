"""AUL and AULA (Kaneko & Bollegala 2022): score the unmasked sentence.

AUL is the mean log-probability the model gives every token of the sentence when it sees
the whole sentence (no mask), leaving out the first and the last token ([CLS], [SEP]) as
the official code does. AULA weights each token's log-probability by the attention it
receives, averaged over layers, heads and query positions, before the mean. Both compare
the two sentences of a CrowS-Pairs pair as metric.py does (biased when sent_more scores
higher), without rounding. AUL needs one encoder pass per sentence with the head at every
scored token; AULA needs the attention weights, so it runs the full model with eager
attention.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import torch

from mlmkit.bias.crows import is_uncased
from mlmkit.bias.crows_data import CrowsPair
from mlmkit.bias.pairs import PairScores
from mlmkit.engine.batching import TokenJobs, check_budget, pick, run_jobs
from mlmkit.errors import InvalidData, ModelError
from mlmkit.models.load import prepare_mlm


@contextlib.contextmanager
def eager_attention(model):
    """Switch a loaded model to eager attention (which returns weights), then back."""
    config = model.config
    previous = getattr(config, "_attn_implementation", None)
    switched = previous not in (None, "eager")
    if switched:
        model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        if switched:
            model.set_attn_implementation(previous)


def received_attention(attentions, attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L]: attention each key receives, averaged over layers, heads and real queries."""
    stacked = torch.stack([a.double() for a in attentions])  # [layers, B, H, L, L]
    per_query = stacked.mean(dim=(0, 2))  # [B, L(query), L(key)]
    queries = attention_mask.double()
    return (per_query * queries[:, :, None]).sum(1) / queries.sum(1, keepdim=True)


def aul_sentence_scores(
    model, texts: Sequence[str], *, attention: bool = False, lowercase: bool = False,
    batch_tokens: int | None = None, precision: str = "auto", device=None,
    threads: int | None = None, progress: bool | None = None,
) -> np.ndarray:
    """AUL (or AULA with `attention=True`) of each text, float64, in input order.

    `precision` "bf16" runs the encoder (and the attention weights) under bf16 autocast;
    the log-probabilities and their means stay float64.
    """
    check_budget(batch_tokens)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    tokenizer, net = mlm.tokenizer, mlm.model
    encoded = [tokenizer.encode(t.lower() if lowercase else t, add_special_tokens=True,
                                verbose=False) for t in texts]
    for text, ids in zip(texts, encoded, strict=True):
        shown = repr(text) if len(text) <= 80 else repr(text[:80]) + "…"
        if len(ids) < 3:
            raise InvalidData(f"the sentence {shown} has no token besides its special tokens")
        if len(ids) > mlm.max_length:
            raise InvalidData(f"the sentence {shown} has {len(ids)} tokens, more than the "
                              f"model's {mlm.max_length}: AUL scores whole sentences; shorten "
                              "it or remove its pair")
    # every token but the first and the last ([CLS] … [SEP]) is read
    jobs = TokenJobs(encoded, [range(1, len(ids) - 1) for ids in encoded])

    def values_per_row(batch, per_position: torch.Tensor) -> torch.Tensor:
        """[b, L] float64, the read positions' values in place, zeros elsewhere."""
        rows, cols = batch.positions[:, 0], batch.positions[:, 1]
        values = torch.zeros(batch.input_ids.shape, dtype=torch.float64,
                             device=batch.input_ids.device)
        values[rows, cols] = per_position
        return values

    def aul(batch, log_probs: torch.Tensor) -> torch.Tensor:
        values = values_per_row(batch, pick(log_probs, batch.tokens_at_positions()))
        return values.sum(1) / torch.as_tensor(jobs.reads[batch.index],
                                               device=values.device).double()

    def aula(batch, _) -> torch.Tensor:
        ids, mask = batch.input_ids, batch.attention_mask
        output = net(input_ids=ids, attention_mask=mask, output_attentions=True)
        if not output.attentions:
            raise ModelError(f"{mlm.name!r} returned no attention weights: AULA needs a model "
                             "that supports output_attentions")
        log_probs = torch.log_softmax(output.logits.float(), dim=-1)
        token_lp = log_probs.gather(2, ids.unsqueeze(2)).squeeze(2).double()
        weights = received_attention(output.attentions, mask)
        read = values_per_row(batch, torch.ones(len(batch.positions), dtype=torch.float64,
                                                device=ids.device)) > 0
        values = torch.where(read, token_lp * weights, 0.0)
        return values.sum(1) / read.sum(1).double()

    context = eager_attention(net) if attention else contextlib.nullcontext()
    with context:
        return run_jobs(mlm, jobs, aula if attention else aul, batch_tokens=batch_tokens,
                        precision=precision, progress=progress,
                        description="AULA" if attention else "AUL", unit="sentences",
                        call=None if attention else "log_probs")


def score_aul(
    model, pairs: Sequence[CrowsPair], *, attention: bool = False,
    lowercase: bool | None = None, batch_tokens: int | None = None, precision: str = "auto",
    device=None, threads: int | None = None, progress: bool | None = None,
) -> PairScores:
    """AUL/AULA of both sentences of every pair, as PairScores (no rounding)."""
    check_budget(batch_tokens)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    if lowercase is None:
        lowercase = is_uncased(mlm.tokenizer)
    texts = [p.sent_more for p in pairs] + [p.sent_less for p in pairs]
    scores = aul_sentence_scores(mlm, texts, attention=attention, lowercase=lowercase,
                                 batch_tokens=batch_tokens, precision=precision,
                                 progress=progress)
    n = len(pairs)
    return PairScores(
        pairs=list(pairs), sent_more_score=scores[:n], sent_less_score=scores[n:],
        measure="aula" if attention else "aul", model=mlm.name,
        extras={"lowercase": lowercase, "precision": precision},
    )
