"""The masking study (issue 15, item 5): five masking policies at EQUAL compute, each
pretrained on the built-in corpus (python-docs) and evaluated by the suite, then compared with
bootstrap intervals and paired tests (`mlmkit eval compare`).

Policies (everything else identical: model, tokenizer, seed, steps, batch, sequence length,
learning-rate schedule, so every run sees the same tokens and spends the same FLOPs):

    random15   --masking bert         15% of tokens, 80/10/10 (BERT)
    random40   --masking mask40       40% of tokens, all [MASK] (Wettig et al. 2023)
    sched30-15 --masking {rate: {schedule: linear, start: 0.3, end: 0.15}}   30% -> 15%
    pmi        --masking pmi          PMI spans (Levine et al. 2021), 15%, stats from `mask stats`
    wholeword  --masking whole_word   whole words, 15%

Steps: one tokenizer (`mlmkit tokenizer train python-docs`) and one statistics folder
(`mlmkit mask stats`) shared by all runs; `mlmkit pretrain` per policy; `mlmkit eval suite
--quick` per run (suite.json in the run directory); `mlmkit eval compare` over the five runs
(study.md / study.json). Every step is skipped when its output exists, so a stopped study
continues where it stopped (a pretraining run left half-way is resumed with --resume).

    nice python benchmarks/masking_study.py --out runs/masking-study        # docs/benchmarks.md's run
    (modernbert-tiny, 300 steps of 16 x 128 tokens each, 1 thread: 777 CPU seconds in all,
    49 minutes of wall time on the shared 2-core machine at a load average of 10 to 20)
    python benchmarks/masking_study.py --out /tmp/ms --steps 20 --parts blimp,cloze   # a look

The same by hand, for one policy:

    mlmkit tokenizer train python-docs -o study/tokenizer
    mlmkit mask stats python-docs study/tokenizer -o study/mask-stats
    mlmkit pretrain --model modernbert-tiny --tokenizer study/tokenizer --masking pmi \\
        --masking-stats study/mask-stats --steps 300 --run-dir study/pmi
    mlmkit eval suite study/pmi/final --data ../shared/data --quick --run-dir study/pmi
    mlmkit eval compare study/random15 study/random40 study/sched30-15 study/pmi \\
        study/wholeword -o study/study.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

POLICIES = {
    "random15": ["--masking", "bert"],
    "random40": ["--masking", "mask40"],
    "sched30-15": ["--masking", "{rate: {schedule: linear, start: 0.3, end: 0.15}}"],
    "pmi": ["--masking", "pmi", "--masking-stats", "{stats}"],
    "wholeword": ["--masking", "whole_word"],
}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def run(args: list[str], log: Path, timings: dict, name: str) -> None:
    """One `mlmkit` step in a subprocess (stderr to `log`), timed in wall and CPU seconds."""
    command = [sys.executable, "-m", "mlmkit", *args]
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(args)}", flush=True)
    before = os.times()
    started = time.perf_counter()
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


def study_table(out: Path, names: list[str], seed: int) -> str:
    """The table of docs/benchmarks.md: one row per policy (short names), each headline number with its
    bootstrap 95% interval, then each policy's difference from random15 (paired, same items;
    `*` where the interval of the difference excludes 0)."""
    from mlmkit.evaluation import compare_suites, load_suite
    from mlmkit.evaluation.compare import _diff_cell
    from mlmkit.evaluation.suite import format_value

    suites = [load_suite(out / name) for name in names]
    result = compare_suites(suites, n_boot=1000, seed=seed, names=names)
    headline = [r for r in result.rows if "/" not in r.metric]
    lines = ["| policy | " + " | ".join(r.metric for r in headline) + " |",
             "|---|" + "---:|" * len(headline)]
    for k, name in enumerate(names):
        cells = []
        for row in headline:
            v = row.values[k]
            if v is None:
                cells.append("–")
                continue
            text = format_value(row.metric, v["value"])
            if v.get("low") is not None:
                text += (f" [{format_value(row.metric, v['low'])}, "
                         f"{format_value(row.metric, v['high'])}]")
            cells.append(text)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for k, name in enumerate(names[1:]):
        cells = [_diff_cell(row.metric, row.differences[k]) if row.differences else "–"
                 for row in headline]
        lines.append(f"| {name} − {names[0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/masking-study")
    parser.add_argument("--model", default="modernbert-tiny")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--parts", default=None, help="suite parts (default: all that apply)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    timings_path = out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.is_file() else {}
    common = ["--threads", str(args.threads)]
    tokenizer, stats = out / "tokenizer", out / "mask-stats"
    names = [p.strip() for p in args.policies.split(",")]

    def save():
        timings_path.write_text(json.dumps(timings, indent=1) + "\n")

    if not (tokenizer / "tokenizer.json").is_file():
        run(["tokenizer", "train", "python-docs", "-o", str(tokenizer), "--vocab-size", "8192"],
            log, timings, "tokenizer")
    if "pmi" in names and not (stats / "stats.json").is_file():
        run(["mask", "stats", "python-docs", str(tokenizer), "-o", str(stats)], log, timings,
            "mask-stats")
    save()
    for name in names:
        run_dir = out / name
        if not (run_dir / "final" / "config.json").is_file():
            masking = [a.replace("{stats}", str(stats)) for a in POLICIES[name]]
            if (run_dir / "config.yaml").is_file():
                cmd = ["pretrain", "--resume", "--run-dir", str(run_dir)]
            else:
                cmd = ["pretrain", "--model", args.model, "--tokenizer", str(tokenizer),
                       *masking, "--steps", str(args.steps), "--batch-size",
                       str(args.batch_size), "--seq-len", str(args.seq_len), "--seed",
                       str(args.seed), "--save-every", "100", "--eval-every", "0",
                       "--run-dir", str(run_dir), "--no-progress", *common]
            run(cmd, log, timings, f"pretrain {name}")
            save()
    for name in names:
        run_dir = out / name
        if not (run_dir / "suite.json").is_file():
            cmd = ["eval", "suite", str(run_dir / "final"), "--data", args.data, "--quick",
                   "--run-dir", str(run_dir), "--seed", str(args.seed), *common]
            if args.parts:
                cmd += ["--parts", args.parts]
            run(cmd, log, timings, f"suite {name}")
            save()
    runs = [str(out / name) for name in names]
    run(["eval", "compare", *runs, "-o", str(out / "study.md"), "--seed", str(args.seed)],
        log, timings, "compare")
    run(["eval", "compare", *runs, "-o", str(out / "study.json"), "--json", "--seed",
         str(args.seed)], log, timings, "compare-json")
    save()
    table = study_table(out, names, args.seed)
    (out / "study-table.md").write_text(table)
    print(table)
    total_wall = sum(t["wall_s"] for t in timings.values())
    total_cpu = sum(t["cpu_s"] for t in timings.values())
    print(f"total: {total_wall:.0f} s wall, {total_cpu:.0f} s CPU (timings.json)")


if __name__ == "__main__":
    main()
