"""Benchmark: mlmkit's corpus tokenization against `datasets.map(batched=True, num_proc=N)`.

The same text (python-docs train, repeated `--copies` times, each copy a distinct corpus
by a suffix), the same fast WordPiece tokenizer, the same N worker processes. mlmkit:
`tokenize_corpus` (one pass, pieces tokenized by N processes, token ids and word starts
written to memory-mapped shards). datasets: `Dataset.from_dict` then `.map(batched=True,
num_proc=N)` returning input ids and word ids (what mlmkit keeps), written to its Arrow
cache. Each side runs in a fresh process (its peak memory: the largest resident set of
that process and of its workers). The sides alternate, `--repeats` times each, in one
run; per side the median wall-clock seconds and the median CPU seconds (the process and its
reaped workers, from `getrusage`: on a shared machine the fairer figure), documents/s, the
ratios, and the machine's load before and after. Tokens are counted after the clock stops
(datasets would otherwise pay to read its column back). (Not named tokenize.py: a script's
folder comes first on sys.path, and that name would hide the standard library's `tokenize`
module.)

    .venv/bin/python benchmarks/tokenization.py [--workers 2] [--copies 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _documents(copies: int) -> list[str]:
    from mlmkit.corpus.python_docs import python_docs

    docs = python_docs("train")
    return [f"{d} ({c})" if c else d for c in range(copies) for d in docs]


def _tokenizer():
    from transformers import AutoTokenizer

    from mlmkit.core.cache import cache_dir
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.tokenizer import train_tokenizer

    path = cache_dir("benchmarks", "tokenize-wordpiece-8192")
    if not (path / "tokenizer.json").exists():
        train_tokenizer(python_docs("train"), path, kind="wordpiece", vocab_size=8192,
                        show_progress=False)
    return AutoTokenizer.from_pretrained(str(path))


def _hf_tokenize(batch, tokenizer=None):
    encoded = tokenizer(batch["text"], add_special_tokens=False)
    return {"input_ids": encoded["input_ids"],
            "word_ids": [encoded.word_ids(i) for i in range(len(batch["text"]))]}


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one(side: str, workers: int, copies: int) -> dict:
    """Tokenize with one side, in this process; seconds and tokens."""
    docs = _documents(copies)
    tokenizer = _tokenizer()
    out = tempfile.mkdtemp(prefix="mlmkit-tokbench-")
    cpu = _cpu()
    started = time.perf_counter()
    if side == "mlmkit":
        from mlmkit.corpus.shards import tokenize_corpus

        shards = tokenize_corpus(lambda: iter(docs), tokenizer, root=out, workers=workers,
                                 show_progress=False)
        seconds, cpu = time.perf_counter() - started, _cpu() - cpu
        tokens = shards.n_tokens
    else:
        from functools import partial

        import datasets

        datasets.disable_progress_bars()
        dataset = datasets.Dataset.from_dict({"text": docs})
        mapped = dataset.map(partial(_hf_tokenize, tokenizer=tokenizer), batched=True,
                             num_proc=workers, remove_columns=["text"],
                             cache_file_name=os.path.join(out, "tokens.arrow"))
        seconds, cpu = time.perf_counter() - started, _cpu() - cpu
        tokens = sum(len(ids) for ids in mapped["input_ids"])
    shutil.rmtree(out, ignore_errors=True)
    peak_kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return {"side": side, "seconds": seconds, "cpu_seconds": cpu, "documents": len(docs),
            "tokens": tokens, "peak_mb": peak_kb / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", choices=("mlmkit", "datasets"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.workers, args.copies)))
        return
    _tokenizer()  # trained once, outside the timing
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")  # the processes are the parallelism
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {"datasets": [], "mlmkit": []}
    for repeat in range(args.repeats):  # interleaved: d m, m d, d m, ...
        for side in ("datasets", "mlmkit")[::1 if repeat % 2 == 0 else -1]:
            done = subprocess.run([sys.executable, __file__, "--one", side, "--workers",
                                   str(args.workers), "--copies", str(args.copies)],
                                  capture_output=True, text=True, env=env, check=True)
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    results = {side: {"side": side, "documents": r[0]["documents"], "tokens": r[0]["tokens"],
                      "seconds": statistics.median(x["seconds"] for x in r),
                      "cpu_seconds": statistics.median(x["cpu_seconds"] for x in r),
                      "peak_mb": max(x["peak_mb"] for x in r),
                      "all_seconds": [round(x["seconds"], 2) for x in r]}
               for side, r in runs.items()}
    m, d = results["mlmkit"], results["datasets"]
    print(f"{m['documents']:,} documents, {m['tokens']:,} tokens, {args.workers} worker "
          f"process(es), {os.cpu_count()} CPU(s), {args.repeats} interleaved runs per side, "
          f"load {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    for r in (d, m):
        print(f"{r['side']:<9} {r['seconds']:7.2f} s (median of {r['all_seconds']})  "
              f"{r['documents'] / r['seconds']:9,.0f} docs/s  CPU {r['cpu_seconds']:6.2f} s  "
              f"peak {r['peak_mb']:7.0f} MB")
    print(f"mlmkit / datasets: {d['seconds'] / m['seconds']:.2f}× the speed in wall-clock time "
          f"(floor 1.5×), {d['cpu_seconds'] / m['cpu_seconds']:.2f}× in CPU seconds, "
          f"{m['peak_mb'] / d['peak_mb']:.2f}× the peak memory")
    assert all(x["tokens"] == d["tokens"] for r in runs.values() for x in r), \
        "the two sides tokenized differently"


if __name__ == "__main__":
    main()
