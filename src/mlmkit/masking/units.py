"""Units: which positions are masked together (tokens, whole words, SpanBERT spans, PMI n-grams).

A unit component maps a batch to `unit_ids` [B, L]: positions with the same non-negative id in
a row form one unit, ids increasing along the row (below L); -1 marks what may never be
masked.
A unit never crosses a document boundary or a position that may not be masked, for every
component, because all of them go through `number_units`.
"""

from __future__ import annotations

import math

import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking import ngrams
from mlmkit.masking.lookup import take
from mlmkit.masking.registry import UNITS
from mlmkit.masking.seeding import uniform


def boundaries(maskable: torch.Tensor, document_ids: torch.Tensor | None) -> torch.Tensor:
    """Bool [B, L]: True where a unit must start whatever the words say (row start, a
    position after one that may not be masked, a new document)."""
    cut = torch.ones_like(maskable)
    cut[:, 1:] = ~maskable[:, :-1]
    if document_ids is not None:
        cut[:, 1:] |= document_ids[:, 1:] != document_ids[:, :-1]
    return cut


def number_units(starts: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """Unit ids from unit starts: a cumulative sum, -1 where nothing may be masked."""
    starts = starts & maskable
    ids = starts.long().cumsum(1) - 1
    return torch.where(maskable, ids, torch.full_like(ids, -1))


class Units:
    """Base: `needs_words` says whether the policy must supply word starts; `single` that
    every unit is one token whose id is its column."""

    PARAMS: dict = {}
    single = False
    needs_words = False
    needs_stats = False

    def __init__(self, **_):
        pass

    def assign(self, input_ids, maskable, word_starts, document_ids, generator):
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


@UNITS.register("tokens")
class TokenUnits(Units):
    """Every token is its own unit (BERT)."""

    name = "tokens"
    single = True  # unit id = column: counts skip the per-unit tables

    def assign(self, input_ids, maskable, word_starts, document_ids, generator):
        columns = torch.arange(input_ids.shape[1], device=input_ids.device)
        return torch.where(maskable, columns.expand_as(input_ids), -1)


@UNITS.register("whole_word")
class WholeWordUnits(Units):
    """All subwords of a word together (whole-word masking)."""

    name = "whole_word"
    needs_words = True

    def assign(self, input_ids, maskable, word_starts, document_ids, generator):
        return number_units(word_starts | boundaries(maskable, document_ids), maskable)


def truncated_geometric(shape, p: float, max_length: int, generator, device) -> torch.Tensor:
    """Lengths in 1..max_length with P(l) ∝ (1 - p)^(l - 1) p (SpanBERT's law, mean ≈ 3.8 for
    p = 0.2, max 10), by inverting the CDF: one uniform per draw, no rejection."""
    q = 1.0 - p
    top = 1.0 - q ** max_length  # the CDF at max_length: rescaling u truncates exactly
    u = uniform(shape, generator, device) * top
    lengths = torch.ceil(torch.log1p(-u) / math.log(q))
    return lengths.clamp_(1, max_length).long()


@UNITS.register("span")
class SpanUnits(Units):
    """Spans of whole words with truncated-geometric lengths (SpanBERT).

    Each row's words are cut into consecutive spans whose lengths (in words) are drawn
    from the law; masking then chooses among spans, so every masked span has a length
    drawn from it (cut short only by a document end or an unmaskable token).
    """

    PARAMS = {"p": 0.2, "max_words": 10}
    name = "span"
    needs_words = True

    def __init__(self, p: float = 0.2, max_words: int = 10, **_):
        if not 0.0 < p < 1.0:
            raise MlmkitError(f"span units: p={p} must be in (0, 1)")
        if int(max_words) < 1:
            raise MlmkitError(f"span units: max_words={max_words} must be at least 1")
        self.p, self.max_words = float(p), int(max_words)

    def mean_length(self) -> float:
        q = 1.0 - self.p
        weights = [q ** (k - 1) * self.p for k in range(1, self.max_words + 1)]
        return sum(k * w for k, w in enumerate(weights, 1)) / sum(weights)

    def assign(self, input_ids, maskable, word_starts, document_ids, generator):
        batch, length = input_ids.shape
        cut = boundaries(maskable, document_ids)
        word_start = (word_starts | cut) & maskable
        word_index = word_start.long().cumsum(1) - 1  # word number within the row
        lengths = truncated_geometric((batch, length), self.p, self.max_words, generator,
                                      input_ids.device)
        ends = lengths.cumsum(1)  # span k covers words [ends[k-1], ends[k])
        # span of word w = how many ends are <= w: mark the ends, count by a cumulative sum
        marks = torch.zeros(batch, length + 1, dtype=torch.int32, device=input_ids.device)
        marks.scatter_(1, ends.clamp(max=length), 1)
        span = marks[:, :length].cumsum(1).gather(1, word_index.clamp(min=0))
        new_span = torch.ones_like(word_start)
        new_span[:, 1:] = span[:, 1:] != span[:, :-1]
        return number_units(word_start & (new_span | cut), maskable)

    def describe(self) -> str:
        return f"span(p={self.p}, max_words={self.max_words})"


@UNITS.register("pmi")
class PmiUnits(Units):
    """Whole words, with high-PMI n-gram collocations (n ≤ 5 tokens) masked as one unit
    (PMI-Masking). The collocations come from `mlmkit mask stats`.

    The rule: longest collocations first; a window is a candidate when it starts a word,
    ends one, spans two words or more, is all maskable within one document and touches no
    position a longer collocation took; of candidates of one length, one with another
    candidate in the n - 1 positions before it gives way. Only windows whose first two
    and last two ids begin and end some collocation of their length (one gather in a
    table of id pairs) are hashed and looked up in the key set.
    """

    PARAMS = {"min_pmi": None, "max_ngrams": None}
    PAIR_BITS = 18  # the pair prefilter: 2^18 slots; bit n - 2 begins, bit n + 6 ends length n
    name = "pmi"
    needs_words = True
    needs_stats = True

    def __init__(self, min_pmi=None, max_ngrams=None, stats=None, **_):
        if stats is None:
            raise MlmkitError("pmi units need n-gram statistics: run `mlmkit mask stats CORPUS "
                              "TOKENIZER -o DIR` and pass stats=DIR")
        rows = stats.collocation_ids(min_pmi=min_pmi, max_ngrams=max_ngrams)
        sizes = (rows >= 0).sum(1)
        self.lengths = sorted({int(n) for n in sizes.tolist() if n >= 2}, reverse=True)
        keys = []
        pairs = torch.zeros(1 << self.PAIR_BITS, dtype=torch.int16)
        for n in self.lengths:
            grams = rows[sizes == n, :n]
            keys.append(ngrams.window_keys(grams, n).reshape(-1))
            for pair, bit in ((grams[:, :2], n - 2), (grams[:, n - 2:], n + 6)):
                at = ngrams.slot(ngrams.window_keys(pair, 2).reshape(-1), self.PAIR_BITS)
                pairs[at] |= 1 << bit
        self.count = sum(len(k) for k in keys)
        self._keys = ngrams.KeySet(torch.cat(keys) if keys else torch.zeros(0, dtype=torch.long))
        self._pairs = pairs
        self._on_device: dict = {}

    def _tables(self, device):
        """(collocation key set, pair table) on `device`."""
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = (self._keys.to(device), self._pairs.to(device))
        return self._on_device[key]

    def assign(self, input_ids, maskable, word_starts, document_ids, generator):
        batch, length = input_ids.shape
        cut = boundaries(maskable, document_ids)
        word_start = word_starts | cut
        lengths = [n for n in self.lengths if n <= length]
        if not lengths:
            return number_units(word_start, maskable)
        keyset, pairs = self._tables(input_ids.device)
        pair_keys = ngrams.window_keys(input_ids, 2)
        pair = take(pairs, ngrams.slot(pair_keys, self.PAIR_BITS))  # [B, L - 1]
        # Windows of each length that may be collocations, whatever longer ones take: start
        # a maskable word, end a word, no cut inside, two words or more, plausible pairs.
        ends = maskable.clone()
        ends[:, :-1] &= word_start[:, 1:] | ~maskable[:, 1:]
        plausible = {}
        no_cut, two_words = torch.ones_like(cut), torch.zeros_like(cut)
        for n in range(2, lengths[0] + 1):  # shortest first: each extends the one before
            width = length - n + 1
            no_cut = no_cut[:, :width] & ~cut[:, n - 1:]
            two_words = two_words[:, :width] | word_start[:, n - 1:]
            if n in lengths:
                ok = word_start[:, :width] & maskable[:, :width] & ends[:, n - 1:]
                ok &= no_cut & two_words
                ok &= ((pair[:, :width] >> (n - 2)) & (pair[:, n - 2:] >> (n + 6)) & 1).bool()
                plausible[n] = ok
        offsets = torch.arange(lengths[0], device=input_ids.device)
        covered = torch.zeros_like(maskable)
        joined = torch.zeros_like(maskable)  # True: continues the collocation on its left
        for n in lengths:  # longest first
            width = length - n + 1
            hit = plausible[n].clone()
            for k in range(n):  # nothing a longer collocation took
                hit &= ~covered[:, k:k + width]
            where = hit.view(-1).nonzero().squeeze(1)
            if n == 2:
                keys = take(pair_keys, where)
            else:  # hash the few candidate windows only, as `ngrams.window_keys` does
                at = where + where // width * (n - 1)  # flat position in [B, L]
                window = take(input_ids, at[:, None] + offsets[:n])
                keys = ngrams.window_keys(window, n)[:, 0]
            hit.view(-1)[where] = keyset.contains(keys)
            earlier = torch.zeros_like(hit)  # of one length, a candidate just before wins
            for k in range(1, min(n, width)):
                earlier[:, k:] |= hit[:, :-k]
            hit &= ~earlier
            for k in range(n):
                covered[:, k:k + width] |= hit
                if k:
                    joined[:, k:k + width] |= hit
        return number_units(word_start & ~joined | cut, maskable)

    def describe(self) -> str:
        return f"pmi({self.count} collocations)"
