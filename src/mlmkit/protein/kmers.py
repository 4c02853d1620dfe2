"""A k-mer DNA tokenizer in the layout of the Nucleotide Transformer (Dalla-Torre et al.
2024), whose models are ESM's architecture over DNA.

Vocabulary: `<unk> <pad> <mask> <cls> <eos> <bos>`, every k-mer of A, T, C, G (4^k, in
the order of `itertools.product("ATCG")`), then the single letters A T C G N. A sequence
is read left to right in non-overlapping k-mers; letters that do not complete a k-mer of
A/T/C/G (a short end, the letters before an N, the N itself) are single-letter tokens.
A sequence ends in `<eos>`, as documents end in pretraining's packed blocks, so a model
trained here is read as it was trained; the Nucleotide Transformer's own tokenizer adds no
end token, so score its released checkpoints with the tokenizer they ship.
Saved as a fast tokenizer that `AutoTokenizer.from_pretrained` loads; `esm2-*` presets
build a model over it (`build_mlm("esm2-tiny", dna_tokenizer())`).
"""

from __future__ import annotations

import itertools
from pathlib import Path

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from mlmkit.errors import InvalidArgument
from mlmkit.tokenizer import save_tokenizer

DNA_SPECIALS = ("<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>")
NUCLEOTIDES = "ATCG"
SINGLES = "ATCGN"


def dna_vocabulary(k: int = 6) -> list[str]:
    """The tokens of the k-mer tokenizer, in id order."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 8:
        raise InvalidArgument(f"k={k!r} must be a whole number from 1 to 8 (4^k k-mers)")
    kmers = ["".join(letters) for letters in itertools.product(NUCLEOTIDES, repeat=k)]
    singles = [s for s in SINGLES if s not in kmers]
    return [*DNA_SPECIALS, *kmers, *singles]


def dna_tokenizer(k: int = 6, directory: str | Path | None = None,
                  max_length: int = 1000) -> PreTrainedTokenizerFast:
    """The k-mer DNA tokenizer (`<cls> k-mers <eos>`), saved in `directory` when given;
    lower-case letters are read as upper case, whitespace is dropped."""
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise InvalidArgument(f"max_length={max_length!r} must be a whole number of tokens, "
                              "at least 3 (<cls>, one k-mer, <eos>)")
    vocabulary = dna_vocabulary(k)
    ids = {token: i for i, token in enumerate(vocabulary)}
    backend = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    backend.normalizer = normalizers.Sequence([
        normalizers.Replace(Regex(r"\s+"), ""),
        *(normalizers.Replace(letter.lower(), letter) for letter in SINGLES)])
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(f"[ACGT]{{{k}}}|."),
                                                 behavior="isolated")
    backend.post_processor = processors.TemplateProcessing(
        single="<cls> $A <eos>", pair="<cls> $A <eos> $B <eos>",
        special_tokens=[("<cls>", ids["<cls>"]), ("<eos>", ids["<eos>"])])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, cls_token="<cls>", pad_token="<pad>", eos_token="<eos>",
        sep_token="<eos>", bos_token="<bos>", unk_token="<unk>", mask_token="<mask>",
        model_max_length=max_length)
    if directory is not None:
        save_tokenizer(tokenizer, directory)
    return tokenizer
