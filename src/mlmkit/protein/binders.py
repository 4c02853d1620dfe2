"""Peptide binder design by masked infilling (PepMLM, Chen et al. 2024): a fully masked
binder of `length` residues is placed at the terminus of the target and the masked LM
fills it with the generation samplers; each binder is scored by the pseudo-log-likelihood
of its residues given the target (and the rest of the binder), and its pseudo-perplexity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlmkit.core.checks import count
from mlmkit.core.results import Result
from mlmkit.errors import InvalidArgument
from mlmkit.generation import infill
from mlmkit.generation.options import SamplerOptions, sampler_keywords
from mlmkit.generation.pll import token_pll
from mlmkit.models.load import prepare_mlm
from mlmkit.options import as_keywords
from mlmkit.protein.alphabet import RESIDUES, STANDARD
from mlmkit.protein.mutations import check_sequence
from mlmkit.protein.variants import check_protein_tokenizer, residue_ids

TERMINI = ("C", "N")
RESIDUE_SETS = ("standard", "all")  # the 20 standard residues, or also the rare letters


@dataclass(frozen=True)
class Binder(Result):
    """A designed binder: its residues, the PLL of the binder region given the target
    (float64 sum of log-probabilities, one residue masked at a time), and the
    pseudo-perplexity exp(−PLL / length) (lower: the model finds it more likely)."""

    sequence: str
    pll: float
    pseudo_perplexity: float


@sampler_keywords
def design_binders(
    model,
    target: str,
    length: int,
    n: int = 8,
    *,
    terminus: str = "C",
    residues: str = "standard",
    options: SamplerOptions,
    batch_tokens: int | None = None,
    progress: bool | None = False,
    device=None,
    precision: str = "auto",
    threads: int | None = None,
) -> list[Binder]:
    """`n` binders of `length` residues for the protein `target`, best (lowest
    pseudo-perplexity) first.

    The binder is masked at the `terminus` (C: after the target, N: before it) and filled
    by the unmasking loop with the sampler keywords of `mlmkit.infill` (`sampler`, `steps`,
    `reveal` and its `threshold`/`factor`/`entropy_bound`, `temperature`, `top_k`, ...);
    the same `seed` gives the same binders. `residues`: "standard" samples
    the 20 standard amino acids only (a peptide to synthesise); "all" also the rare and
    ambiguous letters of the alphabet (X B U Z O); never a gap or a special token.
    """
    if terminus not in TERMINI:
        raise InvalidArgument(f"terminus={terminus!r} (--terminus) must be C or N")
    if residues not in RESIDUE_SETS:
        raise InvalidArgument(f"residues={residues!r} (--residues) must be standard or all")
    length = count("length", length, 1, 1000)
    n = count("n", n, 1, 100_000)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    target = check_sequence(target, "the target sequence")
    residue_ids(mlm.tokenizer, target)
    check_protein_tokenizer(mlm, target)
    tokens = len(target) + length + mlm.tokenizer.num_special_tokens_to_add()
    if tokens > mlm.max_length:
        raise InvalidArgument(f"the target ({len(target)} residues) and a binder of {length} "
                              f"(--length) take {tokens} tokens, more than the model's "
                              f"{mlm.max_length}: shorten the target or the binder")
    span = f"[MASK:{length}]"
    template = target + span if terminus == "C" else span + target
    # every token but the allowed residues: a hub tokenizer (EsmTokenizer) does not count the
    # gap symbols as special, so the samplers' own exclusion of specials is not enough
    allowed = set(STANDARD if residues == "standard" else RESIDUES)
    others = sorted({i for token, i in mlm.tokenizer.get_vocab().items()
                     if token not in allowed})
    filled = infill(mlm, [template] * n, **as_keywords(options), batch_tokens=batch_tokens,
                    precision=precision, progress=progress, exclude_ids=others)
    binders = ["".join(f.spans[0].split()) for f in filled]
    rows = [residue_ids(mlm.tokenizer, target + b if terminus == "C" else b + target)
            for b in binders]
    scores = token_pll(mlm, [r.tolist() for r in rows], batch_tokens=batch_tokens,
                       precision=precision)
    out = []
    for binder, values in zip(binders, scores, strict=True):
        region = values[len(target):] if terminus == "C" else values[:length]
        pll = float(region.sum())
        out.append(Binder(sequence=binder, pll=pll,
                          pseudo_perplexity=math.exp(-pll / length)))
    return sorted(out, key=lambda b: b.pseudo_perplexity)
