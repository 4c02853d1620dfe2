"""From a corpus name to training data: the tokenizer, packed train/validation blocks,
and the fixed validation sentences scored for pseudo-perplexity.

Documents are split into train and validation by the corpus when it has splits
(python-docs), else by a hash of each document's text (`validation_share`), so the split
does not depend on document order and never changes between runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from transformers import AutoTokenizer

from mlmkit.core.cache import cache_dir
from mlmkit.core.run_layout import shared_tokenizer_dir
from mlmkit.core.staging import remove_leftovers, staging_dir
from mlmkit.corpus import read_corpus
from mlmkit.corpus.mixture import MixedBlocks, MixedShards, mixture_weights, parse_corpus_spec
from mlmkit.corpus.packing import BlockBatch, PackedBlocks
from mlmkit.corpus.python_docs import python_docs
from mlmkit.corpus.shards import TokenShards, documents_fingerprint, tokenize_corpus
from mlmkit.errors import InvalidArgument, InvalidData, MlmkitError, PathError
from mlmkit.models.load import TOKENIZER_FILES, complete_special_tokens
from mlmkit.models.preset_table import preset_positions
from mlmkit.pretraining.examples import FillExample, pick_examples
from mlmkit.protein.alphabet import (
    MAX_NUCLEOTIDE_SHARE,
    NUCLEOTIDE_LETTERS,
    RESIDUES,
    STANDARD,
    protein_tokenizer,
)
from mlmkit.tokenizer import train_tokenizer
from mlmkit.training.objective import Prepared

TOKENIZER_FORMAT = 2  # 2: model_max_length is the model's positions, not --seq-len
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass
class PretrainData:
    """What the loop reads: packed blocks of both splits and PPPL sentences (token ids)."""

    train: PackedBlocks
    validation: PackedBlocks | None
    sentences: list[list[int]]
    train_shards: TokenShards
    validation_shards: TokenShards | None
    examples: list[FillExample] = field(default_factory=list)  # closing fill-mask examples
    unknown: tuple[int, int] = (0, 0)  # <unk> tokens among the training tokens counted
    validation_share: float | None = None  # of documents held out (None: not said)

    def describe(self) -> str:
        val = self.validation_shards
        mixture = getattr(self.train, "weights", None)  # a weighted --corpus
        mixed = ("" if mixture is None else " (mixture: " + ", ".join(
            f"{name} {weight:.3g} of {size:,} blocks" for name, weight, size in zip(
                self.train.names, mixture, self.train.sizes, strict=True)) + ")")
        unknown, counted = self.unknown
        unknown_text = (f" ({unknown:,} <unk>, {unknown / counted:.2%} of "
                        f"{'the first ' if counted < self.train_shards.n_tokens else ''}"
                        f"{counted:,})" if unknown else "")
        cropped = getattr(self.train, "cropped", 0)
        cropped_text = (f" ({cropped:,} documents longer than a block: a random window of "
                        "each, drawn again at each reading)" if cropped else "")
        return (f"{self.train_shards.n_documents:,} documents, {self.train_shards.n_tokens:,} "
                f"tokens{unknown_text} → {len(self.train):,} blocks{cropped_text}{mixed}"
                + (f"; validation {val.n_tokens:,} tokens → {len(self.validation):,} blocks"
                   if val is not None else self._no_validation()))

    def _no_validation(self) -> str:
        """Why the run is not evaluated: held-out documents were not asked for, or none of
        a small corpus's documents fell in the share held out."""
        if self.validation_share == 0:
            return "; no validation split (--validation-share 0): the run is not evaluated"
        if self.validation_share is None:
            return "; no validation split: the run is not evaluated"
        return (f"; no validation split: none of the {self.train_shards.n_documents:,} "
                f"documents fell in the {self.validation_share:.0%} held out (a larger corpus "
                "or --validation-share holds some out): the run is not evaluated")


def _is_validation(text: str, share: float) -> bool:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def corpus_documents(corpus: str, split: str, field: str = "text",
                     validation_share: float = 0.05) -> Callable[[], Iterable[str]]:
    """A re-iterable source (a function returning an iterator) of one split's documents."""
    if corpus == "python-docs":
        return lambda: iter(python_docs(split))
    # ---- several sources: read one after the other; weights only mix blocks
    sources = [part.source for part in parse_corpus_spec(corpus)]
    if sources == ["python-docs"]:
        return corpus_documents("python-docs", split, field, validation_share)
    read_corpus(sources, field=field)  # a missing file or glob fails now, not in the pass

    def documents():
        for source in sources:
            if source == "python-docs":  # it has its own splits: never a hashed share of train
                yield from corpus_documents(source, split)()
                continue
            for text in read_corpus(source, field=field):
                if (split == "validation") == _is_validation(text, validation_share):
                    yield text

    return documents


def resolve_tokenizer(config, show_progress: bool = True):
    """The run's tokenizer: --init's, --tokenizer, or one trained on the corpus (cached)."""
    source = config.init or config.tokenizer
    if source is None and config.tokenizer_kind == "protein" and \
            config.corpus == "python-docs":  # checked here: `recipe show esm2` has no corpus
        raise InvalidArgument("--corpus: the amino-acid tokenizer (--tokenizer-kind protein, "
                              "as --recipe esm2 sets) reads proteins, and the default corpus, "
                              "python-docs, is English: pass --corpus proteins.fasta[.gz]")
    if config.init is not None and config.tokenizer is None:
        source = str(shared_tokenizer_dir(config.init) or source)  # a run's step-N/ folder
    if source is not None and config.init is None:
        path = Path(source).expanduser()
        if path.is_file():
            raise PathError(f"--tokenizer {source!r} is a file: pass the folder that holds "
                            "it (tokenizer.json with its config, as mlmkit tokenizer train or "
                            "save_pretrained writes it)")
        if not path.exists() and source.startswith((".", "/", "~")):
            raise PathError(f"--tokenizer {source!r} does not exist: pass a tokenizer folder "
                            "or a Hugging Face hub name")
        if path.is_dir() and not any((path / f).is_file() for f in TOKENIZER_FILES):
            raise PathError(f"--tokenizer {source!r} holds no tokenizer files "
                            f"({', '.join(TOKENIZER_FILES[:3])}, ...): pass the folder "
                            "mlmkit tokenizer train or save_pretrained wrote")
    if source is not None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
        except (OSError, ValueError) as error:
            flag = "--init" if config.init else "--tokenizer"
            raise MlmkitError(f"{flag} {source!r}: cannot load a tokenizer ({error})") from error
    else:
        tokenizer = _trained_tokenizer(config, show_progress)
    complete_special_tokens(tokenizer)
    missing = [name for name in ("cls_token", "sep_token", "mask_token", "pad_token")
               if getattr(tokenizer, name) is None]
    if missing:
        raise MlmkitError(f"the tokenizer {source or 'trained'!r} has no {', '.join(missing)}: "
                          "an MLM needs [CLS]/[SEP]/[MASK]/[PAD] equivalents")
    if not getattr(tokenizer, "is_fast", False):
        raise MlmkitError(f"the tokenizer {source!r} is not a fast tokenizer: word starts need "
                          "word_ids(); use a tokenizer with a tokenizer.json")
    return tokenizer


def _trained_tokenizer(config, show_progress: bool):
    if config.tokenizer_kind == "protein":  # a fixed alphabet: nothing to learn
        return protein_tokenizer()
    documents = corpus_documents(config.corpus, "train", config.field, config.validation_share)
    corpus_hash, count = documents_fingerprint(documents())
    if count == 0:
        raise MlmkitError(f"--corpus {config.corpus!r} has no training documents: it is empty")
    # the preset's positions (ESM-2's 1,024, else 512): the tokenizer declares them, so that
    # the saved pair agrees (a tokenizer is trained only for a preset; --init brings its own)
    positions = preset_positions(config.model)
    key = hashlib.blake2b(
        f"{corpus_hash}|{config.tokenizer_kind}|{config.vocab_size}|{config.seq_len}|"
        f"{positions}|{TOKENIZER_FORMAT}".encode(), digest_size=12).hexdigest()
    base = cache_dir("tokenizers")
    final = base / key
    if (final / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(final))
    remove_leftovers(base, legacy_age=86400)  # tokenizers of killed trainings
    staging = staging_dir(final)  # named by this process, umask permissions
    try:
        train_tokenizer(documents(), staging, kind=config.tokenizer_kind,
                        vocab_size=config.vocab_size,
                        model_max_length=positions,  # the model's, not --seq-len
                        show_progress=show_progress)
        try:
            os.replace(staging, final)
        except OSError:  # built concurrently by another run: keep theirs
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return AutoTokenizer.from_pretrained(str(final))


def validation_sentences(documents: Iterable[str], tokenizer, count: int, max_tokens: int,
                         seed: int) -> list[list[int]]:
    """`count` sentences (6 to `max_tokens` tokens) drawn by `seed` from the validation text.
    A corpus without sentences (proteins, DNA: each document one long word) gives the first
    `max_tokens` tokens of its documents instead."""
    if count <= 0:
        return []
    documents = list(documents)
    candidates = [s.strip() for d in documents for line in d.split("\n")
                  for s in _SENTENCE_END.split(line) if len(s.split()) >= 5]
    words = not candidates
    if words:
        candidates = [d.strip() for d in documents if d.strip() and len(d.split()) == 1]
    candidates = sorted(set(candidates))
    if not candidates:
        return []
    encoded = [e.ids for e in tokenizer.backend_tokenizer.encode_batch(
        candidates, add_special_tokens=False)]
    if words:
        encoded = [ids[:max_tokens] for ids in encoded]
    fitting = [ids for ids in encoded if 6 <= len(ids) <= max_tokens]
    if not fitting:
        return []
    order = np.random.default_rng(seed).permutation(len(fitting))[:count]
    return [fitting[i] for i in sorted(order)]


# A corpus this much <unk> is the wrong one for its tokenizer (English text read by the
# amino-acid alphabet, proteins by a DNA k-mer tokenizer): refused before training. Below
# it, the count is printed with the data line. Counted over the first tokens of a corpus.
MAX_UNKNOWN_SHARE = 0.1
UNKNOWN_COUNTED = 50_000_000


def unknown_tokens(shards, tokenizer, names: list[str]) -> tuple[int, int]:
    """(<unk> tokens, tokens counted) among the first `UNKNOWN_COUNTED` tokens of each
    source of `shards` (`names`: each source's --corpus); a source more than
    `MAX_UNKNOWN_SHARE` unknown is an error, and so, with the amino-acid alphabet, is one
    whose residues read as DNA or as text (`_check_residues`)."""
    unk = tokenizer.unk_token_id
    alphabet = _amino_acid_alphabet(tokenizer)
    unknown = counted = 0
    parts = shards.parts if isinstance(shards, MixedShards) else [shards]
    for part, source in zip(parts, names, strict=True):
        tokens = np.asarray(part.tokens[:min(part.n_tokens, UNKNOWN_COUNTED)])
        here = int(np.count_nonzero(tokens == unk)) if unk is not None else 0
        if tokens.size and here > MAX_UNKNOWN_SHARE * tokens.size:
            raise InvalidData(
                f"--corpus {source!r}: {here / tokens.size:.0%} of its tokens are "
                f"{tokenizer.unk_token} (letters or words the tokenizer does not know): pass "
                "the corpus this tokenizer reads, or a tokenizer made for it (the amino-acid "
                "alphabet reads proteins, a k-mer tokenizer DNA, a trained one its own text)")
        if alphabet is not None:
            _check_residues(tokens[:RESIDUES_COUNTED], alphabet, source)
        if unk is not None:
            unknown, counted = unknown + here, counted + tokens.size
    return unknown, counted


# Letters the amino-acid alphabet reads that say a corpus is not proteins: DNA
# (NUCLEOTIDE_LETTERS), or English text, about 12% O, U, B and Z, which proteins all but
# never hold (pyrrolysine, selenocysteine, two ambiguity codes).
TEXT_LETTERS, MAX_TEXT_LETTER_SHARE = "OUBZ", 0.03
RESIDUES_COUNTED = 1_000_000


def _amino_acid_alphabet(tokenizer) -> dict[str, int] | None:
    """The ids of the residue letters, where the tokenizer is the amino-acid alphabet."""
    vocab = tokenizer.get_vocab()
    if len(vocab) > 64 or not set(STANDARD) <= set(vocab):
        return None
    return {letter: vocab[letter] for letter in RESIDUES if letter in vocab}


def _check_residues(tokens: np.ndarray, alphabet: dict[str, int], source: str) -> None:
    """Refuse a source whose residues read as DNA or as text: the letters are residues
    too, so neither shows as <unk>."""
    residues = tokens[np.isin(tokens, list(alphabet.values()))]
    if residues.size == 0:
        return

    def share(letters: str) -> float:
        return float(np.isin(residues, [alphabet[c] for c in letters if c in alphabet]).mean())

    nucleotides, text = share(NUCLEOTIDE_LETTERS), share(TEXT_LETTERS)
    if nucleotides >= MAX_NUCLEOTIDE_SHARE:
        raise InvalidData(
            f"--corpus {source!r} reads as DNA, not proteins ({nucleotides:.0%} of its "
            "residues are A, C, G, T or N): pass a DNA tokenizer (mlmkit tokenizer dna "
            "-o DIR; --tokenizer DIR), or a protein corpus")
    if text > MAX_TEXT_LETTER_SHARE:
        raise InvalidData(
            f"--corpus {source!r} reads as text, not proteins ({text:.0%} of its "
            "letters are O, U, B or Z, which proteins all but never hold): pass a protein "
            "corpus (FASTA), or a tokenizer made for the text")


def build_data(config, tokenizer, show_progress: bool = True) -> PretrainData:
    """Tokenize (or reuse cached shards of) both splits and pack them into blocks."""
    settings = {"format": "shards-v1"}
    pack = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
                pad_id=tokenizer.pad_token_id, packing=config.packing)
    train_shards, train = _mixture_train(config, tokenizer, settings, pack, show_progress)
    if train is None:
        train_docs = corpus_documents(config.corpus, "train", config.field,
                                      config.validation_share)
        train_shards = tokenize_corpus(train_docs, tokenizer, name=f"{config.corpus} (train)",
                                       settings=settings, show_progress=show_progress)
        train = PackedBlocks(train_shards, config.seq_len, **pack)
    names = ([part.source for part in parse_corpus_spec(config.corpus)]
             if isinstance(train_shards, MixedShards) else [str(config.corpus)])
    unknown = unknown_tokens(train_shards, tokenizer, names)
    val_docs = corpus_documents(config.corpus, "validation", config.field,
                                config.validation_share)
    validation = val_shards = None
    sentences: list[list[int]] = []
    if config.corpus == "python-docs" or config.validation_share > 0:
        try:
            val_shards = tokenize_corpus(val_docs, tokenizer,
                                         name=f"{config.corpus} (validation)",
                                         settings=settings, show_progress=show_progress)
        except MlmkitError:  # an empty validation split: train without evaluation
            val_shards = None
    if val_shards is not None:
        validation = PackedBlocks(val_shards, config.seq_len, **pack)
        sentences = validation_sentences(val_docs(), tokenizer, config.pppl_sentences,
                                         min(config.seq_len - 2, 64), config.seed)
    examples = (pick_examples(val_docs(), tokenizer, config.fill_mask_examples, config.seed)
                if val_shards is not None else [])
    return PretrainData(train=train, validation=validation, sentences=sentences,
                        train_shards=train_shards, validation_shards=val_shards,
                        examples=examples, unknown=unknown,
                        validation_share=config.validation_share)


# ---- weighted corpus mixtures: --corpus a.txt:0.7 --corpus b.txt:0.3


def _mixture_train(config, tokenizer, settings: dict, pack: dict, show_progress: bool):
    """With weights on `--corpus`: every source tokenized into its own (cached) shards and
    packed, mixed by `MixedBlocks`; (None, None) without weights."""
    parts = parse_corpus_spec(config.corpus)
    weights = mixture_weights(parts)
    if weights is None:
        return None, None
    if getattr(config, "phases", None) is not None:
        raise InvalidArgument(f"--corpus {config.corpus!r}: with phases, give the weights in "
                              "each phase's mixture ({a.txt: 0.7, b.txt: 0.3}), not on --corpus")
    shards, blocks = [], []
    for part in parts:
        documents = corpus_documents(part.source, "train", config.field,
                                     config.validation_share)
        one = tokenize_corpus(documents, tokenizer, name=f"{part.source} (train)",
                              settings=settings, show_progress=show_progress)
        shards.append(one)
        blocks.append(PackedBlocks(one, config.seq_len, **pack))
    names = [part.source for part in parts]
    return MixedShards(shards, weights), MixedBlocks(blocks, weights, names)


def eval_blocks(data: PretrainData, count: int, batch_size: int) -> list:
    """The first `count` validation blocks, in batches (the same blocks every evaluation)."""
    if data.validation is None or count <= 0:
        return []
    n = min(count, len(data.validation))
    return [data.validation[np.arange(start, min(start + batch_size, n))]
            for start in range(0, n, batch_size)]


# ---- each rank's share of a step

_MASK64 = (1 << 64) - 1


def row_seed(seed: int, row: int) -> int:
    """The masking seed of global row `row` of every step (a splitmix64 mix of (seed, row)):
    with the step, it is all a row's corruption depends on."""
    value = ((int(seed) & _MASK64) * 0x9E3779B97F4A7C15 + int(row) + 1) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (value ^ (value >> 31)) & ((1 << 63) - 1)


def crop_draws(seed: int, step: int, rows: np.ndarray) -> np.ndarray:
    """The window draw of each global row of step `step` (`PackedBlocks.gather`): like a
    row's masks, a function of (seed, step, row) alone."""
    step_seed = row_seed(seed, step)
    return np.array([row_seed(step_seed, int(row)) for row in rows], dtype=np.int64)


def rank_rows(batch_size: int, rank: int, world_size: int) -> np.ndarray:
    """The global rows (positions in the step's batch) rank `rank` trains on: rank, rank + W, ..."""
    return np.arange(rank, batch_size, world_size)


def prepare_rows(objective, blocks: PackedBlocks, indices: np.ndarray, rows: np.ndarray,
                 step: int, seed: int, stream: str = "row", device=None):
    """Read, mask and collate only `rows` of the step's global batch (`indices`: the block
    of each global row). Each row is corrupted from (seed, step, global row) alone, so
    the masks do not depend on how many processes share the step. Returns a `Prepared`
    whose counts are this rank's (sum them over ranks for the step's totals).

    The "row" stream masks row by row on the host, a generator seeded per row; the
    "counter" stream masks all the rows at once, on `device` (the model's) when given.
    A long document's window (`--packing crop`) is drawn from (seed, step, global row)
    too (`crop_draws`)."""
    batch = blocks.gather(indices[rows], crop_draws(seed, step, rows))
    if stream == "counter":
        if device is not None:
            batch = batch.to(device)
        global_rows = torch.as_tensor(rows, dtype=torch.long, device=batch.input_ids.device)
        return objective.prepare(batch, step, seed=seed, rows=global_rows), batch.n_tokens
    parts = []
    for i, row in enumerate(rows):
        one = BlockBatch(*(t[i:i + 1] for t in (batch.input_ids, batch.attention_mask,
                                                batch.word_starts, batch.document_ids)))
        parts.append(objective.prepare(one, step, seed=row_seed(seed, int(row))))
    tensors = {key: torch.cat([p.tensors[key] for p in parts]) for key in parts[0].tensors}
    counts = {key: float(sum(p.counts[key] for p in parts)) for key in parts[0].counts}
    return Prepared(tensors=tensors, counts=counts), batch.n_tokens


def global_counts(runtime, counts: dict[str, float], tokens: int) -> tuple[dict, int]:
    """The step's totals: this rank's counts and tokens summed over every rank (one
    all-reduce, float64: exact for counts)."""
    if runtime.world_size <= 1:
        return counts, tokens
    keys = sorted(counts)
    device = runtime.device if dist.get_backend() == "nccl" else torch.device("cpu")
    values = torch.tensor([counts[k] for k in keys] + [float(tokens)], dtype=torch.float64,
                          device=device)
    dist.all_reduce(values)
    values = values.tolist()
    return dict(zip(keys, values[:-1], strict=True)), int(values[-1])
