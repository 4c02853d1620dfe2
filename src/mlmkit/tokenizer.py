"""Train a WordPiece, byte-level BPE or Unigram tokenizer that `AutoTokenizer` loads.

Each kind carries the special tokens of its model family, so a model built from the
tokenizer (see `mlmkit.models.build_mlm`) behaves like that family's checkpoints:
wordpiece → BERT's [CLS]/[SEP]/[MASK]/[PAD]/[UNK]; bpe → RoBERTa's <s>/</s>/<mask>/
<pad>/<unk>; unigram → XLM-R's (SentencePiece-style ▁ word starts).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from mlmkit.core import checks
from mlmkit.core.staging import write_text
from mlmkit.errors import InvalidArgument, MlmkitError, PathError

KINDS = ("wordpiece", "bpe", "unigram")
MAX_VOCAB_SIZE = 2**20  # the Rust trainer aborts the process (no exception) far above this
MAX_MODEL_LENGTH = 1_000_000
# The class written into tokenizer_config.json: transformers 5 saves `TokenizersBackend`,
# which transformers 4 (and tools pinned to it) cannot load; both load this one from
# tokenizer.json exactly (in 5 it is an alias of TokenizersBackend).
PORTABLE_CLASS = "PreTrainedTokenizerFast"


def save_tokenizer(tokenizer, directory: str | Path) -> None:
    """`tokenizer.save_pretrained(directory)`, declaring a class transformers 4.x and 5.x
    both load (`PreTrainedTokenizerFast` instead of 5.x's `TokenizersBackend`). A path that
    is a file is refused (transformers only logs it and writes nothing)."""
    if Path(directory).exists() and not Path(directory).is_dir():
        raise PathError(f"cannot write a tokenizer to {str(directory)!r}: it is a file; "
                        "pass a folder")
    try:
        tokenizer.save_pretrained(str(directory))
    except OSError as error:
        raise PathError(f"cannot write a tokenizer to {str(directory)!r} "
                        f"({error.strerror or error}): pass a folder you can write") from None
    portable_tokenizer_config(directory)


def portable_tokenizer_config(directory: str | Path) -> None:
    """Rewrite a saved tokenizer_config.json's `TokenizersBackend` class (5.x only) as
    `PreTrainedTokenizerFast`; other classes (e.g. BertTokenizerFast) are left alone."""
    path = Path(directory) / "tokenizer_config.json"
    if not path.is_file():
        return
    values = json.loads(path.read_text(encoding="utf-8"))
    if values.get("tokenizer_class") in ("TokenizersBackend", None) and (
            Path(directory) / "tokenizer.json").is_file():
        values["tokenizer_class"] = PORTABLE_CLASS
        write_text(path, json.dumps(values, indent=2, ensure_ascii=False) + "\n")
BERT_SPECIALS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                 "sep_token": "[SEP]", "mask_token": "[MASK]"}
ROBERTA_SPECIALS = {"bos_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>",
                    "unk_token": "<unk>", "cls_token": "<s>", "sep_token": "</s>",
                    "mask_token": "<mask>"}


def _special_order(specials: dict[str, str]) -> list[str]:
    order = []
    for token in specials.values():
        if token not in order:
            order.append(token)
    return order


def _build(kind: str, vocab_size: int, lowercase: bool):
    if kind == "wordpiece":
        specials = BERT_SPECIALS
        order = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        norm = [normalizers.NFD(), normalizers.StripAccents()]
        tok.normalizer = normalizers.Sequence(([normalizers.Lowercase()] if lowercase else []) + norm)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=order)
    elif kind == "bpe":
        specials = ROBERTA_SPECIALS
        order = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = Tokenizer(models.BPE())
        if lowercase:
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=order,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    else:
        specials = ROBERTA_SPECIALS
        order = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = Tokenizer(models.Unigram())
        norm = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
        tok.normalizer = normalizers.Sequence(norm)
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=order, unk_token="<unk>"
        )
    return tok, trainer, specials


def _post_processor(tok: Tokenizer, specials: dict[str, str], kind: str):
    cls, sep = specials["cls_token"], specials["sep_token"]
    ids = {t: tok.token_to_id(t) for t in (cls, sep)}
    if kind == "wordpiece":
        pair = f"{cls} $A {sep} $B:1 {sep}:1"
    else:
        pair = f"{cls} $A {sep} {sep} $B {sep}"
    return processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=pair, special_tokens=list(ids.items())
    )


def train_tokenizer(
    texts: Iterable[str],
    output_dir: str | Path,
    kind: str = "wordpiece",
    vocab_size: int = 8192,
    lowercase: bool = False,
    model_max_length: int = 512,
    show_progress: bool = True,
):
    """Train a tokenizer of `kind` on `texts`, save it to `output_dir`, and return it.

    The vocabulary is rounded up to a multiple of 64 (fast matmuls); when the corpus
    yields fewer tokens, reserved `[unusedN]` tokens fill the rest.
    """
    if kind not in KINDS:
        raise InvalidArgument(f"unknown tokenizer kind {kind!r} (--kind): use one of "
                              f"{list(KINDS)}")
    vocab_size = checks.count("vocab_size", vocab_size, 64, MAX_VOCAB_SIZE)
    model_max_length = checks.count("max_length", model_max_length, 1, MAX_MODEL_LENGTH)
    target = int(math.ceil(vocab_size / 64) * 64)
    tok, trainer, specials = _build(kind, target, lowercase)
    trainer.show_progress = show_progress
    count = 0

    def counted():
        nonlocal count
        for text in texts:
            if text and text.strip():
                count += 1
                yield text

    tok.train_from_iterator(counted(), trainer=trainer)
    if count == 0:
        raise MlmkitError("the corpus has no text to train a tokenizer on: it is empty")
    tok.post_processor = _post_processor(tok, specials, kind)
    if kind != "wordpiece":  # "a <mask>" keeps its space in the previous token, as RoBERTa's
        mask = AddedToken("<mask>", lstrip=True, normalized=False, special=True)
        tok.add_special_tokens([mask])  # the trainer added it without lstrip: update it
        specials = dict(specials, mask_token=mask)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=model_max_length, **specials
    )
    missing = target - len(fast)
    if missing > 0:
        fast.add_special_tokens({"additional_special_tokens": [f"[unused{i}]" for i in range(missing)]})
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    save_tokenizer(fast, output_dir)
    return AutoTokenizer.from_pretrained(str(output_dir))
