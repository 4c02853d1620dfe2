"""The variant-effect strategies written straight from their definitions, as esm's
predict.py writes them: one sequence per forward pass, the full logits, one mutation at a
time, windows cut by ProteinGym's rule. The tests and benchmarks/protein.py hold mlmkit to
these numbers."""

from __future__ import annotations

import numpy as np
import torch


def _window(index, length, window):
    if length <= window:
        return 0, length
    half = window // 2
    if index < half:
        return 0, window
    if index >= length - half:
        return length - window, length
    return max(0, index - half), min(length, index + half)


def _parse(text, offset):
    out = []
    for part in text.split(":"):
        out.append((part[0], int(part[1:-1]) - offset, part[-1]))
    return out


class Reference:
    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model.eval(), tokenizer
        # ESM numbers positions after the padding index (ESM-2's 1,026 position embeddings
        # hold 1,024 tokens), and <cls> and <eos> take two of those: 1,022 residues
        self.window = model.config.max_position_embeddings - 4

    def _log_probs(self, residues: str, masked_at=None):
        """log-softmax of the full logits of <cls> residues <eos> (masked at one residue)."""
        ids = [self.tokenizer.cls_token_id, *self.tokenizer.convert_tokens_to_ids(list(residues)),
               self.tokenizer.eos_token_id]
        if masked_at is not None:
            ids[masked_at + 1] = self.tokenizer.mask_token_id
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([ids])).logits[0]
        return torch.log_softmax(logits.float(), dim=-1).double().numpy()

    def _id(self, letter):
        return self.tokenizer.convert_tokens_to_ids(letter)

    def _ratio(self, log_probs, column, wild, mutant):
        return log_probs[column + 1, self._id(mutant)] - log_probs[column + 1, self._id(wild)]

    def masked_marginals(self, sequence, text, offset=1):
        total = 0.0
        for wild, index, mutant in _parse(text, offset):
            start, end = _window(index, len(sequence), self.window)
            log_probs = self._log_probs(sequence[start:end], masked_at=index - start)
            total += self._ratio(log_probs, index - start, wild, mutant)
        return total

    def wt_marginals(self, sequence, text, offset=1):
        total = 0.0
        for wild, index, mutant in _parse(text, offset):
            start, end = _window(index, len(sequence), self.window)
            log_probs = self._log_probs(sequence[start:end])
            total += self._ratio(log_probs, index - start, wild, mutant)
        return total

    def _mutant(self, sequence, mutations):
        residues = list(sequence)
        for _, index, mutant in mutations:
            residues[index] = mutant
        return "".join(residues)

    def _variant_window(self, sequence, mutations):
        centre = int(round(float(np.mean([index for _, index, _ in mutations]))))
        return _window(centre, len(sequence), self.window)

    def mutant_marginals(self, sequence, text, offset=1):
        mutations = _parse(text, offset)
        mutant = self._mutant(sequence, mutations)
        home = self._variant_window(sequence, mutations)
        total = 0.0
        for wild, index, letter in mutations:
            start, end = home if home[0] <= index < home[1] else \
                _window(index, len(sequence), self.window)
            log_probs = self._log_probs(mutant[start:end])
            total += self._ratio(log_probs, index - start, wild, letter)
        return total

    def pll_of(self, residues):
        total = 0.0
        for i, letter in enumerate(residues):
            total += self._log_probs(residues, masked_at=i)[i + 1, self._id(letter)]
        return total

    def pll(self, sequence, text, offset=1):
        """A mutation outside the variant's window is read in its own position's window;
        each window's difference counts only the mutations read there."""
        mutations = _parse(text, offset)
        home = self._variant_window(sequence, mutations)
        windows = {}
        for mutation in mutations:
            index = mutation[1]
            window = home if home[0] <= index < home[1] else \
                _window(index, len(sequence), self.window)
            windows.setdefault(window, []).append(mutation)
        total = 0.0
        for (start, end), group in windows.items():
            mutant = self._mutant(sequence, group)
            total += self.pll_of(mutant[start:end]) - self.pll_of(sequence[start:end])
        return total

    def score(self, strategy, sequence, texts, offset=1):
        method = getattr(self, strategy.replace("-", "_"))
        return np.array([method(sequence, t, offset) for t in texts])
