"""Pretraining speed and quality: mlmkit's loop vs Hugging Face Trainer, in one run.

The same mini BERT config (same init, same dropout), the same packed python-docs blocks,
batch, masking rate (30%, 80/10/10) and AdamW settings are trained four ways: mlmkit as
it runs by default (`--precision auto`: bf16 where the hardware multiplies bf16 natively,
else fp32), mlmkit in fp32, HF `Trainer` + `DataCollatorForLanguageModeling` +
`BertForMaskedLM` with its defaults, and the same with `bf16=True`. Printed: tokens/s of
each (timed after warm-up steps) and the ratios; the model FLOPs utilisation of each
against a matmul peak of its precision measured in this run (benchmarks/flops.py), three
times: from wall time, and from the process's CPU time (rates and peak per CPU-second of all its
threads, i.e. per thread: what the run got of a machine shared with other jobs), and a
third time against the peak sampled between the system's own steps (a 1024² round after
each, left out of the step times: the same contention as the steps), next
to the same loop with its last layer computed in full (MLMKIT_SPARSE_LAST_LAYER=0, today's
loop before issue 20, with the largest loss difference); and the held-out
masked-token accuracy each reaches after the same wall-clock budget, scored by one
evaluator (the same validation blocks with the same HF-collator masks for all).

    python benchmarks/pretrain.py                 # about 12 minutes on 2 CPU cores
    python benchmarks/pretrain.py --budget 30 --timed-steps 4   # a quick look
    python benchmarks/pretrain.py --section objectives   # issue 6: ELECTRA, diffusion, DDP
    python benchmarks/pretrain.py --section profile      # issue 20: where a step's time goes
    python benchmarks/pretrain.py --device cuda   # = --section gpu: vs HF Trainer on a GPU
    python benchmarks/pretrain.py --device cpu --smoke   # the same code, tiny, in seconds
    python benchmarks/pretrain.py --section data --timed-steps 8   # mask streams, --prefetch

Every run trains with the thread count the matmul peak is measured at (--threads, default
$MLMKIT_THREADS or the usable cores), so the MFU of each row is against its own threads'
peak. HF Trainer's tokens/s rows run before mlmkit's, on glibc's allocator as a plain process has it
(mlmkit's loop keeps freed memory in the heap while it trains: train/runtime.py).

The objectives section trains the same config with --objective electra and diffusion
(tokens/s relative to MLM, in this run) and runs `torchrun --nproc_per_node 1` and `2`
(gloo on CPU; the global batch kept, the cores split between processes).

The gpu section (`--device cuda`, or `--section gpu`) compares, on one device in one
process, HF Trainer at its best settings (bf16, sdpa, torch.compile, fused AdamW) with
mlmkit at the settings a GPU user should use (MLMKIT_GPU_SETTINGS), for a ModernBERT-base
and a BERT-base shape at sequence length 1,024 and 512 from one saved initial model:
tokens/s, MFU against the bf16 matmul peak measured on that device, the ratio, mlmkit's
data-wait share and peak memory. `--smoke` runs it on the CPU with tiny models in
seconds; benchmarks/gpu_check.sh runs it on a lent GPU machine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import resource
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from unittest import mock

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from flops import matmul_peak, train_flops_per_token  # noqa: E402

from mlmkit.core.devices import (  # noqa: E402
    available_cores,
    resolve_precision,
    set_threads,
)
from mlmkit.errors import MlmkitError  # noqa: E402
from mlmkit.models import build_mlm  # noqa: E402
from mlmkit.pretraining import PretrainConfig, pretrain  # noqa: E402
from mlmkit.pretraining.config import flag  # noqa: E402
from mlmkit.pretraining.data import build_data, resolve_tokenizer  # noqa: E402
from mlmkit.training.objectives.metrics import masked_token_metrics  # noqa: E402
from mlmkit.training.objectives.mlm import set_dropout  # noqa: E402

MASK_RATE = 0.3


class BlockDataset(torch.utils.data.Dataset):
    """mlmkit's packed blocks as HF examples (input_ids + attention_mask)."""

    def __init__(self, blocks):
        self.batch = blocks[np.arange(len(blocks))]

    def __len__(self):
        return len(self.batch.input_ids)

    def __getitem__(self, i):
        return {"input_ids": self.batch.input_ids[i], "attention_mask":
                self.batch.attention_mask[i]}


def eval_batches(tokenizer, validation, count: int, batch_size: int, seed: int = 1234):
    """Fixed validation masks for every system: the HF collator's own masking, seeded."""
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=MASK_RATE, seed=seed)
    data = BlockDataset(validation)
    n = min(count, len(data))
    batches = []
    for start in range(0, n, batch_size):
        examples = [data[i] for i in range(start, min(start + batch_size, n))]
        out = collator(examples)
        batches.append({"input_ids": out["input_ids"], "attention_mask": out["attention_mask"],
                        "labels": out["labels"], "mask": out["labels"] != -100})
    return batches


def accuracy(model, batches) -> float:
    model.eval()
    with torch.inference_mode():
        return masked_token_metrics(model, batches, contextlib.nullcontext)[
            "accuracy"]


def peak_round(size: int = 1024, times: int = 3) -> tuple[float, float]:
    """One short round of the square fp32 matmul peak: (FLOP/s of wall time, FLOP/s per
    CPU-second). Run between training steps, it samples the peak under the same
    contention as the steps around it (other jobs on a shared machine lower both)."""
    a = torch.randn(size, size)
    a @ a
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(times):
        a @ a
    flops = times * 2 * size**3
    return (flops / max(time.perf_counter() - wall, 1e-9),
            flops / max(time.process_time() - cpu, 1e-9))


# peak rounds sampled between the timed steps of each system's last run (peak_round)
BETWEEN: list[tuple[float, float]] = []


@contextlib.contextmanager
def step_cpu_seconds(between: bool = False):
    """The process CPU seconds of each training step of mlmkit's loop (all threads), measured
    around `Run.step` from outside: the loop itself, its RNG and its losses are untouched.
    `between`: a peak round after each step (outside the step's time), into BETWEEN."""
    from mlmkit.pretraining.run import Run

    original, seconds = Run.step, []

    def step(self, *args, **kwargs):
        start = time.process_time()
        try:
            original(self, *args, **kwargs)
        finally:
            seconds.append(time.process_time() - start)
        if between:
            BETWEEN.append(peak_round())

    Run.step = step
    try:
        yield seconds
    finally:
        Run.step = original


def run_mlmkit(base: PretrainConfig, work: Path, *, steps=None, time_budget=None,
               warm: int = 2, between: bool | None = None):
    """(tokens/s of wall time, result, tokens per CPU-second of the process); `between`:
    sample the peak between steps (default: in a timed run of `steps`)."""
    run_dir = work / f"mlmkit-{steps or time_budget}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = base.replace(run_dir=str(run_dir), steps=steps, time=time_budget, log_every=1,
                          eval_every=0, save_every=0, pppl_sentences=0, eval_blocks=1)
    BETWEEN.clear()
    with step_cpu_seconds(between=bool(steps) if between is None else between) as cpu:
        result = pretrain(config)
    train = [r for r in result.history if r["split"] == "train"]
    if steps:
        tokens = np.diff([r["tokens"] for r in train[warm - 1:]])
        seconds = np.diff([r["elapsed"] for r in train[warm - 1:]])
        rate = float(np.median(tokens) / np.median(seconds))
        cpu_rate = float(np.median(tokens) / np.median(cpu[warm:]))  # the same steps
    else:
        rate = train[-1]["tokens"] / train[-1]["elapsed"]
        cpu_rate = train[-1]["tokens"] / sum(cpu)
    return rate, result, cpu_rate


def run_hf(base: PretrainConfig, tokenizer, data, work: Path, *, bf16: bool, steps: int,
           time_budget: float | None = None, warm: int = 2, model=None,
           device: str | None = None, **settings):
    """HF Trainer with defaults (plus the shared optimizer settings); returns (tokens/s of
    wall time, model, steps, tokens per CPU-second of the process). `model`: train this one
    (default: the preset of `base`, built as mlmkit builds it); `device` (the gpu
    section's): no CPU peak rounds between steps, and on "cuda" each step ends
    synchronised (its time is the GPU's, as mlmkit's loop reads its gradient norm every
    step); `settings`: more TrainingArguments (the gpu section's bf16 and compile)."""
    from transformers import (
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    class Clock(TrainerCallback):
        def __init__(self):
            self.times, self.cpu, self.start = [], [], None
            self.skipped = self.cpu_skipped = 0.0  # seconds of peak rounds between steps

        def on_train_begin(self, args, state, control, **kw):
            self.start = time.perf_counter()
            self.cpu_start = time.process_time()

        def on_step_end(self, args, state, control, **kw):
            if device is not None and device.startswith("cuda"):
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.skipped)
            self.cpu.append(time.process_time() - self.cpu_skipped)
            if time_budget and self.times[-1] - self.start >= time_budget:
                control.should_training_stop = True
            elif not time_budget and device is None:  # a peak round between steps, left
                # out of their times (the trainer section's)
                wall, cpu = time.perf_counter(), time.process_time()
                BETWEEN.append(peak_round())
                self.skipped += time.perf_counter() - wall
                self.cpu_skipped += time.process_time() - cpu

    BETWEEN.clear()
    if model is None:
        model = build_mlm(base.model, tokenizer, max_length=base.seq_len, seed=base.seed)
    if base.dropout is not None:  # the same model config as mlmkit's
        set_dropout(model, base.dropout)
    clock = Clock()
    use_cpu = device == "cpu" or not torch.cuda.is_available()
    args = TrainingArguments(**{
        "output_dir": str(work / "hf"), "per_device_train_batch_size": base.batch_size,
        "learning_rate": base.lr, "weight_decay": base.weight_decay, "adam_beta1": base.beta1,
        "adam_beta2": base.beta2, "adam_epsilon": base.eps, "max_grad_norm": base.clip,
        "warmup_steps": max(1, int(base.warmup * steps)), "lr_scheduler_type": "linear",
        "max_steps": steps, "bf16": bf16, "use_cpu": use_cpu, "seed": base.seed,
        "logging_strategy": "no", "save_strategy": "no", "report_to": [],
        "disable_tqdm": True, "dataloader_num_workers": 0, **settings})
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=MASK_RATE)
    trainer = Trainer(model=model, args=args, train_dataset=BlockDataset(data.train),
                      data_collator=collator, callbacks=[clock])
    trainer.train()
    tokens_per_step = base.batch_size * base.seq_len
    if time_budget:
        rate = tokens_per_step * len(clock.times) / (clock.times[-1] - clock.start)
        cpu_rate = tokens_per_step * len(clock.cpu) / (clock.cpu[-1] - clock.cpu_start)
    else:
        rate = tokens_per_step / float(np.median(np.diff(clock.times[warm - 1:])))
        cpu_rate = tokens_per_step / float(np.median(np.diff(clock.cpu[warm - 1:])))
    return rate, model, len(clock.times), cpu_rate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mini")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--timed-steps", type=int, default=12,
                        help="steps timed for tokens/s (after 2 warm-up steps): the median "
                             "step time, robust to a noisy machine")
    parser.add_argument("--budget", type=float, default=75.0,
                        help="seconds of training per system for the accuracy comparison "
                             "(0: tokens/s only)")
    parser.add_argument("--lr", type=float, default=5e-4,
                        help="peak learning rate of every system (mini BERT, post-LN, stays "
                             "at the unigram stage for minutes at 1e-3)")
    parser.add_argument("--masking", default=None,
                        help="mlmkit masking policy (default: token-level 30%%, 80/10/10, as HF)")
    parser.add_argument("--skip-bf16", action="store_true")
    parser.add_argument("--skip-compile", action="store_true",
                        help="leave out the mlmkit --compile row")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads of every system and of the peak (default: "
                             "$MLMKIT_THREADS, else the usable cores)")
    parser.add_argument("--section", choices=("all", "trainer", "objectives", "profile", "data",
                                              "gpu"),
                        default=None,
                        help="trainer: mlmkit vs HF Trainer; objectives: ELECTRA / diffusion "
                             "vs MLM and 1- vs 2-process scaling (issue 6); profile: one "
                             "mlmkit step's time by kind of op (issue 20); data: the row "
                             "and counter mask streams and --prefetch 1 and 2; gpu: mlmkit at "
                             "its GPU settings vs HF Trainer at its best, base-size models at "
                             "seq 512 and 1,024 (default: gpu with --device, else all)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="--section data: times each system trains, interleaved")
    add_gpu_arguments(parser)
    args = parser.parse_args(argv)
    if args.section is None:
        args.section = "gpu" if args.device else "all"
    if args.section == "gpu":
        gpu_figures(args)
        return
    # the cores this process may use (or $MLMKIT_THREADS), as mlmkit does; the runs are
    # given this count, so it is the one the peak is measured at (not mlmkit's load-based
    # default, which may pick fewer threads than the peak used)
    threads = set_threads(args.threads)

    masking = args.masking or {"units": "tokens", "rate": MASK_RATE}
    base = PretrainConfig(model=args.model, seq_len=args.seq_len, batch_size=args.batch_size,
                          lr=args.lr, warmup=0.06, schedule="linear", masking=masking,
                          progress=False, fill_mask_examples=0, steps=10, threads=threads)
    tokenizer = resolve_tokenizer(base, show_progress=False)
    data = build_data(base, tokenizer, show_progress=False)
    work = Path(tempfile.mkdtemp(prefix="mlmkit-bench-pretrain-"))
    print(f"data: {data.describe()}; threads {torch.get_num_threads()}")
    if args.section == "profile":
        profile_step(base, work, args.timed_steps)
        shutil.rmtree(work, ignore_errors=True)
        return
    if args.section == "data":
        figures = {"data": data_figures(args, base, work), "config": base.to_dict()}
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str))
        shutil.rmtree(work, ignore_errors=True)
        return
    if args.section == "objectives":
        figures = {"objectives": objective_figures(args, base, work), "config": base.to_dict()}
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str))
        shutil.rmtree(work, ignore_errors=True)
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    precision = resolve_precision(base.precision, device, task="training")
    peaks = {"fp32": matmul_peak(torch.float32)}
    cpu_peaks = {"fp32": matmul_peak(torch.float32, clock=time.process_time)}
    if precision == "bf16":
        peaks["bf16"] = matmul_peak(torch.bfloat16)
        cpu_peaks["bf16"] = matmul_peak(torch.bfloat16, clock=time.process_time)
    print("measured matmul peak: " + ", ".join(
        f"{k} {v / 1e9:.1f} GFLOP/s of wall time, {cpu_peaks[k] / 1e9:.1f} per CPU-second"
        for k, v in peaks.items()) + f" ({torch.get_num_threads()} threads; load average "
        f"{os.getloadavg()[0]:.2f})")
    steps = args.timed_steps + 2
    systems = {"mlmkit": base, "mlmkit_compile": base.replace(compile=True),
               "mlmkit_fp32": base.replace(precision="fp32")}
    if precision == "fp32":  # the default run is the fp32 run
        del systems["mlmkit_fp32"]
    if args.skip_compile:
        del systems["mlmkit_compile"]
    labels = {"mlmkit": f"mlmkit ({precision})", "mlmkit_compile": f"mlmkit ({precision}, "
              "--compile)", "mlmkit_fp32": "mlmkit (fp32)",
              "mlmkit_full": f"mlmkit ({precision}, full last layer)", "hf": "HF Trainer",
              "hf_bf16": "HF Trainer bf16"}

    # ---- tokens/s
    rates, cpu_rates, between = {}, {}, {}  # between: peak rounds between its steps
    # HF first: on glibc's allocator as a plain process has it
    rates["hf"], _, _, cpu_rates["hf"] = run_hf(base, tokenizer, data, work, bf16=False,
                                                steps=steps)
    between["hf"] = list(BETWEEN)
    print(f"{labels['hf']:18s} {rates['hf']:8.0f} tokens/s", flush=True)
    if not args.skip_bf16:
        rates["hf_bf16"], _, _, cpu_rates["hf_bf16"] = run_hf(base, tokenizer, data, work,
                                                              bf16=True, steps=steps)
        print(f"{labels['hf_bf16']:18s} {rates['hf_bf16']:8.0f} tokens/s", flush=True)
    for name, config in systems.items():
        rates[name], _, cpu_rates[name] = run_mlmkit(config, work, steps=steps)
        between[name] = list(BETWEEN)
        print(f"{labels[name]:18s} {rates[name]:8.0f} tokens/s", flush=True)
    # today's loop before the sparse last layer, in this run: its losses must equal the
    # default row's for the same seed (float tolerance), only the speed may differ
    os.environ["MLMKIT_SPARSE_LAST_LAYER"] = "0"
    try:
        rates["mlmkit_full"], full_result, cpu_rates["mlmkit_full"] = run_mlmkit(
            base, work, steps=steps)
        between["mlmkit_full"] = list(BETWEEN)
    finally:
        os.environ.pop("MLMKIT_SPARSE_LAST_LAYER")
    print(f"{labels['mlmkit_full']:18s} {rates['mlmkit_full']:8.0f} tokens/s", flush=True)
    _, sparse_result, _ = run_mlmkit(base, work, steps=steps)
    losses = [[r["loss"] for r in result.history if r["split"] == "train"]
              for result in (sparse_result, full_result)]
    print(f"losses, sparse vs full last layer, {len(losses[0])} steps: max |difference| "
          f"{max(abs(a - b) for a, b in zip(*losses, strict=True)):.2e}", flush=True)
    probe = build_mlm(base.model, tokenizer, max_length=base.seq_len)
    needed = train_flops_per_token(probe.config, base.seq_len, read_share=MASK_RATE)
    precisions = {name: resolve_precision(config.precision, device, task="training")
                  for name, config in systems.items()}
    precisions.update(mlmkit_full=precision, hf="fp32", hf_bf16="bf16")
    mfu = {name: rates[name] * needed / peaks.get(precisions[name], peaks["fp32"])
           for name in rates}
    cpu_mfu = {name: cpu_rates[name] * needed / cpu_peaks.get(precisions[name],
                                                              cpu_peaks["fp32"])
               for name in cpu_rates}
    print("MFU from wall time (the FLOPs the task needs, benchmarks/flops.py, over the "
          "matmul peak of the precision used, both per wall second; low when other jobs "
          "share the cores): " + ", ".join(f"{labels[k]} {100 * v:.1f}%"
                                           for k, v in mfu.items()))
    print("MFU from CPU time per thread (the same, rates and peak per CPU-second of this "
          "process's threads: the share of the cores it got): " + ", ".join(
              f"{labels[k]} {100 * v:.1f}%" for k, v in cpu_mfu.items()))
    # fp32 rows: against the fp32 peak sampled between their own steps (same contention)
    near = {name: [float(np.median([p[i] for p in between[name]])) for i in (0, 1)]
            for name in between if precisions[name] == "fp32" and between[name]}
    near_mfu = {name: (rates[name] * needed / near[name][0],
                       cpu_rates[name] * needed / near[name][1]) for name in near}
    print("MFU against the fp32 peak sampled between the same steps (median of one 1024² "
          "round after each step; wall / CPU time): " + ", ".join(
              f"{labels[k]} {100 * w:.1f}% / {100 * c:.1f}% (peak {near[k][0] / 1e9:.1f} / "
              f"{near[k][1] / 1e9:.1f} GFLOP/s)" for k, (w, c) in near_mfu.items()))

    # ---- accuracy after the same wall-clock budget
    val = eval_batches(tokenizer, data.validation, 256, args.batch_size)
    acc, done = {}, {}
    from transformers import AutoModelForMaskedLM

    timed = systems if args.budget > 0 else {}  # --budget 0: tokens/s only
    for name, config in timed.items():
        _, result, _ = run_mlmkit(config, work, time_budget=f"{args.budget}s")
        acc[name] = accuracy(AutoModelForMaskedLM.from_pretrained(result.final_dir), val)
        done[name] = result.summary["steps"]
    for name, bf16 in (("hf", False), ("hf_bf16", True)):
        if name not in rates or not timed:
            continue
        planned = max(3, int(args.budget * rates[name] / (args.batch_size * args.seq_len)))
        _, model, done[name], _ = run_hf(base, tokenizer, data, work, bf16=bf16,
                                         steps=planned, time_budget=args.budget)
        acc[name] = accuracy(model.float(), val)

    print()
    print(f"{'system':26s} {'tokens/s':>9s} {'× HF':>6s} {'× HF bf16':>10s} "
          f"{'accuracy@' + str(int(args.budget)) + 's':>13s} {'steps':>6s}")
    for name in rates:
        versus = [f"{rates[name] / rates[hf]:.2f}" if hf in rates else "-"
                  for hf in ("hf", "hf_bf16")]
        print(f"{labels[name]:26s} {rates[name]:9.0f} {versus[0]:>6s} {versus[1]:>10s} "
              f"{acc.get(name, float('nan')):13.4f} {done.get(name, 0):6d}")
    print("targets: mlmkit ≥ 3× HF Trainer (defaults) and ≥ 2× HF bf16 in tokens/s, at equal "
          "or better accuracy. --compile's first step includes compiling (cached on disk "
          "by torch for the next run), and counts in its wall-clock budget.")
    figures = {"tokens_per_s": rates, "accuracy": acc, "steps": done, "mfu": mfu,
               "tokens_per_cpu_s": cpu_rates, "mfu_cpu_time": cpu_mfu,
               "mfu_peak_between_steps": near_mfu, "peak_between_steps": near,
               "peak_flops": peaks, "peak_flops_per_cpu_s": cpu_peaks, "precision": precision,
               "budget_s": args.budget, "config": base.to_dict()}
    if args.section == "all":
        figures["objectives"] = objective_figures(args, base, work)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)


# ---- issue 20: where one training step's time goes

OP_KINDS = (  # (kind, test on the aten op name), first match wins
    ("matmuls (linear layers and head, forward and backward)",
     lambda k: k in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("attention (SDPA forward and backward)", lambda k: "scaled_dot_product" in k),
    ("loss (softmax, row max and top-1, NLL; forward and backward)",
     lambda k: k == "aten::max" or any(w in k for w in ("softmax", "nll", "argmax",
                                                        "cross_entropy"))),
    ("GELU (forward and backward)", lambda k: "gelu" in k),
    ("LayerNorm (forward and backward)", lambda k: "layer_norm" in k),
    ("element-wise: gate and rotary products, bias copies and gradient sums, residual "
     "adds, fills", lambda k: k in ("aten::copy_", "aten::fill_", "aten::sum", "aten::add_",
                                    "aten::add", "aten::mul_", "aten::mul", "aten::addcmul_",
                                    "aten::zero_", "aten::clone")),
    ("optimizer (fused AdamW) and gradient-norm clipping",
     lambda k: "adam" in k.lower() or "vector_norm" in k or "foreach" in k),
    ("embeddings (forward and backward)", lambda k: "embedding" in k),
    ("other aten ops (masking, indexing, views, dtype moves)",
     lambda k: k.startswith("aten::")),
)


def profile_step(base: PretrainConfig, work: Path, steps: int) -> dict:
    """torch.profiler over `steps` steps of mlmkit's loop (after 2 warm-up steps): each kind
    of op's share of the step, the rest (Python, autograd engine, profiler) as the gap to
    the step's wall time, and the matmuls' own GFLOP/s against the square-matmul peak of
    the same threads. Profiled times are wall times; on a shared machine they are scaled
    by the window's CPU/wall ratio, so read the shares, not the seconds."""
    from torch.profiler import ProfilerActivity, profile

    from mlmkit.pretraining.run import build_run
    from mlmkit.training.runtime import retained_heap

    steps = max(1, steps)
    config = base.replace(run_dir=str(work / "profile"), steps=steps + 2, log_every=1,
                          eval_every=0, save_every=0, pppl_sentences=0, eval_blocks=1)
    run = build_run(config)
    run.objective.train()
    # the peak of the precision the step multiplies in (bf16 where --precision auto picks it)
    dtype = torch.bfloat16 if run.runtime.precision == "bf16" else torch.float32
    # per CPU-second × threads: the profiled times below are scaled to whole cores too
    peak = matmul_peak(dtype, clock=time.process_time) * torch.get_num_threads()
    with retained_heap(run.runtime.device):
        for _ in range(2):
            run.step()
        wall, cpu = time.perf_counter(), time.process_time()
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
            for _ in range(steps):
                run.step()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    scale = cpu / wall / torch.get_num_threads() if wall else 1.0  # the share of cores got
    seconds = {kind: 0.0 for kind, _ in OP_KINDS}
    matmul_flops = 0.0
    for event in prof.key_averages():
        kind = next((k for k, test in OP_KINDS if test(event.key)), None)
        if kind is None:  # autograd / optimizer wrappers: their self time goes to "rest"
            continue
        seconds[kind] += event.self_cpu_time_total / 1e6 * scale
        if kind == OP_KINDS[0][0]:
            matmul_flops += event.flops
    step_seconds = wall * scale / steps
    shares = {k: v / steps / step_seconds for k, v in seconds.items()}
    shares["Python, autograd engine, profiler (the rest of the step)"] = 1 - sum(shares.values())
    tokens = config.batch_size * config.seq_len
    needed = train_flops_per_token(run.objective.modules["model"].config, config.seq_len,
                                   read_share=MASK_RATE) * tokens
    matmul_s, attention_s = (seconds[k] / steps for k in (OP_KINDS[0][0], OP_KINDS[1][0]))
    matmul_rate = matmul_flops / steps / max(matmul_s, 1e-9)
    bound = needed / (matmul_s + attention_s) / peak  # every other op at zero time
    print(f"one {run.runtime.precision} step of {tokens} tokens, {torch.get_num_threads()} "
          f"thread(s), profiled over "
          f"{steps} steps: {step_seconds:.3f} s per step (CPU {cpu / steps:.3f} s; load "
          f"average {os.getloadavg()[0]:.2f})")
    for kind, share in shares.items():
        print(f"  {share:6.1%}  {kind}")
    print(f"matmuls: {matmul_flops / steps / 1e9:.1f} GFLOP a step at {matmul_rate / 1e9:.1f} "
          f"GFLOP/s, {matmul_rate / peak:.0%} of the square-matmul {run.runtime.precision} "
          f"peak ({peak / 1e9:.1f} GFLOP/s: per CPU-second × {torch.get_num_threads()} "
          f"threads, as the profiled times are scaled to whole cores). The FLOP model counts {needed / 1e9:.1f} "
          f"GFLOP a step (attention included): MFU {needed / step_seconds / peak:.1%} here; "
          f"with every op but matmuls and attention at zero time, at most {bound:.1%}")
    return {"shares": shares, "matmul_gflops": matmul_rate / 1e9, "peak_gflops": peak / 1e9,
            "bound": bound}


# ---- issue 6: other objectives and data-parallel scaling


def rate_from_history(train: list[dict], warm: int = 2) -> float:
    """Tokens/s between the end of warm-up step `warm` and the last step."""
    first, last = train[warm - 1], train[-1]
    return (last["tokens"] - first["tokens"]) / (last["elapsed"] - first["elapsed"])


def run_torchrun(base: PretrainConfig, work: Path, processes: int, steps: int) -> float:
    """tokens/s of `torchrun --nproc_per_node N -m mlmkit pretrain` (gloo on CPU), with
    the CPU threads split between the processes."""
    import subprocess
    import sys

    run_dir = work / f"torchrun-{processes}"
    shutil.rmtree(run_dir, ignore_errors=True)
    threads = max(1, available_cores() // processes)
    masking = json.dumps(base.masking) if isinstance(base.masking, dict) else str(base.masking)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={processes}", "-m", "mlmkit", "pretrain",
               "--model", base.model, "--seq-len", str(base.seq_len),
               "--batch-size", str(base.batch_size), "--lr", str(base.lr),
               "--masking", masking, "--steps", str(steps), "--log-every", "1",
               "--eval-every", "0", "--save-every", "0", "--eval-blocks", "1",
               "--pppl-sentences", "0", "--fill-mask-examples", "0", "--no-progress",
               "--threads", str(threads), "--run-dir", str(run_dir)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    subprocess.run(command, check=True, env=env, timeout=1800, stdout=subprocess.DEVNULL)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return rate_from_history([r for r in map(json.loads, lines) if r["split"] == "train"])


def objective_figures(args, base: PretrainConfig, work: Path) -> dict:
    """tokens/s of --objective electra and diffusion relative to MLM (same config, this
    run), and of 2 torchrun processes relative to 1 (same global batch)."""
    steps = args.timed_steps + 2
    rates = {}
    for objective in ("mlm", "electra", "diffusion"):
        config = base.replace(objective=objective,
                              masking=base.masking if objective == "mlm" else "default")
        rates[objective], _, _ = run_mlmkit(config, work / objective, steps=steps)
        print(f"--objective {objective:9s} {rates[objective]:8.0f} tokens/s "
              f"({rates[objective] / rates['mlm']:.2f} × MLM)", flush=True)
    scaling = {n: run_torchrun(base, work, n, steps) for n in (1, 2)}
    print(f"torchrun 1 process  {scaling[1]:8.0f} tokens/s")
    print(f"torchrun 2 processes {scaling[2]:7.0f} tokens/s ({scaling[2] / scaling[1]:.2f} × "
          f"1 process; {available_cores()} CPU cores, gloo)")
    return {"tokens_per_s": rates, "relative_to_mlm": {k: v / rates["mlm"]
                                                       for k, v in rates.items()},
            "torchrun_tokens_per_s": scaling, "scaling_2_vs_1": scaling[2] / scaling[1]}


# ---- the data path in training: mask streams and --prefetch


def data_figures(args, base: PretrainConfig, work: Path) -> dict:
    """tokens/s, MFU and the share of the step spent on the batch, for the row and the
    counter mask stream (batches built in the step) and for --prefetch 1 and 2 (counter
    stream). Each system trains --rounds times, the systems interleaved, so that a change
    of the machine's load falls on all of them; the median of the rounds is printed. No
    peak rounds between steps here: they would give a prefetching thread a core of its own
    between the steps, which the run itself does not have."""
    systems = {"row stream": base.replace(mask_stream="row", prefetch=0),
               "counter stream": base.replace(mask_stream="counter", prefetch=0),
               "counter, --prefetch 1": base.replace(mask_stream="counter", prefetch=1),
               "counter, --prefetch 2": base.replace(mask_stream="counter", prefetch=2)}
    precision = resolve_precision(base.precision, torch.device("cpu"), task="training")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    peak = matmul_peak(dtype)
    cpu_peak = matmul_peak(dtype, clock=time.process_time)
    tokenizer = resolve_tokenizer(base, show_progress=False)
    probe = build_mlm(base.model, tokenizer, max_length=base.seq_len)
    needed = train_flops_per_token(probe.config, base.seq_len, read_share=MASK_RATE)
    steps = args.timed_steps + 2
    runs = {name: [] for name in systems}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for name, config in systems.items():
            rate, result, cpu_rate = run_mlmkit(config, work / "data", steps=steps,
                                                between=False)
            runs[name].append((rate, cpu_rate, result.summary["data_wait_share"]))
            loads.append(os.getloadavg()[0])
    figures = {name: {"tokens_per_s": float(np.median([r[0] for r in rows])),
                      "tokens_per_cpu_s": float(np.median([r[1] for r in rows])),
                      "data_wait_share": float(np.median([r[2] for r in rows])),
                      "rounds": rows} for name, rows in runs.items()}
    for values in figures.values():
        values["mfu"] = values["tokens_per_s"] * needed / peak
        values["mfu_cpu_time"] = values["tokens_per_cpu_s"] * needed / cpu_peak
    first = figures["row stream"]["tokens_per_s"]
    print(f"{precision} matmul peak {peak / 1e9:.1f} GFLOP/s of wall time, "
          f"{cpu_peak / 1e9:.1f} per CPU-second; {torch.get_num_threads()} threads; "
          f"{args.rounds} rounds of {args.timed_steps} timed steps; load average (1 min) "
          f"{min(loads):.2f}–{max(loads):.2f}")
    print(f"{'system':24s} {'tokens/s':>9s} {'× row':>6s} {'MFU':>6s} {'MFU/CPU-s':>10s} "
          f"{'data wait':>10s}")
    for name, values in figures.items():
        print(f"{name:24s} {values['tokens_per_s']:9.0f} {values['tokens_per_s'] / first:6.2f} "
              f"{100 * values['mfu']:5.1f}% {100 * values['mfu_cpu_time']:9.1f}% "
              f"{100 * values['data_wait_share']:9.2f}%")
    return {"systems": figures, "load_average": loads, "precision": precision,
            "peak_flops": peak, "peak_flops_per_cpu_s": cpu_peak}


# ---- on a GPU: mlmkit at the settings a GPU user should use vs HF Trainer at its best

GPU_MODELS = {"ModernBERT-base": "modernbert-base", "BERT-base": "bert-base"}
SMOKE_MODELS = {"ModernBERT-tiny": "modernbert-tiny", "BERT-tiny": "bert-tiny"}
GPU_SEQ_LENS = (1024, 512)  # the 1,024 rows first: the targets are read there

# mlmkit's settings for a GPU run, as PretrainConfig fields (the flag is the name with
# dashes: compile_layers is --compile-layers). One place to update: a field this mlmkit
# lacks, or one a model or device refuses (an InvalidArgument naming its flag, e.g.
# --flex-attention on a CPU), is left out of that run with a note, so the list may name
# settings that land later.
MLMKIT_GPU_SETTINGS: list[tuple[str, object]] = [
    ("precision", "bf16"),
    ("mask_stream", "counter"),  # masks drawn on the device, for the whole batch at once
    ("prefetch", 2),  # the next batches built, pinned and copied on a side stream
    ("unpadded", True),  # packed documents, attention within each document
    ("flex_attention", True),  # unpadded attention through a FlexAttention block mask
    ("compile_layers", True),  # regional torch.compile, one layer at a time
    ("batch_tokens", "auto"),  # the micro-batch measured to fit, gradient accumulation
    ("cuda_graphs", True),  # compiled regions replayed as CUDA graphs
]
COMPILE_SETTINGS = ("compile", "compile_layers", "cuda_graphs")


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None,
                        help="the gpu section's device: cuda or cpu (default: cuda where "
                             "there is one); --device alone selects the gpu section")
    parser.add_argument("--smoke", action="store_true",
                        help="gpu section: tiny models, one short sequence, a few steps and "
                             "no compiling: checks the code in seconds, measures nothing")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=None,
                        help="gpu section: sequence lengths (default 1024 512; smoke: 64)")
    parser.add_argument("--step-tokens", type=int, default=None,
                        help="gpu section: tokens per optimizer step, the batch being this "
                             "over the sequence length (default 32768; smoke: 256)")
    parser.add_argument("--warm-steps", type=int, default=3,
                        help="gpu section: untimed first steps (compiling, memory sizing)")
    parser.add_argument("--no-compile", action="store_true",
                        help="gpu section: neither system compiles (HF torch_compile off, "
                             "mlmkit without --compile-layers / --cuda-graphs)")
    parser.add_argument("--tokenizer", default=None,
                        help="gpu section: tokenizer folder (default: one trained on the "
                             "corpus)")
    parser.add_argument("--corpus", default="python-docs", help="gpu section: the corpus")


def hf_best_settings(device: str, compile: bool) -> dict:
    """TrainingArguments of HF Trainer at its fastest on `device`: bf16 (passed apart),
    torch.compile, and on a GPU the fused AdamW, TF32 for what stays in fp32 and
    DataLoader workers with pinned memory. A name this transformers lacks is left out."""
    from transformers import TrainingArguments

    settings = {"torch_compile": compile}
    if device.startswith("cuda"):
        settings.update(optim="adamw_torch_fused", tf32=True, dataloader_num_workers=4,
                        dataloader_pin_memory=True)
    known = {f.name for f in dataclasses.fields(TrainingArguments)}
    for name in sorted(set(settings) - known):
        print(f"note: HF TrainingArguments has no {name!r} here: left out")
    return {k: v for k, v in settings.items() if k in known}


def mlmkit_gpu_settings(config: PretrainConfig, compile: bool) -> tuple[dict, list[str]]:
    """The MLMKIT_GPU_SETTINGS this mlmkit accepts in a config, and a note for each other."""
    known = {f.name for f in dataclasses.fields(PretrainConfig)}
    applied, notes = {}, []
    if not compile:  # off, also where this mlmkit compiles on a GPU by default
        applied = {name: False for name in COMPILE_SETTINGS if name in known}
    for name, value in MLMKIT_GPU_SETTINGS:
        if not compile and name in COMPILE_SETTINGS:
            notes.append(f"--{flag(name)}: left out (--no-compile)")
        elif name not in known:
            notes.append(f"--{flag(name)}: not in this mlmkit, left out")
        else:
            try:
                config.replace(**applied, **{name: value})
            except MlmkitError as error:
                notes.append(f"--{flag(name)}: refused, left out ({error})")
            else:
                applied[name] = value
    return applied, notes


def refused_setting(error: Exception, applied: dict) -> str | None:
    """The applied setting a run's error names first (its flag), if any."""
    text = str(error)
    named = {text.find(f"--{flag(name)}"): name for name in applied
             if f"--{flag(name)}" in text}
    return named[min(named)] if named else None


def run_mlmkit_gpu(config: PretrainConfig, applied: dict, notes: list[str], work: Path,
                   steps: int) -> object:
    """mlmkit's run with `applied`; a setting the run refuses when it starts (its model or
    device has no such path) is dropped, noted, and the run started again without it."""
    while True:
        try:
            _, result, _ = run_mlmkit(config.replace(**applied), work, steps=steps,
                                      between=False)
            return result
        except MlmkitError as error:
            name = refused_setting(error, applied)
            if name is None:
                raise
            notes.append(f"--{flag(name)}: refused, left out ({error})")
            del applied[name]


def fresh_device_state(device: str, compile: bool) -> None:
    """Before each run: compiled graphs, cached blocks and the memory peak of the last one
    gone (the same starting point for every row; each row compiles its own model)."""
    gc.collect()
    if compile:
        torch._dynamo.reset()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory(device: str) -> float:
    """Bytes: the device's allocation peak since fresh_device_state; on a CPU the process's
    resident peak so far (it cannot be reset: later rows read at least the earlier ones)."""
    if device.startswith("cuda"):
        return float(torch.cuda.max_memory_allocated())
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


def step_rate(times: list[float], tokens_per_step: int, warm: int) -> float:
    """tokens/s from the end times of the steps: the median step after `warm` steps."""
    return tokens_per_step / float(np.median(np.diff(times[warm - 1:])))


def save_init(preset: str, tokenizer, seq_len: int, seed: int, folder: Path) -> Path:
    """One fresh model of `preset` with `seq_len` positions (the presets stop at 512) and
    its tokenizer, saved: both systems start from these weights (mlmkit with --init)."""
    if not (folder / "config.json").exists():
        model = build_mlm(preset, tokenizer, max_length=seq_len, seed=seed)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


@dataclasses.dataclass
class GpuBench:
    """What every row of the gpu section shares: the device and its measured bf16 peak,
    the base config (tokenizer, corpus, lr, masking), the HF settings, the step counts."""

    device: str
    peak: float
    base: PretrainConfig
    tokenizer: object
    hf_settings: dict
    compile: bool
    steps: int
    warm: int
    work: Path


def gpu_figures(args) -> list[dict]:
    """For each model and sequence length, on one device: HF Trainer at its best, then
    mlmkit at its GPU settings, from the same initial weights, on the same packed blocks,
    with the same batch, learning rate and masking (token-level 30%, 80/10/10). Prints
    tokens/s, MFU against the bf16 matmul peak measured on the device, their ratio, mlmkit's
    data-wait share and each run's peak memory; --json gets the rows as they finish."""
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    models = SMOKE_MODELS if args.smoke else GPU_MODELS
    seq_lens = args.seq_lens or ((64,) if args.smoke else GPU_SEQ_LENS)
    step_tokens = args.step_tokens or (256 if args.smoke else 32768)
    warm = 2 if args.smoke else max(2, args.warm_steps)
    steps = warm + (2 if args.smoke else args.timed_steps)
    compile = not (args.smoke or args.no_compile)
    threads = set_threads(args.threads)
    peak = matmul_peak(torch.bfloat16, device=device, seconds=0.2 if args.smoke else 2.0)
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    print(f"{name}: measured bf16 matmul peak {peak / 1e12:.1f} TFLOP/s; torch "
          f"{torch.__version__}; {threads} CPU threads; compile {'on' if compile else 'off'}")
    base = PretrainConfig(model="mini", tokenizer=args.tokenizer, corpus=args.corpus,
                          lr=args.lr, warmup=0.06, schedule="linear", dropout=0.0,
                          masking={"units": "tokens", "rate": MASK_RATE}, progress=False,
                          fill_mask_examples=0, steps=steps, threads=threads, device=device)
    bench = GpuBench(device=device, peak=peak, base=base,
                     tokenizer=resolve_tokenizer(base, show_progress=False),
                     hf_settings=hf_best_settings(device, compile), compile=compile,
                     steps=steps, warm=warm,
                     work=Path(tempfile.mkdtemp(prefix="mlmkit-bench-gpu-")))
    rows: list[dict] = []
    try:
        for seq_len in seq_lens:
            batch = max(1, step_tokens // seq_len)
            data = build_data(base.replace(seq_len=seq_len, batch_size=batch),
                              bench.tokenizer, show_progress=False)
            for label, preset in models.items():
                rows += gpu_pair(bench, label, preset, seq_len, batch, data)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1, default=str))
    except KeyboardInterrupt:  # a time limit (gpu_check.sh): the finished rows still count
        print(f"\nstopped after {len(rows)} rows")
    finally:
        shutil.rmtree(bench.work, ignore_errors=True)
    print_gpu_table(rows, device)
    return rows


@contextlib.contextmanager
def step_end_times():
    """The wall-clock time at the end of each step of mlmkit's loop (a GPU run with
    log_every 1 ends each step synchronised), as HF Trainer's steps are timed."""
    from mlmkit.pretraining.run import Run

    original, ends = Run.step, []

    def step(self, *args, **kwargs):
        original(self, *args, **kwargs)
        ends.append(time.perf_counter())

    Run.step = step
    try:
        yield ends
    finally:
        Run.step = original


def gpu_pair(bench: GpuBench, label: str, preset: str, seq_len: int, batch: int,
             data) -> list[dict]:
    """HF Trainer's row, then mlmkit's, for one model and sequence length, both from one
    saved initial model. A run that fails gives a row with its error (and its traceback
    printed): the other rows of a device session still come."""
    from transformers import AutoConfig

    init = save_init(preset, bench.tokenizer, seq_len, bench.base.seed,
                     bench.work / f"init-{preset}-{seq_len}")
    config = bench.base.replace(model=None, init=str(init), allow_untrained_head=True,
                                tokenizer=None, seq_len=seq_len, batch_size=batch)
    needed = train_flops_per_token(AutoConfig.from_pretrained(init), seq_len,
                                   read_share=MASK_RATE)
    device, steps, warm = bench.device, bench.steps, bench.warm

    def hf():
        rate = hf_rate(config, init, bench.tokenizer, data, bench.work, device,
                       bench.hf_settings, steps, warm)
        return {"tokens_per_s": rate, "mfu": rate * needed / bench.peak, "data_wait": None,
                "peak_memory": peak_memory(device),
                "settings": {"bf16": True, "attn_implementation": "sdpa",
                             **bench.hf_settings}}

    def ours():
        applied, notes = mlmkit_gpu_settings(config, bench.compile)
        rate, wait = mlmkit_rate(config, applied, notes, bench.work, steps, warm)
        return {"tokens_per_s": rate, "mfu": rate * needed / bench.peak, "data_wait": wait,
                "peak_memory": peak_memory(device), "settings": applied, "notes": notes}

    shape = {"model": label, "seq_len": seq_len, "batch_size": batch, "device": device}
    rows = []
    for system, measure in (("HF Trainer", hf), ("mlmkit", ours)):
        fresh_device_state(device, bench.compile)
        try:
            row = {**shape, "system": system, **measure()}
        except Exception as error:  # noqa: BLE001 (one failing run must not lose the rest)
            traceback.print_exc()
            row = {**shape, "system": system, "error": f"{type(error).__name__}: {error}"}
        print_gpu_row(row)
        rows.append(row)
    return rows


def hf_rate(config: PretrainConfig, init: Path, tokenizer, data, work: Path, device: str,
            settings: dict, steps: int, warm: int) -> float:
    """tokens/s of HF Trainer (bf16, sdpa and `settings`) from the saved initial model."""
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(init)
    model.set_attn_implementation("sdpa")
    rate, _, _, _ = run_hf(config, tokenizer, data, work, bf16=True, steps=steps, warm=warm,
                           model=model, device=device, **settings)
    return rate


def mlmkit_rate(config: PretrainConfig, applied: dict, notes: list[str], work: Path,
                steps: int, warm: int) -> tuple[float, float]:
    """(tokens/s, the share of the timed steps' time spent waiting for data) of mlmkit's
    loop with `applied`, its steps timed as HF Trainer's are."""
    # no plots or TensorBoard events (HF Trainer's run logs nothing either)
    with step_end_times() as ends, mock.patch("mlmkit.pretraining.run.plots_installed",
                                              return_value=False):
        result = run_mlmkit_gpu(config, applied, notes, work, steps)
    rate = step_rate(ends[-steps:], config.batch_size * config.seq_len, warm)
    train = [r for r in result.history if r["split"] == "train"]
    seconds = np.diff([r["elapsed"] for r in train])[warm - 1:]
    wait = sum(r["data_wait"] * s for r, s in zip(train[warm:], seconds, strict=True))
    return rate, float(wait / max(sum(seconds), 1e-9))


def print_gpu_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['model']} seq {row['seq_len']}, {row['system']}: failed ({row['error']})",
              flush=True)
        return
    wait = "" if row["data_wait"] is None else f", data wait {row['data_wait']:.1%}"
    print(f"{row['model']} seq {row['seq_len']} batch {row['batch_size']}, {row['system']}: "
          f"{row['tokens_per_s']:,.0f} tokens/s, MFU {row['mfu']:.1%}{wait}, peak memory "
          f"{row['peak_memory'] / 2**30:.2f} GiB", flush=True)
    if row["system"] == "mlmkit":
        print("  mlmkit settings: " + " ".join(
            f"--{flag(k)}" + ("" if v is True else f" {v}") for k, v in row["settings"].items()
            if v is not False))
        for note in row["notes"]:
            print(f"  note: {note}")


def print_gpu_table(rows: list[dict], device: str) -> None:
    """One line per model and sequence length: both systems side by side."""
    memory = "peak GiB" if device.startswith("cuda") else "RSS GiB"
    print(f"\n{'model':<16} {'seq':>5} {'mlmkit tok/s':>13} {'HF tok/s':>10} {'ratio':>6} "
          f"{'MFU mlmkit':>11} {'MFU HF':>7} {'data wait':>10} {memory + ' mlmkit / HF':>20}")
    pairs = {}
    for row in rows:
        pairs.setdefault((row["model"], row["seq_len"]), {})[row["system"]] = row
    for (model, seq_len), pair in pairs.items():
        ours, hf = pair.get("mlmkit"), pair.get("HF Trainer")
        if ours is None or hf is None or "error" in ours or "error" in hf:
            print(f"{model:<16} {seq_len:>5} (a run failed or was stopped: see above)")
            continue
        print(f"{model:<16} {seq_len:>5} {ours['tokens_per_s']:>13,.0f} "
              f"{hf['tokens_per_s']:>10,.0f} {ours['tokens_per_s'] / hf['tokens_per_s']:>5.2f}× "
              f"{ours['mfu']:>11.1%} {hf['mfu']:>7.1%} {ours['data_wait']:>10.1%} "
              f"{ours['peak_memory'] / 2**30:>9.2f} / {hf['peak_memory'] / 2**30:<8.2f}")
    print("MFU: the FLOPs the task needs (benchmarks/flops.py, the same for both) over the "
          "bf16 matmul peak measured on this device. Targets on a GPU: mlmkit ≥ 40% MFU at "
          "seq 1,024, ≥ 1.5× HF Trainer, data wait < 2% of the step.")


if __name__ == "__main__":
    main()
