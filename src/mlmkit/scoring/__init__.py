"""Scoring text with a masked LM: PLL, PLL-word-l2r, pseudo-perplexity, rescoring, minimal pairs."""
