"""The amino-acid alphabet of ESM-2 and a Hugging Face tokenizer over it.

The vocabulary is ESM-2's, in ESM-2's order (so a model built here has the token ids of
the released checkpoints): four specials, the 20 standard residues ordered by frequency,
the rare and ambiguous letters (X B U Z O), gap symbols, and `<mask>` last. The tokenizer
is transformers' `EsmTokenizer`, so `AutoTokenizer.from_pretrained(dir)` loads it as it
loads `facebook/esm2_t6_8M_UR50D`'s.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from transformers import EsmTokenizer

SPECIALS = ("<cls>", "<pad>", "<eos>", "<unk>")
STANDARD = "LAGVSERTIDPKQNFYMHWC"  # the 20 standard residues, ESM-2's order
RARE = "XBUZO"  # unknown, Asx, selenocysteine, Glx, pyrrolysine
GAPS = (".", "-", "<null_1>")
VOCABULARY: tuple[str, ...] = (*SPECIALS, *STANDARD, *RARE, *GAPS, "<mask>")
RESIDUES = STANDARD + RARE  # the letters a protein sequence may hold


def protein_tokenizer(directory: str | Path | None = None) -> EsmTokenizer:
    """ESM-2's amino-acid tokenizer (33 tokens), saved in `directory` when given.

    A sequence is split into residues (`"MKV"` → `<cls> M K V <eos>`); `AutoTokenizer`
    loads the saved directory.
    """
    with tempfile.TemporaryDirectory() as tmp:
        vocab = Path(tmp) / "vocab.txt"
        vocab.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
        tokenizer = EsmTokenizer(str(vocab), model_max_length=1026)
    if directory is not None:
        tokenizer.save_pretrained(str(directory))
    return tokenizer
