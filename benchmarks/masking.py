"""Benchmark: mlmkit masking policies against Hugging Face `DataCollatorForLanguageModeling`.

One 64×512 batch of python-docs tokens (a WordPiece tokenizer trained on the corpus). For
every units × weights combination, mlmkit's policy masks the batch (word starts given, as
the packer supplies them); beside it HF's collator masks the same tokens with
`whole_word_mask` off and on (it takes the offsets and special-tokens mask, as its docs
advise). Only the masking is timed (`torch_mask_tokens`), not padding. Prints rows/s, the
ratio to HF (token units vs HF random, word-based units vs HF whole-word) and each policy's
cost relative to mlmkit's plain random masking. Times are the best of interleaved rounds,
in process CPU time with one thread (waiting for a core on a busy machine is not counted).

    .venv/bin/python benchmarks/masking.py [--rows 64] [--length 512] [--repeats 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from mlmkit.core.cache import cache_dir
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


def best_times(candidates: dict, repeats: int) -> dict:
    """Best of `repeats` calls of each candidate, in interleaved rounds (every round calls
    every candidate once untimed, so that its tables are in cache as in a training loop,
    then once timed). Timed in this process's CPU time (one thread), so that waiting
    for a core on a shared machine does not count; all candidates are measured alike."""
    for fn in candidates.values():
        fn()  # warm-up: tables moved, word starts derived
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(repeats):
        for name, fn in candidates.items():
            fn()  # whatever ran before it (another candidate) left the caches cold
            start = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import DataCollatorForLanguageModeling

    tok, texts, ids, offsets, starts, docs, special = tokenizer_and_batch(args.rows, args.length,
                                                                    args.vocab)
    stats = compute_stats(texts, tok)
    rows = args.rows

    candidates = {}
    for whole in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            collator = DataCollatorForLanguageModeling(tok, whole_word_mask=whole, seed=0)
        collator.create_rng("pt")
        candidates["hf", whole] = lambda c=collator: c.torch_mask_tokens(
            ids.clone(), special_tokens_mask=special, offset_mapping=offsets)
    steps = iter(range(10**9))
    for units in UNITS:
        for weights in WEIGHTS:
            policy = build_policy({"units": units, "weights": weights}, tok, stats=stats)
            if weights == "loss":  # a table that is not flat, as after some training
                g = torch.Generator().manual_seed(0)
                policy.update_losses(torch.arange(len(tok)), torch.rand(len(tok), generator=g))
            candidates[units, weights] = lambda p=policy: p(
                ids, step=next(steps), word_starts=starts, document_ids=docs)
    bernoulli = build_policy({"count": "bernoulli"}, tok)
    candidates["bernoulli"] = lambda: bernoulli(ids, step=next(steps), document_ids=docs)
    derived = build_policy("whole_word", tok)
    candidates["derived"] = lambda: derived(ids, step=next(steps), document_ids=docs)
    speed = {name: rows / seconds for name, seconds in best_times(candidates,
                                                                  args.repeats).items()}
    hf = {whole: speed.pop(("hf", whole)) for whole in (False, True)}
    bernoulli_rate, derived_rate = speed.pop("bernoulli"), speed.pop("derived")
    results = speed

    random_rate = results["tokens", "uniform"]
    print(f"masking a {rows}×{args.length} batch, {args.threads} thread(s), vocab {len(tok)}; "
          f"rows/s (best of {args.repeats}); count: exact unless said")
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
    print(f"{'tokens':<11}{'uniform':<11}{bernoulli_rate:>10,.0f}{bernoulli_rate / hf[False]:>9.2f}×"
          f"{random_rate / bernoulli_rate:>10.2f}×  HF random (count: bernoulli, as HF)")
    print(f"{'whole_word':<11}{'(derived)':<11}{derived_rate:>10,.0f}{derived_rate / hf[True]:>9.2f}×"
          f"{random_rate / derived_rate:>10.2f}×  HF whole-word (word starts from the vocabulary)")
    print("\n'vs random' is how many times slower than mlmkit tokens/uniform (target ≤ 2×).")


if __name__ == "__main__":
    main()
