"""The amino-acid alphabet of ESM-2 and a Hugging Face tokenizer over it.

The vocabulary is ESM-2's, in ESM-2's order (so a model built here has the token ids of
the released checkpoints): four specials, the 20 standard residues ordered by frequency,
the rare and ambiguous letters (X B U Z O), gap symbols, and `<mask>` last. The tokenizer
is a fast one (a `tokenizer.json`: one word-level token per letter, lower-case residues read
as upper case, whitespace dropped, `<cls> … <eos>` around a sequence), so
`AutoTokenizer.from_pretrained(dir)` loads it and pretraining gets the word ids it needs
(every residue is a word). A sequence of the alphabet's letters gets the ids transformers'
`EsmTokenizer` gives it; they differ on other input: `EsmTokenizer` reads lower case as
unknown and gives one `<unk>` to a run of unknown letters, this one one to each letter (a
residue count stays a token count).
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from mlmkit.models.preset_table import ESM2_TOKENS
from mlmkit.tokenizer import save_tokenizer

SPECIALS = ("<cls>", "<pad>", "<eos>", "<unk>")
STANDARD = "LAGVSERTIDPKQNFYMHWC"  # the 20 standard residues, ESM-2's order
RARE = "XBUZO"  # unknown, Asx, selenocysteine, Glx, pyrrolysine
GAPS = (".", "-", "<null_1>")
VOCABULARY: tuple[str, ...] = (*SPECIALS, *STANDARD, *RARE, *GAPS, "<mask>")
RESIDUES = STANDARD + RARE  # the letters a protein sequence may hold
AMBIGUOUS = "XBZ"  # codes for an unknown or one of two residues: no variant names them
# DNA is nearly all A, C, G, T (and N), which are residues too: a "protein" that much of
# them is a gene (a corpus, or a wild type, read by the wrong alphabet)
NUCLEOTIDE_LETTERS, MAX_NUCLEOTIDE_SHARE = "ACGTN", 0.9


def protein_tokenizer(directory: str | Path | None = None) -> PreTrainedTokenizerFast:
    """ESM-2's amino-acid tokenizer (33 tokens), saved in `directory` when given.

    A sequence is split into residues (`"MKV"` → `<cls> M K V <eos>`; `<mask>` is one
    token); `<eos>` doubles as the separator a packer puts between documents. The gap
    symbols are special tokens: never masked in pretraining, never sampled in generation.
    """
    ids = {token: i for i, token in enumerate(VOCABULARY)}
    backend = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    backend.normalizer = normalizers.Sequence(  # special tokens are matched before this
        [normalizers.Replace(letter.lower(), letter) for letter in RESIDUES])
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex("."), behavior="isolated"),
    ])
    backend.post_processor = processors.TemplateProcessing(
        single="<cls> $A <eos>", pair="<cls> $A <eos> $B <eos>",
        special_tokens=[("<cls>", ids["<cls>"]), ("<eos>", ids["<eos>"])])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, cls_token="<cls>", pad_token="<pad>", eos_token="<eos>",
        sep_token="<eos>", unk_token="<unk>", mask_token="<mask>",
        additional_special_tokens=list(GAPS), model_max_length=ESM2_TOKENS)
    if directory is not None:
        save_tokenizer(tokenizer, directory)
    return tokenizer
