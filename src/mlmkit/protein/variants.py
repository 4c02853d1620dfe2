"""Zero-shot variant-effect scores from a masked LM (Meier et al. 2021; ProteinGym).

Four strategies, each a log-likelihood ratio of mutant against wild type, summed over the
mutations of a multi-mutant as ProteinGym does:

- `masked-marginals`: at each mutated position, mask it in the wild type and compare
  log p(mutant) with log p(wild type). One masked copy per *position*, shared by every
  substitution there, so the 19 substitutions of a deep scan cost one forward pass each
  position, not 19; the copies run as one batched job on the engine.
- `wt-marginals`: the same ratio read from the unmasked wild type (one pass per window).
- `mutant-marginals`: the ratio read at the mutated positions of the unmasked mutant
  (one pass per variant).
- `pll`: the mutant's pseudo-log-likelihood minus the wild type's (every residue masked in
  turn; one pass per residue and variant).

Proteins longer than the model reads are scored in ProteinGym's sliding windows
(`mlmkit.protein.windows`), <cls> and <eos> kept around each window: a masked or read
position sees the window chosen for it; a variant read whole (mutant-marginals, PLL) sees
the window of its mutations' mean position, the wild type the same window. A mutation
outside that window (a multi-mutant spread wider than the model reads) is scored in its
own position's window, with the mutations that share it, and the parts are summed as a
multi-mutant's effects are.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

from mlmkit.core.checks import clipped
from mlmkit.engine.batching import run_jobs
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.models.load import prepare_mlm
from mlmkit.models.sparse_last_layer import full_forward
from mlmkit.protein.mutations import Mutation, check_sequence, parse_variant
from mlmkit.protein.windows import residue_window
from mlmkit.scoring.masked_copies import score_token_ids

STRATEGIES = ("masked-marginals", "wt-marginals", "mutant-marginals", "pll")


def residue_ids(tokenizer, sequence: str) -> np.ndarray:
    """The token ids of `sequence`'s residues, one per letter (no specials)."""
    ids = np.asarray(tokenizer.convert_tokens_to_ids(list(sequence)), dtype=np.int64)
    unknown = tokenizer.unk_token_id
    if unknown is not None and (ids == unknown).any():
        letter = sequence[int(np.argmax(ids == unknown))]
        raise InvalidData(f"the model's tokenizer has no token for residue {letter!r}: use a "
                          "protein model (ESM's amino-acid alphabet)")
    return ids


SPELLING_SAMPLE = 64  # residues of the sequence that judge how a tokenizer spells proteins
SMALL_VOCABULARY = 256  # a protein alphabet's tokens and specials fit (ESM: 33, ProtBERT: 30)


def check_protein_tokenizer(mlm, sequence: str) -> None:
    """Warn when `mlm`'s tokenizer does not spell a protein a residue per token (a text
    model's merges letters into words): the one-letter tokens mlmkit feeds it are then not
    what it was trained on, and its scores mean little. A protein tokenizer reads the
    letters as they are (ESM's), or spaced with an alphabet's small vocabulary (ProtBERT's;
    a text WordPiece also reads spaced letters one by one, but among thousands of words)."""
    sample = sequence[:SPELLING_SAMPLE]
    expected = residue_ids(mlm.tokenizer, sample).tolist()
    spellings = [sample] + ([" ".join(sample)] if len(mlm.tokenizer) <= SMALL_VOCABULARY
                            else [])
    for text in spellings:
        if mlm.tokenizer(text, add_special_tokens=False)["input_ids"] == expected:
            return
    spelled = mlm.tokenizer.tokenize(sample[:12])
    warnings.warn(f"{mlm.name}'s tokenizer does not spell a protein a residue per token "
                  f"({sample[:12]!r} is {spelled}): its scores of residues mean little; use "
                  "a protein masked LM (ESM-2)", stacklevel=3)


class _Protein:
    """The wild type as token ids, and how to cut a window of it (or of a mutant)."""

    def __init__(self, mlm, sequence: str):
        tokenizer = mlm.tokenizer
        self.ids = residue_ids(tokenizer, sequence)
        self.cls = tokenizer.cls_token_id
        self.eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None \
            else tokenizer.sep_token_id
        self.mask = tokenizer.mask_token_id
        if self.mask is None:
            raise InvalidArgument(f"{mlm.name}'s tokenizer has no mask token: score with a "
                                  "masked LM")
        self.specials = (self.cls is not None) + (self.eos is not None)
        self.window = mlm.max_length - self.specials
        self.prefix = int(self.cls is not None)
        self.token_of = {letter: int(i) for letter, i in
                         zip(sequence, self.ids, strict=True)}

    def __len__(self) -> int:
        return len(self.ids)

    def window_of(self, index: int) -> tuple[int, int]:
        return residue_window(index, len(self), self.window)

    def row(self, residues: np.ndarray, start: int, end: int) -> np.ndarray:
        parts = [residues[start:end]]
        if self.cls is not None:
            parts.insert(0, [self.cls])
        if self.eos is not None:
            parts.append([self.eos])
        return np.concatenate(parts).astype(np.int64)


def _log_probs(mlm, rows: list[tuple[np.ndarray, list[int]]], batch_tokens, precision,
               progress) -> list[np.ndarray]:
    """Per row, the float64 log-probabilities [len(columns), V] at its read columns."""

    def reduce(batch, out):
        counts = np.bincount(batch.positions[:, 0].cpu().numpy(), minlength=batch.rows)
        values = out.double().cpu().numpy()
        return np.split(values, np.cumsum(counts)[:-1])

    return run_jobs(mlm, rows, reduce, batch_tokens=batch_tokens, precision=precision,
                    progress=progress, description="variant effects", unit="passes")


def variant_effects(
    model,
    sequence: str,
    mutations: str | Sequence[str],
    *,
    strategy: str = "masked-marginals",
    offset: int = 1,
    batch_tokens: int | None = None,
    progress: bool | None = False,
    device=None,
    precision: str = "auto",
    threads: int | None = None,
) -> np.ndarray:
    """Zero-shot effect scores of `mutations` on the protein `sequence` (float64, one per
    mutation, in order; higher: predicted fitter).

    `mutations`: `A42G` strings (multi-mutants `A42G:V50L`, their effects summed).
    `strategy`: masked-marginals (Meier et al.'s best), wt-marginals, mutant-marginals, pll.
    `offset`: the number of the sequence's first residue in the mutation strings (1: the
    first residue is 1). Proteins longer than the model's window are scored in ProteinGym's
    sliding windows. Equal, within float32 noise, to scoring each mutation with its own
    masked sequences one forward pass at a time.

    >>> mlm.variant_effects("MKTAYIAK", ["K2A", "T3G:Y5W"])   # doctest: +SKIP
    """
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown strategy {strategy!r}: use one of "
                              f"{', '.join(STRATEGIES)}")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise InvalidArgument(f"offset={offset!r} (--offset) must be a whole number")
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    sequence = check_sequence(sequence, "the wild-type sequence")
    if isinstance(mutations, str):
        mutations = [mutations]
    if not isinstance(mutations, Iterable) or isinstance(mutations, (bytes, dict)):
        raise InvalidArgument(f"mutations={clipped(repr(mutations), 60)}: give a mutation string "
                              "(A42G, or A42G:V50L) or a list of them")
    mutations = list(mutations)  # a list, a tuple, a numpy array, a pandas column
    variants = [parse_variant(text, sequence, int(offset), name=f"mutation {i + 1} ({text!r})",
                              offset_name="offset= (--offset)")
                for i, text in enumerate(mutations)]
    if not variants:
        return np.zeros(0, dtype=np.float64)
    protein = _Protein(mlm, sequence)
    check_protein_tokenizer(mlm, sequence)
    for variant in variants:  # a mutant letter the tokenizer lacks fails before any pass
        residue_ids(mlm.tokenizer, "".join(m.mutant for m in variant))
    score = {"masked-marginals": _marginals, "wt-marginals": _marginals,
             "mutant-marginals": _mutant_marginals, "pll": _pll}[strategy]
    run = dict(batch_tokens=batch_tokens, precision=precision, progress=progress)
    return score(mlm, protein, variants, strategy=strategy, run=run)


def _token(mlm, letter: str) -> int:
    return int(mlm.tokenizer.convert_tokens_to_ids(letter))


def _marginals(mlm, protein: _Protein, variants, *, strategy: str, run: dict) -> np.ndarray:
    """Masked- or wild-type marginals: one row per mutated position (masked there) or per
    window of the wild type (unmasked), each read where it is needed."""
    positions = sorted({m.index for variant in variants for m in variant})
    masked = strategy == "masked-marginals"
    rows, where = [], {}
    if masked:
        for index in positions:
            start, end = protein.window_of(index)
            row = protein.row(protein.ids, start, end)
            column = protein.prefix + index - start
            row[column] = protein.mask
            where[index] = (len(rows), 0)
            rows.append((row, [column]))
    else:
        windows: dict[tuple[int, int], list[int]] = {}
        for index in positions:
            windows.setdefault(protein.window_of(index), []).append(index)
        for (start, end), indices in windows.items():
            for k, index in enumerate(indices):
                where[index] = (len(rows), k)
            rows.append((protein.row(protein.ids, start, end),
                         [protein.prefix + index - start for index in indices]))
    log_probs = _log_probs(mlm, rows, **run)
    scores = np.zeros(len(variants), dtype=np.float64)
    for i, variant in enumerate(variants):
        for m in variant:
            row, k = where[m.index]
            values = log_probs[row][k]
            scores[i] += values[_token(mlm, m.mutant)] - values[_token(mlm, m.wild_type)]
    return scores


def _variant_windows(protein: _Protein, variant: tuple[Mutation, ...]
                     ) -> dict[tuple[int, int], list[Mutation]]:
    """The windows a variant is read in whole, each with the mutations read there: the
    window of its mutations' mean position, and for a mutation outside it, its own
    position's window."""
    centre = int(round(float(np.mean([m.index for m in variant]))))
    home = protein.window_of(centre)
    groups: dict[tuple[int, int], list[Mutation]] = {}
    for m in variant:
        window = home if home[0] <= m.index < home[1] else protein.window_of(m.index)
        groups.setdefault(window, []).append(m)
    return groups


def _mutant(mlm, protein: _Protein, variant: Sequence[Mutation]) -> np.ndarray:
    residues = protein.ids.copy()
    for m in variant:
        residues[m.index] = _token(mlm, m.mutant)
    return residues


def _mutant_marginals(mlm, protein: _Protein, variants, *, strategy: str,
                      run: dict) -> np.ndarray:
    """One unmasked pass of each mutant, read at its mutated positions; a mutation outside
    the variant's window is read in a pass of its own window."""
    rows, reads = [], []
    for i, variant in enumerate(variants):
        residues = _mutant(mlm, protein, variant)
        for (start, end), group in _variant_windows(protein, variant).items():
            rows.append((protein.row(residues, start, end),
                         [protein.prefix + m.index - start for m in group]))
            reads.append((i, group))
    log_probs = _log_probs(mlm, rows, **run)
    scores = np.zeros(len(variants), dtype=np.float64)
    for values, (i, group) in zip(log_probs, reads, strict=True):
        for k, m in enumerate(group):
            scores[i] += values[k][_token(mlm, m.mutant)] - values[k][_token(mlm, m.wild_type)]
    return scores


def _pll(mlm, protein: _Protein, variants, *, strategy: str, run: dict) -> np.ndarray:
    """PLL(mutant) − PLL(wild type) over the variant's window: every residue of the window
    masked in turn, its true token read. A variant spread over several windows sums each
    window's difference, the window's mutant carrying only the mutations read there (a
    mutation is counted once where windows overlap). Each distinct sequence (the wild type of a
    window, a mutant however often it is listed) is scored once, by the PLL engine
    (`scoring.masked_copies`: the masked copies of all sequences in token-budget batches,
    the last layer and the head only at each copy's masked column). In float32 the encoder
    runs the model's own operations (`full_forward`): each of the hundreds of summed
    log-probabilities is then the one-copy-at-a-time value bit for bit, where the faster
    layers' float32 rounding would add up to about 1e-5 over a 263-residue protein. Under
    bf16 autocast, which rounds every term anyway, it runs the faster layers."""
    rows: list[np.ndarray] = []
    index_of: dict[bytes, int] = {}

    def scored(residues: np.ndarray, window: tuple[int, int]) -> int:
        row = protein.row(residues, *window)
        key = row.tobytes()
        if key not in index_of:
            index_of[key] = len(rows)
            rows.append(row)
        return index_of[key]

    pairs = []  # per variant, the (mutant, wild type) rows of each of its windows
    for variant in variants:
        pairs.append([(scored(_mutant(mlm, protein, group), window),
                       scored(protein.ids, window))
                      for window, group in _variant_windows(protein, variant).items()])
    residues = [np.arange(protein.prefix, protein.prefix + width) for width in
                (len(row) - protein.specials for row in rows)]
    # A sum of hundreds of terms: in float32 each the model's own, bit for bit. bf16
    # autocast rounds every term anyway, so it takes the faster fused layers.
    exact = full_forward() if run["precision"] == "fp32" else contextlib.nullcontext()
    with exact:
        log_probs = score_token_ids(mlm, rows, residues, batch_tokens=run["batch_tokens"],
                                    precision=run["precision"], progress=run["progress"],
                                    max_length=max(len(row) for row in rows))
    pll = np.array([values.sum() for values in log_probs], dtype=np.float64)
    return np.array([sum(pll[mutant] - pll[wild] for mutant, wild in parts)
                     for parts in pairs], dtype=np.float64)
