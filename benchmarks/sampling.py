"""Benchmark: the speed–quality curve of mlmkit's reveal policies, remasking, editing and
block cache, in one run.

A small masked LM (ModernBERT-tiny: 2 pre-LN layers, 128 wide, rotary positions) is
trained on the first half of Tiny Shakespeare's training part with a random masking rate
per sequence (as masked diffusion trains), and a separate judge model on the second half.
The vocabulary is characters (a WordPiece trained with `--vocab 64` keeps only its
alphabet: each character, and each as a `##` word continuation; MDLM and SEDD use text8
characters): within a word a character is near-certain given its neighbours, so the model
becomes confident, and adjacent masked characters revealed in one step conflict, which is
what the adaptive policies exploit. (A post-LN bert-tiny with learned
absolute positions stays at the unigram stage for the first thousand-odd steps on this
budget; the pre-LN rotary model leaves it within a few hundred.) Before any sampling the
run checks that the model uses context: its held-out accuracy at 15 % random masks, and on
the infilling spans, beside the unigram baseline (the most frequent training token
everywhere). On held-out text (the last 10%), every policy and setting is run:

- infilling: a 16-token span in the middle of a 48-token window, and four 4-token spans
  in a 64-token window, argmax choice; two scores: token accuracy (the fraction of span
  tokens equal to the true text) and exact spans (the fraction of spans filled exactly).
  Token accuracy cannot reward sequential steps: under the model, the argmax of each
  position's marginal (everything in one call) is the choice that maximises the expected
  number of right tokens; one token per step aims at the joint's mode, which exact spans
  reward. Standard errors are over tokens and spans; comparisons are paired over windows;
- continuation: 32 tokens after a 16-token prompt, temperature 0.8; quality is the judge's
  pseudo-perplexity of the continuation given the prompt, and distinct-2 (repetition);
- the cost: model calls (NFE) per batch, tokens per call and tokens per second.

The policies: the fixed count (one to sixteen tokens per call), threshold, factor and
entropy-bound, the same three spaced (`min_gap`: masks revealed together lie at least 4 or
8 apart, so each gap's characters come in turn and separate gaps together), ReMDM
remasking and editing. `--device cuda` trains (bf16 autocast) and samples on a GPU.

The fixed-count sampler at one token per step is the baseline. The floor: an adaptive
policy whose score is within two paired standard errors of it, with 3x fewer calls, on a
task where fewer fixed-count calls lose quality (else the curve is flat and says nothing).
MFU (benchmarks/flops.py): the FLOPs each sampler's own calls needed per CPU second, over a
matmul peak measured in the run at its threads. The block
cache is measured on longer continuations (96 tokens in blocks of 8): wall time, token
agreement with the exact loop and the largest log-probability error of a cached call.

    nice .venv/bin/python benchmarks/sampling.py --threads 1 --windows 256 \
        --plot docs/img/diffusion_sampling.png --json sampling.json

The run in docs/benchmarks.md continues that 4,000-step model for 24,000 more steps (--init, a fresh
warm-up and decay; 44 CPU-minutes at one thread) and samples from it:

    nice .venv/bin/python benchmarks/sampling.py --threads 1 --train-only model
    nice .venv/bin/python benchmarks/sampling.py --threads 1 --windows 256 \
        --init sampler-v64-modernbert-tiny-steps4000-batch32-lr0.003-seed0 --steps 24000 \
        --plot docs/img/diffusion_sampling.png --json sampling.json

The trained models are cached under $MLMKIT_CACHE/benchmarks/diffusion_sampling (a rerun
with the same settings reuses them; --retrain trains again); `--model PATH` / `--judge
PATH` take already trained models instead (any masked LM directory whose tokenizer is
saved with it).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import shutil
import time
from pathlib import Path

import torch
from flops import forward_flops, matmul_peak, mfu, mfu_text

from mlmkit.core.cache import cache_dir
from mlmkit.generation.canvas import MASK, PROMPT, Segment
from mlmkit.generation.options import SamplerOptions
from mlmkit.generation.pll import token_pll
from mlmkit.generation.unmask import unmask_rows
from mlmkit.models import LoadedMLM, build_mlm, masked_logits
from mlmkit.models.block_cache import BlockCache
from mlmkit.tokenizer import train_tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare" / "input.txt"
WINDOW, SPAN_START, SPAN = 48, 16, 16
SHORT_WINDOW, SHORT_SPANS, SHORT_SPAN = 64, 4, 4  # four 4-token spans, one per 16 tokens
PROMPT_LEN, CONTINUATION = 16, 32

ADAPTIVE = ("threshold", "factor", "entropy-bound", "spaced threshold", "spaced factor",
            "spaced entropy-bound")
"""The policies whose reveals per step follow the predictions (the floor's candidates)."""

SETTINGS = [
    ("count", {"steps": 16}), ("count", {"steps": 8}), ("count", {"steps": 4}),
    ("count", {"steps": 2}), ("count", {"steps": 1}),
    ("threshold", {"reveal": "threshold", "threshold": 0.9}),
    ("threshold", {"reveal": "threshold", "threshold": 0.7}),
    ("threshold", {"reveal": "threshold", "threshold": 0.5}),
    ("threshold", {"reveal": "threshold", "threshold": 0.3}),
    ("factor", {"reveal": "factor", "factor": 0.5}),
    ("factor", {"reveal": "factor", "factor": 1.0}),
    ("factor", {"reveal": "factor", "factor": 2.0}),
    ("factor", {"reveal": "factor", "factor": 4.0}),
    ("factor", {"reveal": "factor", "factor": 8.0}),
    ("entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 0.1}),
    ("entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 0.5}),
    ("entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 1.0}),
    ("entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 2.0}),
    ("entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 4.0}),
    # spaced reveals (--min-gap): masks revealed together lie at least 4 / 8 apart
    ("spaced threshold", {"reveal": "threshold", "threshold": 0.5, "min_gap": 4}),
    ("spaced threshold", {"reveal": "threshold", "threshold": 0.1, "min_gap": 4}),
    ("spaced factor", {"reveal": "factor", "factor": 4.0, "min_gap": 4}),
    ("spaced factor", {"reveal": "factor", "factor": 16.0, "min_gap": 4}),
    ("spaced entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 1.0, "min_gap": 4}),
    ("spaced entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 4.0, "min_gap": 4}),
    ("spaced entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 64.0, "min_gap": 4}),
    ("spaced entropy-bound", {"reveal": "entropy-bound", "entropy_bound": 64.0, "min_gap": 8}),
    ("remask", {"steps": 16, "remask": "cap", "sigma": 0.05}),
    ("remask", {"steps": 16, "remask": "loop", "sigma": 0.1, "remask_steps": 8}),
    ("edit", {"reveal": "threshold", "threshold": 0.7, "edit": 0.9}),
]


CORPORA = ("shakespeare", "python-docs")


def corpus_text(corpus: str) -> tuple[str, str]:
    """(training text, held-out text) of `corpus`: Tiny Shakespeare cut at 90%, or the
    built-in corpus's train and validation documents (one per line)."""
    if corpus == "python-docs":
        from mlmkit.corpus.python_docs import python_docs

        return ("\n".join(python_docs("train")), "\n".join(python_docs("validation")))
    if not DATA.is_file():
        raise SystemExit(f"Tiny Shakespeare is not at {DATA} (see ../shared/data/README.md)")
    text = DATA.read_text(encoding="utf-8")
    cut = int(len(text) * 0.9)
    return text[:cut], text[cut:]


def token_stream(tokenizer, text: str) -> list[int]:
    ids = []
    for start in range(0, len(text), 100_000):
        ids += tokenizer(text[start:start + 100_000], add_special_tokens=False,
                         verbose=False)["input_ids"]
    return ids


def train(mlm: LoadedMLM, stream: list[int], steps: int, seed: int, batch: int = 32, lr: float = 3e-3,
          length: int = 62, warmup: int = 100) -> float:
    """A short masked-diffusion training run: per sequence a masking rate t ~ U(0.05, 1),
    each token masked with probability t, cross-entropy at the masked positions."""
    tok, model, device = mlm.tokenizer, mlm.model, mlm.device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01,
                                  betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.05, 1 - s / steps))
    data = torch.tensor(stream)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        if step and step % 100 == 0:
            print(f"  step {step}/{steps}: loss {loss_value:.3f}", flush=True)
        starts = torch.randint(0, len(data) - length, (batch,), generator=generator)
        body = torch.stack([data[s:s + length] for s in starts.tolist()])
        ids = torch.cat([torch.full((batch, 1), tok.cls_token_id), body,
                         torch.full((batch, 1), tok.sep_token_id)], 1)
        rate = torch.rand(batch, 1, generator=generator) * 0.95 + 0.05
        masked = torch.rand(ids.shape, generator=generator) < rate
        masked[:, 0] = masked[:, -1] = False
        ids, masked = ids.to(device), masked.to(device)
        targets = ids[masked]
        inputs = ids.masked_fill(masked, tok.mask_token_id)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = masked_logits(model, inputs, torch.ones_like(inputs), masked)
        loss = torch.nn.functional.cross_entropy(logits.float(), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        loss_value = loss.item()
    model.eval()
    return loss_value


def trained(name: str, tokenizer, stream, steps: int, seed: int, retrain: bool,
            root: Path, batch: int, preset: str = "modernbert-tiny", lr: float = 3e-3,
            layers: int | None = None, init: Path | None = None, device: str = "cpu") -> LoadedMLM:
    """A model trained for `steps` steps and cached under a name that says how. With `init`
    (a saved model directory), training starts from its weights, with a fresh warm-up and
    decay, instead of from random ones: the cache name then ends in `-from-<init's name>`
    (whose own name says how it was trained), and `--steps` counts only the added steps."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    shape = preset if layers is None else f"{preset}-{layers}layers"
    if init is not None:
        shape = "init"  # the shape is the init model's, named in the suffix
    path = root / (f"{name}-{shape}-steps{steps}-batch{batch}-lr{lr:g}-seed{seed}"
                   + (f"-from-{init.name}" if init is not None else ""))
    # (a cached model without its tokenizer predates the fix above: trained again)
    if (path / "tokenizer.json").is_file() and not retrain:
        model = AutoModelForMaskedLM.from_pretrained(path).eval().to(device)
        return LoadedMLM(model=model, tokenizer=AutoTokenizer.from_pretrained(path), name=name)
    if init is not None:
        if not (init / "tokenizer.json").is_file():
            raise SystemExit(f"--init {init}: not a saved model directory with its tokenizer")
        if AutoTokenizer.from_pretrained(init).get_vocab() != tokenizer.get_vocab():
            raise SystemExit(f"--init {init}: its tokenizer is not this run's (other ids)")
        model = AutoModelForMaskedLM.from_pretrained(init)
    elif layers is None:
        model = build_mlm(preset, tokenizer, max_length=128, seed=seed)
    else:  # the preset's width with another depth (its per-layer attention kinds re-derived)
        from mlmkit.models.presets import preset_config

        values = preset_config(preset, tokenizer, max_length=128).to_dict()
        values.update(num_hidden_layers=layers)
        values.pop("layer_types", None)
        config = type(preset_config(preset, tokenizer, max_length=128))(**values)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForMaskedLM.from_config(config)
    mlm = LoadedMLM(model=model.to(device), tokenizer=tokenizer, name=name)
    started, cpu = time.perf_counter(), time.process_time()
    # (continued training draws other batches than the init model's run drew)
    loss = train(mlm, stream, steps, seed if init is None else seed + 1, batch=batch,
                 lr=lr)
    print(f"trained {path.name}: {steps} steps of {batch} sequences in "
          f"{time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} s CPU, "
          f"last loss {loss:.3f}", flush=True)
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)  # the ids the model learned travel with it
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)  # whole, so a concurrent run (e.g. one warming the judge) sees it or not
    return mlm


def init_path(init: str | None, root: Path) -> Path | None:
    """--init: a model directory, or the name of one in this benchmark's cache."""
    if init is None:
        return None
    path = Path(init)
    if not path.exists() and (root / init).exists():
        path = root / init
    return path.resolve()


def cached_tokenizer(text: str, path: Path, vocab: int, retrain: bool):
    """The benchmark's WordPiece tokenizer, trained once and then read back: training is
    not deterministic across processes (the ids of equally frequent pieces change), so a
    cached model must never meet a freshly trained tokenizer."""
    from transformers import AutoTokenizer

    if (path / "tokenizer.json").is_file() and not retrain:
        return AutoTokenizer.from_pretrained(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    train_tokenizer([line for line in text.splitlines() if line.strip()], tmp,
                    kind="wordpiece", vocab_size=vocab, show_progress=False)
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)
    return AutoTokenizer.from_pretrained(path)


def loaded(path: str, name: str, device: str = "cpu") -> LoadedMLM:
    from mlmkit.models import load_mlm

    mlm = load_mlm(path, device=device)
    mlm.model.eval()
    return mlm


CONFIDENCE_LEVELS = (0.5, 0.7, 0.9, 0.99)


def confidence_shares(top: torch.Tensor, right: torch.Tensor) -> dict:
    """Per level: the share of masks whose top probability `top` passes it, and how often
    those are `right` (what `threshold` and `entropy-bound` can reveal at once)."""
    return {f"{level:g}": {"share": float((top > level).float().mean()),
                           "accuracy": float(right[top > level].float().mean())
                           if bool((top > level).any()) else float("nan")}
            for level in CONFIDENCE_LEVELS}


def context_check(mlm: LoadedMLM, test: list[int], unigram: int, rows: int = 256, length: int = 62,
                  rate: float = 0.15) -> dict:
    """Held-out accuracy at `rate` random masks (the same rows and masks for every model),
    beside the unigram baseline on those masks: a model that uses context is clearly above."""
    tok = mlm.tokenizer
    generator = torch.Generator().manual_seed(1)
    data = torch.tensor(test)
    starts = torch.randint(0, len(data) - length, (rows,), generator=generator)
    body = torch.stack([data[s:s + length] for s in starts.tolist()])
    ids = torch.cat([torch.full((rows, 1), tok.cls_token_id), body,
                     torch.full((rows, 1), tok.sep_token_id)], 1)
    masked = torch.rand(ids.shape, generator=generator) < rate
    masked[:, 0] = masked[:, -1] = False
    ids, masked = ids.to(mlm.device), masked.to(mlm.device)
    with torch.inference_mode():
        logits = masked_logits(mlm.model, ids.masked_fill(masked, tok.mask_token_id), None,
                               masked).float()
    truth = ids[masked]
    n = int(truth.numel())
    right = logits.argmax(-1) == truth
    accuracy = float(right.float().mean())
    top = logits.softmax(-1).max(-1).values
    confident = confidence_shares(top, right)
    return {"masks": n, "accuracy": accuracy, "se": math.sqrt(accuracy * (1 - accuracy) / n),
            "loss": float(torch.nn.functional.cross_entropy(logits, truth)),
            "unigram_accuracy": float((truth == unigram).float().mean()),
            "top_p_median": float(top.median()), "confident": confident}


class RowCalls:
    """Model calls per row of a batched run: a row costs a call at every step that still had
    a mask of its own (its cost when decoded alone; the batch runs until its slowest row is
    done). An edit-only step (no masks left in the batch) counts for every row."""

    def __init__(self, rows: int, config=None):
        self.calls = [0] * rows
        self.config = config
        self.flops = 0.0
        """The FLOPs the run needed (benchmarks/flops.py): per row per call that it paid,
        one forward of the row read at the positions the step could reveal (its masks
        before the step; every content position where edits are on)."""

    def __call__(self, event) -> None:
        remasked = event.remasked if event.remasked is not None else torch.zeros_like(
            event.masked)
        before = (event.masked & ~remasked) | event.revealed
        had = before.any(1)
        if not bool(had.any()):
            had = torch.ones_like(had)
        reads = (event.content if event.edited is not None else before).sum(1).tolist()
        length = event.ids.shape[1]
        for row in torch.nonzero(had).flatten().tolist():
            self.calls[event.first_row + row] += 1
            if self.config is not None:
                self.flops += forward_flops(self.config, length, max(1, reads[row]))

    def mean(self) -> float:
        return sum(self.calls) / len(self.calls)


def long_span_task(windows) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """One 16-token span in the middle of each 48-token window."""
    return [(w, [(SPAN_START, SPAN)]) for w in windows]


def short_spans_task(windows, rng: random.Random):
    """Four 4-token spans per 64-token window, one in each quarter, at least 2 tokens from
    the quarter's edges (16 masks, as in the long-span task)."""
    quarter = SHORT_WINDOW // SHORT_SPANS
    return [(w, [(q * quarter + rng.randint(2, quarter - SHORT_SPAN - 2), SHORT_SPAN)
                 for q in range(SHORT_SPANS)]) for w in windows]


def first_call_confidence(mlm: LoadedMLM, task) -> dict:
    """The model's top probability at every span mask of `task` in the first call (all
    spans masked): the share above each level and how often those are right. This is what
    `threshold` (and, through the entropies, `entropy-bound`) can reveal in one call."""
    tok = mlm.tokenizer
    ids = torch.tensor([[tok.cls_token_id] + window + [tok.sep_token_id]
                        for window, _ in task])
    masked = torch.zeros_like(ids, dtype=torch.bool)
    for row, (_, spans) in enumerate(task):
        for start, length in spans:
            masked[row, 1 + start:1 + start + length] = True
    ids, masked = ids.to(mlm.device), masked.to(mlm.device)
    with torch.inference_mode():
        logits = masked_logits(mlm.model, ids.masked_fill(masked, tok.mask_token_id), None,
                               masked).float()
    top = logits.softmax(-1).max(-1).values
    right = logits.argmax(-1) == ids[masked]
    return confidence_shares(top, right) | {"top_p_median": float(top.median())}


def infill_eval(mlm, task, options) -> dict:
    """Argmax infilling of every span of `task` [(window, [(start, length)])]: accuracy (±
    its standard error over tokens), NFE per sequence and of the batched run, tokens/s."""
    mask = mlm.tokenizer.mask_token_id
    rows, truths = [], []
    for window, spans in task:
        row, truth, at = [], [], 0
        for start, length in spans:
            row += [Segment(PROMPT, window[at:start]), Segment(MASK, [mask] * length)]
            truth += window[start:start + length]
            at = start + length
        rows.append(row + [Segment(PROMPT, window[at:])])
        truths.append(truth)
    masks = len(truths[0])
    calls = RowCalls(len(rows), mlm.model.config)
    started, cpu = time.perf_counter(), time.process_time()
    batches = unmask_rows(mlm, rows, options, default_steps=masks, allow_eos=False,
                          what="window", rows=len(rows), precision="fp32", progress=False,
                          on_step=calls)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    right = total = spans_right = spans_total = 0
    per_window = [0.0] * len(rows)
    per_window_spans = [0.0] * len(rows)
    for batch in batches:
        for row in range(batch.ids.shape[0]):
            truth = truths[batch.first + row]
            got = batch.ids[row][batch.canvas.masked[row]].tolist()
            hits = sum(a == b for a, b in zip(got, truth, strict=True))
            per_window[batch.first + row] = hits / len(truth)
            right += hits
            total += len(truth)
            at, whole = 0, 0  # spans filled exactly (every token of the span right)
            for _, length in task[batch.first + row][1]:
                whole += got[at:at + length] == truth[at:at + length]
                at += length
            per_window_spans[batch.first + row] = whole / len(task[batch.first + row][1])
            spans_right += whole
            spans_total += len(task[batch.first + row][1])
    accuracy = right / total
    exact = spans_right / spans_total
    batch_nfe = sum(b.model_calls for b in batches) / len(batches)
    nfe = calls.mean()
    return {"accuracy": accuracy, "se": math.sqrt(accuracy * (1 - accuracy) / total),
            "exact": exact, "exact_se": math.sqrt(exact * (1 - exact) / spans_total),
            "per_window_exact": per_window_spans, "nfe": nfe, "batch_nfe": batch_nfe, "tokens_per_call": masks / nfe,
            "tokens_per_s": total / seconds, "seconds": seconds, "cpu_seconds": cpu,
            "flops": calls.flops, "per_window": per_window}


def paired_se(a: list[float], b: list[float]) -> float:
    """Standard error of mean(a) - mean(b) over paired windows (the same spans under two
    settings; tokens of one span are not independent, so the window is the unit)."""
    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(d) / len(d)
    return math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))


def span_unigram_accuracy(task, unigram: int) -> float:
    """The infilling spans' accuracy of the unigram baseline (its token at every mask)."""
    truth = [t for w, spans in task for start, length in spans for t in w[start:start + length]]
    return sum(t == unigram for t in truth) / len(truth)


def span_unigram_exact(task, unigram: int) -> float:
    """The share of spans the unigram baseline fills exactly (spans of that token only)."""
    spans = [w[start:start + length] for w, spans in task for start, length in spans]
    return sum(all(t == unigram for t in span) for span in spans) / len(spans)


METRICS = {"accuracy": ("per_window", "se", "token accuracy"),
           "exact": ("per_window_exact", "exact_se", "spans filled exactly")}


def floor_check(results, key: str, name: str, unigram: float, metric: str = "accuracy") -> dict:
    """The floor on task `key` under `metric` (token accuracy, or the share of spans filled
    exactly): the adaptive setting with the fewest calls per sequence whose score is within
    2 paired standard errors (over windows) of one token per step."""
    per, se, words = METRICS[metric]
    base = results[0][key]
    diff = f"{metric}_diff_se"
    for r in results:
        r[key][diff] = 0.0 if r is results[0] else paired_se(base[per], r[key][per])
    fair = [r for r in results if r["policy"] in ADAPTIVE
            and r[key][metric] >= base[metric] - 2 * r[key][diff]]
    best = max(fair, key=lambda r: base["nfe"] / r[key]["nfe"], default=None)
    summary = {"metric": metric, "baseline_nfe": base["nfe"],
               "baseline_batch_nfe": base["batch_nfe"], "baseline_score": base[metric],
               "baseline_se": base[se], "unigram_score": unigram,
               "context_shown": base[metric] > unigram + 2 * base[se]}
    print(f"\n{name}, {words}: one token per step scores {base[metric]:.3f} ± {base[se]:.3f} "
          f"(unigram baseline {unigram:.3f}) in {base['nfe']:.0f} calls; adaptive settings "
          f"(gap to it in paired standard errors over windows):")
    for r in results:
        if r["policy"] in ADAPTIVE:
            gap = base[metric] - r[key][metric]
            print(f"  {r['policy']:<22}{str(r['setting']):<70} NFE {r[key]['nfe']:5.1f} "
                  f"({base['nfe'] / r[key]['nfe']:.1f}x fewer), {metric} "
                  f"{r[key][metric]:.3f}, gap {gap:+.3f} = "
                  f"{gap / max(r[key][diff], 1e-12):+.1f} se"
                  f"{' (equal)' if r in fair else ''}")
    if not summary["context_shown"]:
        print("  one token per step is not above the unigram baseline here: no speed-quality "
              "claim follows on this task")
    fewest = min((r for r in results if r["policy"] == "count"), key=lambda r: r[key]["nfe"])
    summary["fewest_count_nfe"] = fewest[key]["nfe"]
    summary["fewest_count_score"] = fewest[key][metric]
    summary["flat_curve"] = fewest[key][metric] >= base[metric] - 2 * fewest[key][diff]
    if summary["flat_curve"]:
        print(f"  the fixed-count sampler at {fewest[key]['nfe']:.0f} calls scores as well "
              f"({fewest[key][metric]:.3f}): the score does not rise with calls here, so "
              f"fewer calls at an equal score says nothing about an adaptive policy")
    else:
        print(f"  the fixed-count sampler at {fewest[key]['nfe']:.0f} calls scores "
              f"{fewest[key][metric]:.3f}, {(base[metric] - fewest[key][metric]) / max(fewest[key][diff], 1e-12):.1f} "
              f"paired se below one token per step: parallel reveals lose quality here")
    # What the fixed-count sampler itself saves at an equal score: its fewest-call setting
    # within 2 paired se of one token per step. An adaptive policy earns its keep only
    # where it goes clearly below that.
    same = [r for r in results if r["policy"] == "count"
            and r[key][metric] >= base[metric] - 2 * r[key][diff]]
    cheapest = min(same, key=lambda r: r[key]["nfe"])
    summary.update(count_equal_nfe=cheapest[key]["nfe"],
                   count_equal_score=cheapest[key][metric])
    print(f"  the fixed-count sampler itself keeps an equal score down to "
          f"{cheapest[key]['nfe']:.0f} calls ({cheapest[key][metric]:.3f}, "
          f"{base['nfe'] / cheapest[key]['nfe']:.1f}x fewer)")
    if best is None:
        print("  no adaptive setting reached its score within 2 se")
        summary["floor_met"] = False
        return summary
    ratio = base["nfe"] / best[key]["nfe"]
    batch_ratio = base["batch_nfe"] / best[key]["batch_nfe"]
    summary.update(best_policy=best["policy"], best_setting=best["setting"],
                   best_nfe=best[key]["nfe"], best_batch_nfe=best[key]["batch_nfe"],
                   best_score=best[key][metric], best_diff_se=best[key][diff],
                   call_ratio=ratio, batch_call_ratio=batch_ratio,
                   floor_met=ratio >= 3 and summary["context_shown"]
                   and not summary["flat_curve"])
    print(f"  at an equal score: {best['policy']} {best['setting']} needs "
          f"{best[key]['nfe']:.1f} calls per sequence vs {base['nfe']:.1f}: {ratio:.1f}x fewer "
          f"(floor 3x: {'met' if summary['floor_met'] else 'NOT met'}); batched: "
          f"{best[key]['batch_nfe']:.0f} vs {base['batch_nfe']:.0f} calls ({batch_ratio:.1f}x); "
          f"vs the fixed-count sampler's own equal-score setting: "
          f"{cheapest[key]['nfe'] / best[key]['nfe']:.1f}x fewer calls")
    summary["ratio_to_count_equal"] = cheapest[key]["nfe"] / best[key]["nfe"]
    return summary


def distinct_2(sequences) -> float:
    grams = [tuple(s[i:i + 2]) for s in sequences for i in range(len(s) - 1)]
    return len(set(grams)) / max(1, len(grams))


def continuation_eval(mlm, judge, prompts, options, length=CONTINUATION,
                      rows_per_batch=None) -> dict:
    mask = mlm.tokenizer.mask_token_id
    rows = [[Segment(PROMPT, p), Segment(MASK, [mask] * length)] for p in prompts]
    calls = RowCalls(len(rows), mlm.model.config)
    started, cpu = time.perf_counter(), time.process_time()
    batches = unmask_rows(mlm, rows, options, default_steps=length, allow_eos=False,
                          what="prompt", rows=rows_per_batch or len(rows), precision="fp32",
                          progress=False, on_step=calls)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    generated = []
    for batch in batches:
        for row in range(batch.ids.shape[0]):
            generated.append(batch.ids[row][batch.canvas.masked[row]].tolist())
    scores = token_pll(judge, [p + g for p, g in zip(prompts, generated, strict=True)])
    pll = [float(s[len(p):].mean()) for s, p in zip(scores, prompts, strict=True)]
    return {"judge_pppl": math.exp(-sum(pll) / len(pll)), "distinct_2": distinct_2(generated),
            "nfe": calls.mean(),
            "batch_nfe": sum(b.model_calls for b in batches) / len(batches), "tokens_per_s": len(prompts) * length / seconds, "seconds": seconds,
            "cpu_seconds": cpu, "flops": calls.flops,
            "generated": generated}


def cache_error(mlm, prompts, block_length: int) -> float:
    """Largest |log p| difference between the cached and the exact encoder at a block's
    masks, after half the block has been filled with the exact argmax."""
    from mlmkit.models import adapter_for

    tok, model = mlm.tokenizer, mlm.model
    ids = torch.tensor([[tok.cls_token_id] + p + [tok.mask_token_id] * 32 + [tok.sep_token_id]
                        for p in prompts]).to(mlm.device)
    attention = torch.ones_like(ids)
    start = 1 + len(prompts[0])
    block = slice(start, start + block_length)
    with torch.inference_mode():
        cache = BlockCache(model)
        cache.refresh(ids, attention)
        filled = ids.clone()
        exact = adapter_for(model).encode(model, filled, attention)
        first = slice(start, start + block_length // 2)
        filled[:, first] = adapter_for(model).head(model, exact[:, first]).argmax(-1)
        rest = slice(start + block_length // 2, start + block_length)
        truth = adapter_for(model).encode(model, filled, attention)[:, rest]
        approx = cache.window(filled, block)[:, block_length // 2:]
        head = adapter_for(model).head
        difference = (torch.log_softmax(head(model, approx), -1)
                      - torch.log_softmax(head(model, truth), -1)).abs()
    return float(difference.max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="modernbert-tiny", help="the model's preset")
    parser.add_argument("--layers", type=int, default=None,
                        help="the model's depth, when not the preset's (its width is kept)")
    parser.add_argument("--judge-preset", default="modernbert-tiny", help="the judge's preset")
    parser.add_argument("--steps", type=int, default=4000, help="training steps of the model")
    parser.add_argument("--judge-steps", type=int, default=800,
                        help="training steps of the judge")
    parser.add_argument("--batch", type=int, default=32, help="training sequences per step")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--init", default=None,
                        help="continue training from this saved model (a directory, or a "
                        "model's name in the cache; same tokenizer) for --steps more steps, "
                        "with a fresh warm-up and decay, instead of from scratch")
    parser.add_argument("--model", default=None, help="a trained masked LM to sample from "
                        "(instead of training one; its own tokenizer is used)")
    parser.add_argument("--judge", default=None, help="a trained judge (same tokenizer)")
    parser.add_argument("--train-only", choices=("model", "judge"), default=None,
                        help="train (and cache) this model, then stop: to train the judge "
                        "in a second process beside the model")
    parser.add_argument("--vocab", type=int, default=64, help="WordPiece vocabulary (64: "
                        "characters only, with and without ##; larger: pieces)")
    parser.add_argument("--windows", type=int, default=96, help="held-out infilling spans")
    parser.add_argument("--prompts", type=int, default=32, help="held-out prompts")
    parser.add_argument("--corpus", choices=CORPORA, default="shakespeare",
                        help="shakespeare: Tiny Shakespeare (90%% train, 10%% held out); "
                             "python-docs: mlmkit's built-in corpus (its train and "
                             "validation splits)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda: where the models train "
                        "(bf16 autocast on a GPU) and sample; MFU and speeds then use the "
                        "wall clock")
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--plot", default=None, help="write the curves to this PNG")
    parser.add_argument("--json", default=None, help="write every figure to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train_text, test_text = corpus_text(args.corpus)
    # Tiny Shakespeare's cache names carry no corpus (they predate --corpus)
    tag = "" if args.corpus == "shakespeare" else f"-{args.corpus}"
    root = cache_dir("benchmarks", "diffusion_sampling")
    tokenizer = cached_tokenizer(train_text, root / f"tokenizer-{args.vocab}{tag}", args.vocab,
                                 args.retrain and args.train_only != "judge")
    if args.model:
        mlm = loaded(args.model, "sampler", args.device)
        tokenizer = mlm.tokenizer
    stream = token_stream(tokenizer, train_text)
    half = len(stream) // 2
    if args.train_only != "judge" and not args.model:
        mlm = trained(f"sampler-v{args.vocab}{tag}", tokenizer, stream[:half], args.steps, 0,
                      args.retrain, root, args.batch, args.preset, args.lr, args.layers,
                      init_path(args.init, root), args.device)
    if args.train_only == "model":
        return
    if args.judge:
        judge = loaded(args.judge, "judge", args.device)
    else:
        judge = trained(f"judge-v{args.vocab}{tag}", tokenizer, stream[half:], args.judge_steps, 1,
                        args.retrain, root, args.batch, args.judge_preset, args.lr,
                        device=args.device)
    if args.train_only == "judge":
        return

    test = token_stream(tokenizer, test_text)
    unigram = collections.Counter(stream).most_common(1)[0][0]
    checks = {name: context_check(model, test, unigram)
              for name, model in (("model", mlm), ("judge", judge))}
    for name, check in checks.items():
        print(f"context check ({name}): held-out accuracy at 15% random masks "
              f"{check['accuracy']:.3f} ± {check['se']:.3f} (loss {check['loss']:.3f}) vs "
              f"{check['unigram_accuracy']:.3f} for the unigram baseline "
              f"({check['masks']} masks); top probability: median {check['top_p_median']:.2f}, "
              + ", ".join(f"> {level}: {c['share']:.1%} of masks ({c['accuracy']:.0%} right)"
                          for level, c in check["confident"].items()), flush=True)
    rng = random.Random(0)
    windows = [test[s:s + WINDOW] for s in rng.sample(range(len(test) - WINDOW), args.windows)]
    prompts = [test[s:s + PROMPT_LEN]
               for s in rng.sample(range(len(test) - PROMPT_LEN), args.prompts)]
    short = [test[s:s + SHORT_WINDOW]
             for s in rng.sample(range(len(test) - SHORT_WINDOW), args.windows)]
    tasks = {"infill": long_span_task(windows), "infill_short": short_spans_task(short, rng)}
    names = {"infill": f"one {SPAN}-token span in a {WINDOW}-token window",
             "infill_short": f"{SHORT_SPANS} spans of {SHORT_SPAN} tokens in a "
                             f"{SHORT_WINDOW}-token window"}
    unigram_scores = {key: span_unigram_accuracy(task, unigram) for key, task in tasks.items()}
    unigram_exact = {key: span_unigram_exact(task, unigram) for key, task in tasks.items()}
    for key in tasks:
        print(f"infilling, {names[key]} ({args.windows} windows): the unigram baseline "
              f"({tokenizer.convert_ids_to_tokens([unigram])[0]!r} everywhere) scores "
              f"{unigram_scores[key]:.3f} of tokens, {unigram_exact[key]:.3f} of spans exactly",
              flush=True)
    first_call = {key: first_call_confidence(mlm, task) for key, task in tasks.items()}
    for key, shares in first_call.items():
        print(f"first call, {names[key]}: top probability median {shares['top_p_median']:.2f}, "
              + ", ".join(f"> {level}: {c['share']:.1%} of masks ({c['accuracy']:.0%} right)"
                          for level, c in shares.items() if level != "top_p_median"),
              flush=True)
    # MFU: the matmul peak per CPU second of this process, at the run's threads (the
    # samplers are timed in CPU seconds too: the machine may be shared).
    gpu = args.device.startswith("cuda")
    peak = matmul_peak(threads=args.threads, clock=time.process_time, device=args.device)
    spent = "seconds" if gpu else "cpu_seconds"  # a GPU's work is not this process's CPU

    results = []
    print("NFE: model calls per sequence (a row's calls while it has masks: its cost alone); "
          "batch: calls of the whole batched run (until its slowest row is done)")
    print("acc: token accuracy; exact: spans filled exactly (± standard errors); MFU: the "
          "model FLOPs the run needed per CPU second over the matmul peak")
    print(f"{'':<56}{'--- one 16-token span ---':^46}{'--- four 4-token spans ---':^46}"
          f"{'--- continuation ---':^27}")
    print(f"{'policy':<22}{'setting':<34}"
          + f"{'NFE':>6}{'batch':>6}{'acc':>7}{'±se':>6}{'exact':>7}{'±se':>6}{'tok/s':>8}"
            f"{'':>1}" * 2
          + f"{'NFE':>6}{'judge PPPL':>11}{'dist-2':>7}{'MFU':>7}", flush=True)
    for policy, setting in SETTINGS:
        infill_options = SamplerOptions(temperature=0, **setting)
        fills = {key: infill_eval(mlm, task, infill_options) for key, task in tasks.items()}
        gen_setting = dict(setting)
        if "steps" in gen_setting:  # the same tokens per step on the 32-token continuation
            gen_setting["steps"] = gen_setting["steps"] * CONTINUATION // SPAN
            if gen_setting.get("remask_steps"):
                gen_setting["remask_steps"] *= CONTINUATION // SPAN
        cont = continuation_eval(mlm, judge, prompts,
                                 SamplerOptions(temperature=0.8, seed=0, **gen_setting))
        label = ", ".join(f"{k}={v}" for k, v in setting.items()
                          if k != "reveal").replace("remask_steps=", "+").replace(
                              "remask=", "")
        results.append({"policy": policy, "setting": setting, **fills,
                        "continuation": {k: v for k, v in cont.items() if k != "generated"}})
        work = [fills["infill"], fills["infill_short"], cont]
        results[-1]["mfu"] = mfu(sum(w["flops"] for w in work),
                                 sum(w[spent] for w in work), peak)
        print(f"{policy:<22}{label:<34}" + "".join(
            f"{f['nfe']:>6.1f}{f['batch_nfe']:>6.0f}{f['accuracy']:>7.3f}{f['se']:>6.3f}"
            f"{f['exact']:>7.3f}{f['exact_se']:>6.3f}{f['tokens_per_s']:>8.0f} "
            for f in fills.values())
            + f"{cont['nfe']:>6.1f}{cont['judge_pppl']:>11.1f}{cont['distinct_2']:>7.2f}"
            f"{100 * results[-1]['mfu']:>6.1f}%", flush=True)

    summary = {"context_check": checks, "first_call_confidence": first_call,
               "matmul_peak_flops_per_cpu_s": peak}
    for key in tasks:
        summary[key] = floor_check(results, key, names[key], unigram_scores[key])
        summary[f"{key}_exact"] = floor_check(results, key, names[key], unigram_exact[key],
                                              metric="exact")
    for r in results:
        for key in tasks:
            r[key].pop("per_window")
            r[key].pop("per_window_exact")
    # MFU of the fixed-count baseline (one token per step) and of each adaptive policy's
    # fewest-call setting that kept the baseline's exact-span score on the short spans.
    shares = {"fixed-count, 1 token/step": results[0]["mfu"]}
    best = summary["infill_short_exact"]
    for r in results:
        if best.get("best_setting") == r["setting"]:
            shares[f"{r['policy']} {best['best_setting']}"] = r["mfu"]
    summary["mfu"] = shares
    print("\n" + mfu_text(shares, peak, "wall clock, GPU" if gpu else "CPU time") + " (infilling and continuation, "
          "each sampler's own calls)")

    # Block cache: 96-token continuations in blocks of 8, 2 tokens per step.
    cache_rows = {}
    for cached in (False, True):
        options = SamplerOptions(temperature=0, steps=48, block_length=8, block_cache=cached)
        cache_rows[cached] = continuation_eval(mlm, judge, prompts, options, length=96)
    exact, fast = cache_rows[False], cache_rows[True]
    agree = sum(a == b for x, y in zip(exact["generated"], fast["generated"], strict=True)
                for a, b in zip(x, y, strict=True)) / (96 * len(prompts))
    error = cache_error(mlm, prompts, 8)
    summary["block_cache"] = {
        "exact_seconds": exact["seconds"], "cached_seconds": fast["seconds"],
        "exact_cpu_seconds": exact["cpu_seconds"], "cached_cpu_seconds": fast["cpu_seconds"],
        "speedup": exact["seconds"] / fast["seconds"],
        "cpu_speedup": exact["cpu_seconds"] / fast["cpu_seconds"], "token_agreement": agree,
        "exact_judge_pppl": exact["judge_pppl"], "cached_judge_pppl": fast["judge_pppl"],
        "max_logprob_error": error, "nfe": fast["nfe"]}
    print(f"block cache (96 tokens, blocks of 8, 48 steps): {exact['seconds']:.2f} s exact vs "
          f"{fast['seconds']:.2f} s cached ({exact['seconds'] / fast['seconds']:.2f}x wall), "
          f"{exact['cpu_seconds']:.2f} vs {fast['cpu_seconds']:.2f} CPU s "
          f"({exact['cpu_seconds'] / fast['cpu_seconds']:.2f}x); "
          f"tokens equal {agree:.1%}; judge PPPL {exact['judge_pppl']:.1f} vs "
          f"{fast['judge_pppl']:.1f}; largest log-prob error of a cached call {error:.3f}")

    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "summary": summary},
                                              indent=1) + "\n")
    if args.plot:
        plot(results, args.plot, unigram_scores, names, unigram_exact)


def plot(results, path, unigram: dict[str, float], names: dict[str, str],
         unigram_exact: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4.2))
    styles = {"count": "o-", "threshold": "s-", "factor": "^-", "entropy-bound": "D-",
              "spaced threshold": "s--", "spaced factor": "^--", "spaced entropy-bound": "D--",
              "remask": "x", "edit": "*"}
    panels = [(axes[0], "infill", "accuracy", "se", unigram, "token accuracy"),
              (axes[1], "infill_short", "accuracy", "se", unigram, "token accuracy"),
              (axes[2], "infill_short", "exact", "exact_se", unigram_exact,
               "spans filled exactly")]
    for policy, style in styles.items():
        chosen = [r for r in results if r["policy"] == policy]
        if not chosen:
            continue
        for axis, key, metric, se, _, _ in panels:
            rows = sorted(chosen, key=lambda r, k=key: r[k]["nfe"])
            axis.errorbar([r[key]["nfe"] for r in rows], [r[key][metric] for r in rows],
                          yerr=[r[key][se] for r in rows], fmt=style, label=policy,
                          capsize=2, markersize=5)
        rows = sorted(chosen, key=lambda r: r["continuation"]["nfe"])
        axes[3].plot([r["continuation"]["nfe"] for r in rows],
                     [r["continuation"]["judge_pppl"] for r in rows], style, label=policy,
                     markersize=5)
    for axis, key, _, _, baseline, what in panels:
        axis.axhline(baseline[key], color="grey", linestyle=":", linewidth=1,
                     label="unigram baseline")
        axis.set(xscale="log", xlabel="model calls per sequence (NFE)",
                 ylabel=f"infilling: {what} (held-out)",
                 title=f"Infilling, {what}: {names[key]}")
        axis.title.set_fontsize(9)
    axes[3].set(xscale="log", xlabel=f"model calls per {CONTINUATION}-token continuation (NFE)",
                ylabel="judge pseudo-perplexity (lower is better)",
                title="Continuation: speed vs quality")
    axes[3].title.set_fontsize(9)
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for axis in axes:  # calls as plain numbers (1, 2, 4, ... 64), no log-scale minor labels
        axis.set_xticks([1, 2, 4, 8, 16, 32, 64])
        axis.xaxis.set_major_formatter(ScalarFormatter())
        axis.xaxis.set_minor_formatter(NullFormatter())
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
