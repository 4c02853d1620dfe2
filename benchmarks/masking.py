"""Benchmark: mlmkit masking policies against Hugging Face `DataCollatorForLanguageModeling`.

One 64×512 batch of python-docs tokens (a WordPiece tokenizer trained on the corpus). For
every units × weights combination, mlmkit's policy masks the batch (word starts given, as
the packer supplies them); beside it HF's collator masks the same tokens with
`whole_word_mask` off and on (it takes the offsets and special-tokens mask, as its docs
advise). Only the masking is timed (`torch_mask_tokens`), not padding. Prints rows/s, the
ratio to HF (token units vs HF random, word-based units vs HF whole-word) and each policy's
cost relative to mlmkit's plain random masking.

    .venv/bin/python benchmarks/masking.py [--rows 64] [--length 512] [--repeats 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

from mlmkit.cache import cache_dir
from mlmkit.corpus.python_docs import python_docs
from mlmkit.masking import build_policy, compute_stats
from mlmkit.tokenizer import train_tokenizer

UNITS = ("tokens", "whole_word", "span", "pmi")
WEIGHTS = ("uniform", "frequency", "loss", "tfidf", "informask")


def tokenizer_and_batch(rows: int, length: int, vocab: int):
    from transformers import AutoTokenizer

    path = cache_dir("benchmarks", f"masking-wordpiece-{vocab}")
    if not (path / "tokenizer.json").exists():
        train_tokenizer(python_docs("train"), path, kind="wordpiece", vocab_size=vocab,
                        show_progress=False)
    tok = AutoTokenizer.from_pretrained(str(path))
    texts = python_docs("train")
    body = length - 1  # documents packed as in pretraining: [CLS] + stream of doc [SEP] ...
    need = rows * body
    ids, offsets, words, docs = [], [], [], []
    for number, text in enumerate(texts):
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        base = len(words) and max(words) + 1
        ids += enc["input_ids"] + [tok.sep_token_id]
        offsets += enc["offset_mapping"] + [(0, 0)]
        words += [base + w for w in enc.word_ids()] + [-1]
        docs += [number] * (len(enc["input_ids"]) + 1)
        if len(ids) >= need:
            break
    if len(ids) < need:
        raise SystemExit(f"python-docs has only {len(ids)} tokens, {need} needed")

    def rows_of(values, first):
        """[CLS]-headed rows of `body` stream tokens; `first` is what row position 0 holds."""
        values, first = torch.tensor(values[:need]), torch.tensor(first)
        chunks = values.view(rows, body, *values.shape[1:])
        return torch.cat([first.expand(rows, 1, *values.shape[1:]), chunks], 1)

    ids, offsets = rows_of(ids, tok.cls_token_id), rows_of(offsets, (0, 0))
    words, docs = rows_of(words, -1), rows_of(docs, -1)
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[:, 1:] = words[:, 1:] != words[:, :-1]
    special = torch.isin(ids, torch.tensor(tok.all_special_ids)).long()
    return tok, texts, ids, offsets, starts, docs, special


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import DataCollatorForLanguageModeling

    tok, texts, ids, offsets, starts, docs, special = tokenizer_and_batch(args.rows, args.length,
                                                                    args.vocab)
    stats = compute_stats(texts, tok)
    rows = args.rows

    hf = {}
    for whole in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            collator = DataCollatorForLanguageModeling(tok, whole_word_mask=whole, seed=0)
        collator.create_rng("pt")
        hf[whole] = rows / timed(lambda c=collator: c.torch_mask_tokens(
            ids.clone(), special_tokens_mask=special, offset_mapping=offsets), args.repeats)

    results = {}
    for units in UNITS:
        for weights in WEIGHTS:
            policy = build_policy({"units": units, "weights": weights}, tok, stats=stats)
            if weights == "loss":  # a table that is not flat, as after some training
                g = torch.Generator().manual_seed(0)
                policy.update_losses(torch.arange(len(tok)), torch.rand(len(tok), generator=g))
            step = iter(range(10**9))
            results[units, weights] = rows / timed(
                lambda p=policy, s=step: p(ids, step=next(s), word_starts=starts,
                                             document_ids=docs), args.repeats)
    derived = build_policy("whole_word", tok)
    derived_rate = rows / timed(lambda: derived(ids, document_ids=docs), args.repeats)

    random_rate = results["tokens", "uniform"]
    print(f"masking a {rows}×{args.length} batch, {args.threads} thread(s), vocab {len(tok)}; "
          "rows/s (median of %d)" % args.repeats)
    print(f"HF DataCollatorForLanguageModeling  whole_word_mask=False: {hf[False]:>10,.0f}")
    print(f"HF DataCollatorForLanguageModeling  whole_word_mask=True : {hf[True]:>10,.0f}")
    print()
    header = f"{'units':<11}{'weights':<11}{'rows/s':>10}{'vs HF':>10}{'vs random':>11}  baseline"
    print(header)
    print("-" * len(header))
    for (units, weights), rate in results.items():
        base = hf[units != "tokens"]
        name = "HF whole-word" if units != "tokens" else "HF random"
        print(f"{units:<11}{weights:<11}{rate:>10,.0f}{rate / base:>9.2f}×"
              f"{random_rate / rate:>10.2f}×  {name}")
    print(f"{'whole_word':<11}{'(derived)':<11}{derived_rate:>10,.0f}{derived_rate / hf[True]:>9.2f}×"
          f"{random_rate / derived_rate:>10.2f}×  HF whole-word (word starts from the vocabulary)")
    print("\n'vs random' is how many times slower than mlmkit tokens/uniform (target ≤ 2×).")


if __name__ == "__main__":
    main()
