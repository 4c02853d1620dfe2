"""Plain MLM vs RetroMAE pretraining at equal compute, each followed by the same contrastive
fine-tuning, evaluated on STS-B validation and on a retrieval set built from AG News.

What is held equal between the two objectives, seed by seed: the model preset, the tokenizer
(one, trained once on the pretraining corpus), the corpus and its order, the steps, the batch
and the sequence length (so both see the same tokens), the learning-rate schedule and the
encoder's masking (the run's default, 30% whole words). RetroMAE adds its one-layer decoder
(its own 50% masking of a second copy, rebuilt from the [CLS] vector); that decoder is
dropped at the end, so both give an encoder of the same shape. The decoder's extra compute
per step is reported (CPU seconds of each run), not hidden. A third arm, `random`, gets the
same fine-tuning from each seed's untrained initialisation (`mlmkit model init`): what
pretraining adds at all at this scale.

Data (built by the script under OUT/data from ../shared/data; nothing is downloaded):

- pretraining corpus: the first 8,000 AG News texts and the unique STS-B *train* sentences,
  one document each (STS-B validation and the last 2,001 AG News rows are never seen);
- fine-tuning: STS-B train pairs with a score >= 4 as (anchor, positive) pairs, MNRL loss
  with in-batch negatives, CLS pooling (RetroMAE trains the [CLS] vector; the same pooling
  for both), 1 epoch;
- STS: STS-B validation (1,500 pairs), Spearman of cosine similarity (`eval suite`'s sts);
- retrieval (BEIR layout, `eval suite --retrieval`): from the AG News rows after the first
  8,000 that have at least two sentences (each part at least 4 words), the query is a
  text's first sentence and its one relevant document is the rest of that text; the corpus
  is all those rests (460 of each). NDCG@10, MRR@10, Recall@100.

Each step is skipped when its output exists (a stopped study continues). Runs go one at a
time (`nice` it on a shared machine); `--no-pretrain --seeds N` fine-tunes and evaluates
the seeds already pretrained, beside a running study. Reported: per arm the mean and sd over seeds,
and the differences (RetroMAE − MLM, each − random) with a 95% interval (Welch t over seeds: the variation
from one pretraining + fine-tuning to the next), plus, per seed, the paired bootstrap
interval over the STS pairs and the queries (`mlmkit eval compare`: the sampling error of
the evaluation sets only).

    nice python benchmarks/retromae_study.py --out runs/retromae-study            # the docs' run
    python benchmarks/retromae_study.py --out /tmp/rs --steps 10 --seeds 0 --pairs-limit 64
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean, stdev

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OBJECTIVES = ("mlm", "retromae")
BASELINE = "random"  # the same fine-tuning from the untrained initialisation of each seed
ARMS = (BASELINE, *OBJECTIVES)
CONTRASTS = (("retromae", "mlm"), ("mlm", BASELINE), ("retromae", BASELINE))
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
METRICS = ("sts_spearman", "ndcg@10", "mrr@10", "recall@100")


def read_tsv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def write_jsonl(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def retrieval_pair(text: str) -> tuple[str, str] | None:
    """(first sentence, the rest) of an AG News text, or None when either is under 4 words."""
    parts = SENTENCE_END.split(text.strip(), maxsplit=1)
    if len(parts) != 2:
        return None
    query, rest = parts[0].strip(), parts[1].strip()
    return (query, rest) if len(query.split()) >= 4 and len(rest.split()) >= 4 else None


def build_data(data: Path, out: Path, pretrain_rows: int, pairs_limit: int | None) -> dict:
    """Write the corpus, the MNRL pairs and the BEIR folder under `out`; their sizes."""
    out.mkdir(parents=True, exist_ok=True)
    news = [r["text"] for r in read_tsv(data / "agnews" / "train.tsv")]
    sts_train = read_tsv(data / "stsb" / "train.tsv")
    sentences = list(dict.fromkeys(s for r in sts_train for s in (r["sentence1"], r["sentence2"])))
    corpus = news[:pretrain_rows] + sentences
    random.Random(0).shuffle(corpus)
    write_jsonl(out / "corpus.jsonl", ({"text": t} for t in corpus))
    pairs = [{"anchor": r["sentence1"], "positive": r["sentence2"]} for r in sts_train
             if float(r["score"]) >= 4.0][:pairs_limit]
    write_jsonl(out / "pairs.jsonl", pairs)
    beir = out / "agnews-retrieval"
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    split = [(i, p) for i, text in enumerate(news[pretrain_rows:], start=pretrain_rows)
             if (p := retrieval_pair(text)) is not None]
    write_jsonl(beir / "queries.jsonl", ({"_id": f"q{i}", "text": q} for i, (q, _) in split))
    write_jsonl(beir / "corpus.jsonl", ({"_id": f"d{i}", "title": "", "text": d}
                                        for i, (_, d) in split))
    with open(beir / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"q{i}\td{i}\t1\n" for i, _ in split)
    return {"corpus_documents": len(corpus), "pairs": len(pairs), "queries": len(split)}


def run(args: list[str], log: Path, timings: dict, name: str) -> None:
    """One `mlmkit` step in a subprocess (its output to `log`), timed in wall and CPU seconds."""
    command = [sys.executable, "-m", "mlmkit", *args]
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(args)}", flush=True)
    before, started = os.times(), time.perf_counter()
    with open(log, "a", encoding="utf-8") as err:
        code = subprocess.call(command, stdout=err, stderr=err)
    after = os.times()
    wall = time.perf_counter() - started
    cpu = (after.children_user - before.children_user) + (after.children_system -
                                                           before.children_system)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    timings[name] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load1_at_end": load}
    print(f"    {wall:.0f} s wall, {cpu:.0f} s CPU, load {load}", flush=True)
    if code != 0:
        sys.exit(f"{name} failed (exit {code}); see {log}")


def t_quantile_975(df: float) -> float:
    """The 97.5% quantile of Student's t (for a 95% two-sided interval)."""
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def welch_interval(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """mean(b) − mean(a) and its 95% Welch t interval (seeds as the unit of replication)."""
    diff = mean(b) - mean(a)
    va, vb = stdev(a) ** 2 / len(a), stdev(b) ** 2 / len(b)
    se = (va + vb) ** 0.5
    if se == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = t_quantile_975(df) * se
    return diff, diff - half, diff + half


def results_table(results: dict[str, dict[int, dict]]) -> str:
    """Markdown: per arm mean ± sd over seeds, then each contrast (b − a) with its 95%
    Welch interval over seeds."""
    arms = [a for a in ARMS if results.get(a)]
    lines = ["| arm | seeds | " + " | ".join(METRICS) + " |",
             "|---|---:|" + "---:|" * len(METRICS)]
    for arm in arms:
        runs = list(results[arm].values())
        cells = []
        for m in METRICS:
            values = [r[m] for r in runs]
            sd = stdev(values) if len(values) > 1 else float("nan")
            cells.append(f"{mean(values):.4f} ± {sd:.4f}")
        lines.append(f"| {arm} | {len(runs)} | " + " | ".join(cells) + " |")
    for b_arm, a_arm in CONTRASTS:
        if a_arm not in arms or b_arm not in arms:
            continue
        cells = []
        for m in METRICS:
            a = [r[m] for r in results[a_arm].values()]
            b = [r[m] for r in results[b_arm].values()]
            if len(a) > 1 and len(b) > 1:
                diff, low, high = welch_interval(a, b)
                cells.append(f"{diff:+.4f} [{low:+.4f}, {high:+.4f}]")
            else:
                cells.append(f"{mean(b) - mean(a):+.4f}")
        lines.append(f"| {b_arm} − {a_arm} (95% CI) | | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def pretraining_table(out: Path, seeds: list[int]) -> str:
    """Markdown: per pretraining run, its tokens, wall seconds and the encoder's held-out MLM
    loss and accuracy at the end (fixed masks: the same for both objectives)."""
    lines = ["| run | tokens | train wall s | validation MLM loss | accuracy | top-5 |",
             "|---|---:|---:|---:|---:|---:|"]
    for seed in seeds:
        for objective in OBJECTIVES:
            path = out / f"{objective}-{seed}" / "summary.json"
            if not path.is_file():
                continue
            summary = json.loads(path.read_text())
            ev = summary["eval"]
            lines.append(f"| {objective}-{seed} | {summary['tokens']:,} | "
                         f"{summary['train_seconds']:.0f} | {ev['loss']:.3f} | "
                         f"{ev['accuracy']:.3f} | {ev['top5_accuracy']:.3f} |")
    return "\n".join(lines) + "\n"


def paired_table(out: Path, seeds: list[int]) -> str:
    """Markdown: per seed, RetroMAE − MLM on the same STS pairs and queries, with the paired
    bootstrap 95% interval of `mlmkit eval compare` (the items' sampling error only)."""
    from mlmkit.evaluation import compare_suites, load_suite

    names = {"sts_spearman": "sts_spearman", **{f"retrieval_{m}": m for m in METRICS[1:]}}
    lines = ["| seed | " + " | ".join(names.values()) + " |", "|---:|" + "---:|" * len(names)]
    for seed in seeds:
        suites = [load_suite(out / f"{o}-{seed}" / "suite") for o in OBJECTIVES]
        rows = {r.metric: r for r in compare_suites(suites, n_boot=2000, seed=seed).rows}
        cells = []
        for metric in names:
            d = rows[metric].differences[0]
            cells.append(f"{d['diff']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]")
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/retromae-study")
    parser.add_argument("--model", default="modernbert-tiny")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--decoder-rate", type=float, default=0.5)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--pretrain-rows", type=int, default=8000)
    parser.add_argument("--pairs-limit", type=int, default=None)
    parser.add_argument("--objectives", default=",".join(OBJECTIVES))
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the arm fine-tuned from the untrained initialisation")
    parser.add_argument("--no-pretrain", action="store_true",
                        help="only fine-tune and evaluate the seeds whose pretraining is done")
    args = parser.parse_args()

    out = Path(args.out)
    data = out / "data"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    timings_path = out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.is_file() else {}
    common = ["--threads", str(args.threads)]
    seeds = [int(s) for s in args.seeds.split(",")]
    objectives = [o.strip() for o in args.objectives.split(",")]
    beir = data / "agnews-retrieval"

    def save():
        timings_path.write_text(json.dumps(timings, indent=1) + "\n")

    if not (beir / "qrels" / "test.tsv").is_file():
        sizes = build_data(Path(args.data), data, args.pretrain_rows, args.pairs_limit)
        (data / "sizes.json").write_text(json.dumps(sizes, indent=1) + "\n")
    tokenizer = out / "tokenizer"
    if not (tokenizer / "tokenizer.json").is_file():
        run(["tokenizer", "train", str(data / "corpus.jsonl"), "-o", str(tokenizer),
             "--vocab-size", "8192"], log, timings, "tokenizer")
    save()
    for seed in seeds:
        for objective in objectives:
            run_dir = out / f"{objective}-{seed}"
            if not args.no_pretrain and not (run_dir / "final" / "config.json").is_file():
                if (run_dir / "config.yaml").is_file():
                    cmd = ["pretrain", "--resume", "--run-dir", str(run_dir)]
                else:
                    cmd = ["pretrain", "--objective", objective, "--model", args.model,
                           "--tokenizer", str(tokenizer), "--corpus", str(data / "corpus.jsonl"),
                           "--packing", "document", "--steps", str(args.steps),
                           "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len),
                           "--seed", str(seed), "--save-every", "200", "--eval-every", "0",
                           "--run-dir", str(run_dir), "--no-progress", *common]
                    if objective == "retromae":
                        cmd += ["--decoder-masking-rate", str(args.decoder_rate)]
                run(cmd, log, timings, f"pretrain {objective}-{seed}")
                save()
    arms = objectives if args.no_baseline else [BASELINE, *objectives]
    results: dict[str, dict[int, dict]] = {a: {} for a in arms}
    for seed in seeds:
        for objective in arms:
            run_dir = out / f"{objective}-{seed}"
            if objective == BASELINE and not (run_dir / "final" / "config.json").is_file():
                run(["model", "init", args.model, "--tokenizer", str(tokenizer), "--seed",
                     str(seed), "-o", str(run_dir / "final")], log, timings, f"init {seed}")
            if not (run_dir / "final" / "config.json").is_file():
                continue  # --no-pretrain: this seed's pretraining is not done yet
            encoder = run_dir / "embed" / "best"
            if not (encoder / "modules.json").is_file():
                run(["embed", "train", str(run_dir / "final"), str(data / "pairs.jsonl"),
                     "--loss", "mnrl", "--text-field", "anchor,positive", "--pooling", "cls",
                     "--epochs", "1", "--batch-size", "32", "--lr", "1e-4", "--seed",
                     str(seed), "--run-dir", str(run_dir / "embed"), *common],
                    log, timings, f"embed train {objective}-{seed}")
                save()
            suite = run_dir / "suite"
            if not (suite / "suite.json").is_file():
                run(["eval", "suite", str(encoder), "--parts", "sts,retrieval", "--data",
                     args.data, "--retrieval", str(beir), "--seed", str(seed), "--run-dir",
                     str(suite), *common], log, timings, f"suite {objective}-{seed}")
                save()
            metrics = json.loads((suite / "suite.json").read_text())["metrics"]
            results[objective][seed] = {m: metrics[m if m == "sts_spearman" else
                                                   f"retrieval_{m}"] for m in METRICS}
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    done = [s for s in seeds if all(s in results[o] for o in OBJECTIVES if o in results)]
    if set(OBJECTIVES) <= set(results) and done:
        table = (results_table(results) + "\n" + paired_table(out, done) + "\n"
                 + pretraining_table(out, done))
        (out / "results.md").write_text(table)
        print(table)
    total_cpu = sum(t["cpu_s"] for t in timings.values())
    print(f"total: {total_cpu:.0f} s CPU (timings.json)")


if __name__ == "__main__":
    main()
