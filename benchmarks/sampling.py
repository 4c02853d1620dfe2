"""Benchmark: the speed–quality curve of mlmkit's reveal policies, remasking, editing and
block cache, in one run.

A small masked LM (ModernBERT-tiny: 2 pre-LN layers, 128 wide, rotary positions, over a
256-piece WordPiece vocabulary close to characters) is trained on the first half of Tiny
Shakespeare's training part with a random masking rate per sequence (as masked diffusion
trains), and a separate judge model on the second half. (A post-LN bert-tiny with learned
absolute positions stays at the unigram stage for the first thousand-odd steps on this
budget; the pre-LN rotary model leaves it within a few hundred.) Before any sampling the
run checks that the model uses context: its held-out accuracy at 15 % random masks, and on
the infilling spans, beside the unigram baseline (the most frequent training token
everywhere). On held-out text (the last 10%), every policy and setting is run:

- infilling: a 16-token span in the middle of a 48-token window, argmax choice; accuracy
  is the fraction of span tokens equal to the true text (its standard error over tokens is
  the run's noise);
- continuation: 32 tokens after a 16-token prompt, temperature 0.8; quality is the judge's
  pseudo-perplexity of the continuation given the prompt, and distinct-2 (repetition);
- the cost: model calls (NFE) per batch, tokens per call and tokens per second.

The fixed-count sampler at one token per step is the baseline. The floor: an adaptive
policy whose accuracy is within two standard errors of it, with 3x fewer calls. The block
cache is measured on longer continuations (96 tokens in blocks of 8): wall time, token
agreement with the exact loop and the largest log-probability error of a cached call.

    nice .venv/bin/python benchmarks/sampling.py --threads 1 \
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
import random
import time
from pathlib import Path

import torch

from mlmkit.cache import cache_dir
from mlmkit.generate.canvas import MASK, PROMPT, Segment
from mlmkit.generate.options import SamplerOptions
from mlmkit.generate.pll import token_pll
from mlmkit.generate.unmask import unmask_rows
from mlmkit.models import MLM, build_mlm, masked_logits
from mlmkit.models.block_cache import BlockCache
from mlmkit.tokenizer import train_tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare" / "input.txt"
WINDOW, SPAN_START, SPAN = 48, 16, 16
PROMPT_LEN, CONTINUATION = 16, 32

SETTINGS = [
    ("count", {"steps": 16}), ("count", {"steps": 8}), ("count", {"steps": 4}),
    ("count", {"steps": 2}),
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
    ("remask", {"steps": 16, "remask": "cap", "sigma": 0.05}),
    ("remask", {"steps": 16, "remask": "loop", "sigma": 0.1, "remask_steps": 8}),
    ("edit", {"reveal": "threshold", "threshold": 0.7, "edit": 0.9}),
]


def token_stream(tokenizer, text: str) -> list[int]:
    ids = []
    for start in range(0, len(text), 100_000):
        ids += tokenizer(text[start:start + 100_000], add_special_tokens=False,
                         verbose=False)["input_ids"]
    return ids


def train(mlm: MLM, stream: list[int], steps: int, seed: int, batch: int = 32, lr: float = 3e-3,
          length: int = 62, warmup: int = 100) -> float:
    """A short masked-diffusion training run: per sequence a masking rate t ~ U(0.05, 1),
    each token masked with probability t, cross-entropy at the masked positions."""
    tok, model = mlm.tokenizer, mlm.model
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
        targets = ids[masked]
        inputs = ids.masked_fill(masked, tok.mask_token_id)
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
            root: Path, batch: int, preset: str = "modernbert-tiny", lr: float = 3e-3) -> MLM:
    from transformers import AutoModelForMaskedLM

    path = root / f"{name}-{preset}-steps{steps}-batch{batch}-lr{lr:g}-seed{seed}"
    if path.is_dir() and not retrain:
        model = AutoModelForMaskedLM.from_pretrained(path).eval()
        return MLM(model=model, tokenizer=tokenizer, name=name)
    model = build_mlm(preset, tokenizer, max_length=128, seed=seed)
    mlm = MLM(model=model, tokenizer=tokenizer, name=name)
    started, cpu = time.perf_counter(), time.process_time()
    loss = train(mlm, stream, steps, seed, batch=batch, lr=lr)
    print(f"trained {name} ({preset}): {steps} steps of {batch} sequences in "
          f"{time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} s CPU, "
          f"last loss {loss:.3f}", flush=True)
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tmp.rename(path)  # whole, so a concurrent run (e.g. one warming the judge) sees it or not
    return mlm


def loaded(path: str, name: str) -> MLM:
    from mlmkit.models import load_mlm

    mlm = load_mlm(path)
    mlm.model.eval()
    return mlm


def context_check(mlm: MLM, test: list[int], unigram: int, rows: int = 64, length: int = 62,
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
    with torch.inference_mode():
        logits = masked_logits(mlm.model, ids.masked_fill(masked, tok.mask_token_id), None,
                               masked).float()
    truth = ids[masked]
    n = int(truth.numel())
    accuracy = float((logits.argmax(-1) == truth).float().mean())
    return {"masks": n, "accuracy": accuracy, "se": math.sqrt(accuracy * (1 - accuracy) / n),
            "loss": float(torch.nn.functional.cross_entropy(logits, truth)),
            "unigram_accuracy": float((truth == unigram).float().mean())}


class RowCalls:
    """Model calls per row of a batched run: a row costs a call at every step that still had
    a mask of its own (its cost when decoded alone; the batch runs until its slowest row is
    done). An edit-only step (no masks left in the batch) counts for every row."""

    def __init__(self, rows: int):
        self.calls = [0] * rows

    def __call__(self, event) -> None:
        remasked = event.remasked if event.remasked is not None else torch.zeros_like(
            event.masked)
        before = (event.masked & ~remasked) | event.revealed
        had = before.any(1)
        if not bool(had.any()):
            had = torch.ones_like(had)
        for row in torch.nonzero(had).flatten().tolist():
            self.calls[event.first_row + row] += 1

    def mean(self) -> float:
        return sum(self.calls) / len(self.calls)


def infill_eval(mlm, windows, options) -> dict:
    mask = mlm.tokenizer.mask_token_id
    rows = [[Segment(PROMPT, w[:SPAN_START]), Segment(MASK, [mask] * SPAN),
             Segment(PROMPT, w[SPAN_START + SPAN:])] for w in windows]
    calls = RowCalls(len(rows))
    started = time.perf_counter()
    batches = unmask_rows(mlm, rows, options, default_steps=SPAN, allow_eos=False,
                          what="window", rows=len(rows), precision="fp32", progress=False,
                          on_step=calls)
    seconds = time.perf_counter() - started
    right = total = 0
    per_window = [0.0] * len(windows)
    for batch in batches:
        for row in range(batch.ids.shape[0]):
            truth = windows[batch.first + row][SPAN_START:SPAN_START + SPAN]
            got = batch.ids[row][batch.canvas.masked[row]].tolist()
            hits = sum(a == b for a, b in zip(got, truth, strict=True))
            per_window[batch.first + row] = hits / SPAN
            right += hits
            total += SPAN
    accuracy = right / total
    batch_nfe = sum(b.model_calls for b in batches) / len(batches)
    nfe = calls.mean()
    return {"accuracy": accuracy, "se": math.sqrt(accuracy * (1 - accuracy) / total),
            "nfe": nfe, "batch_nfe": batch_nfe, "tokens_per_call": SPAN / nfe,
            "tokens_per_s": total / seconds, "seconds": seconds, "per_window": per_window}


def paired_se(a: list[float], b: list[float]) -> float:
    """Standard error of mean(a) - mean(b) over paired windows (the same spans under two
    settings; tokens of one span are not independent, so the window is the unit)."""
    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(d) / len(d)
    return math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))


def span_unigram_accuracy(windows, unigram: int) -> float:
    """The infilling spans' accuracy of the unigram baseline (its token at every mask)."""
    spans = [w[SPAN_START:SPAN_START + SPAN] for w in windows]
    return sum(t == unigram for s in spans for t in s) / (SPAN * len(spans))


def distinct_2(sequences) -> float:
    grams = [tuple(s[i:i + 2]) for s in sequences for i in range(len(s) - 1)]
    return len(set(grams)) / max(1, len(grams))


def continuation_eval(mlm, judge, prompts, options, length=CONTINUATION,
                      rows_per_batch=None) -> dict:
    mask = mlm.tokenizer.mask_token_id
    rows = [[Segment(PROMPT, p), Segment(MASK, [mask] * length)] for p in prompts]
    calls = RowCalls(len(rows))
    started = time.perf_counter()
    batches = unmask_rows(mlm, rows, options, default_steps=length, allow_eos=False,
                          what="prompt", rows=rows_per_batch or len(rows), precision="fp32",
                          progress=False, on_step=calls)
    seconds = time.perf_counter() - started
    generated = []
    for batch in batches:
        for row in range(batch.ids.shape[0]):
            generated.append(batch.ids[row][batch.canvas.masked[row]].tolist())
    scores = token_pll(judge, [p + g for p, g in zip(prompts, generated, strict=True)])
    pll = [float(s[len(p):].mean()) for s, p in zip(scores, prompts, strict=True)]
    return {"judge_pppl": math.exp(-sum(pll) / len(pll)), "distinct_2": distinct_2(generated),
            "nfe": calls.mean(),
            "batch_nfe": sum(b.model_calls for b in batches) / len(batches), "tokens_per_s": len(prompts) * length / seconds, "seconds": seconds,
            "generated": generated}


def cache_error(mlm, prompts, block_length: int) -> float:
    """Largest |log p| difference between the cached and the exact encoder at a block's
    masks, after half the block has been filled with the exact argmax."""
    from mlmkit.models import adapter_for

    tok, model = mlm.tokenizer, mlm.model
    ids = torch.tensor([[tok.cls_token_id] + p + [tok.mask_token_id] * 32 + [tok.sep_token_id]
                        for p in prompts])
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
    parser.add_argument("--judge-preset", default="modernbert-tiny", help="the judge's preset")
    parser.add_argument("--steps", type=int, default=800, help="training steps of the model")
    parser.add_argument("--judge-steps", type=int, default=600,
                        help="training steps of the judge")
    parser.add_argument("--batch", type=int, default=32, help="training sequences per step")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--model", default=None, help="a trained masked LM to sample from "
                        "(instead of training one; its own tokenizer is used)")
    parser.add_argument("--judge", default=None, help="a trained judge (same tokenizer)")
    parser.add_argument("--train-only", choices=("model", "judge"), default=None,
                        help="train (and cache) this model, then stop: to train the judge "
                        "in a second process beside the model")
    parser.add_argument("--vocab", type=int, default=256, help="WordPiece vocabulary (small: "
                        "near character level, which a briefly trained model learns)")
    parser.add_argument("--windows", type=int, default=96, help="held-out infilling spans")
    parser.add_argument("--prompts", type=int, default=32, help="held-out prompts")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--plot", default=None, help="write the curves to this PNG")
    parser.add_argument("--json", default=None, help="write every figure to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not DATA.is_file():
        raise SystemExit(f"Tiny Shakespeare is not at {DATA} (see ../shared/data/README.md)")
    text = DATA.read_text(encoding="utf-8")
    cut = int(len(text) * 0.9)
    train_text, test_text = text[:cut], text[cut:]
    root = cache_dir("benchmarks", "diffusion_sampling")
    tokenizer = train_tokenizer([line for line in train_text.splitlines() if line.strip()],
                                root / f"tokenizer-{args.vocab}", kind="wordpiece",
                                vocab_size=args.vocab,
                                show_progress=False)
    if args.model:
        mlm = loaded(args.model, "sampler")
        tokenizer = mlm.tokenizer
    stream = token_stream(tokenizer, train_text)
    half = len(stream) // 2
    if args.train_only != "judge" and not args.model:
        mlm = trained(f"sampler-v{args.vocab}", tokenizer, stream[:half], args.steps, 0,
                      args.retrain, root, args.batch, args.preset, args.lr)
    if args.train_only == "model":
        return
    if args.judge:
        judge = loaded(args.judge, "judge")
    else:
        judge = trained(f"judge-v{args.vocab}", tokenizer, stream[half:], args.judge_steps, 1,
                        args.retrain, root, args.batch, args.judge_preset, args.lr)
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
              f"({check['masks']} masks)", flush=True)
    rng = random.Random(0)
    windows = [test[s:s + WINDOW] for s in rng.sample(range(len(test) - WINDOW), args.windows)]
    prompts = [test[s:s + PROMPT_LEN]
               for s in rng.sample(range(len(test) - PROMPT_LEN), args.prompts)]
    span_unigram = span_unigram_accuracy(windows, unigram)
    print(f"infilling spans: {args.windows} x {SPAN} tokens; the unigram baseline "
          f"({tokenizer.convert_ids_to_tokens([unigram])[0]!r} everywhere) scores "
          f"{span_unigram:.3f}", flush=True)

    results = []
    print("NFE: model calls per sequence (a row's calls while it has masks: its cost alone); "
          "batch: calls of the whole batched run (until its slowest row is done)")
    print(f"{'policy':<14}{'setting':<34}{'NFE':>6}{'batch':>6}{'tok/call':>9}{'acc':>7}"
          f"{'±se':>6}{'tok/s':>8}{'cont NFE':>9}{'judge PPPL':>11}{'dist-2':>7}", flush=True)
    for policy, setting in SETTINGS:
        infill_options = SamplerOptions(temperature=0, **setting)
        fill = infill_eval(mlm, windows, infill_options)
        gen_setting = dict(setting)
        if "steps" in gen_setting:  # the same tokens per step on the 32-token continuation
            gen_setting["steps"] = gen_setting["steps"] * CONTINUATION // SPAN
            if gen_setting.get("remask_steps"):
                gen_setting["remask_steps"] *= CONTINUATION // SPAN
        cont = continuation_eval(mlm, judge, prompts,
                                 SamplerOptions(temperature=0.8, seed=0, **gen_setting))
        label = ", ".join(f"{k}={v}" for k, v in setting.items() if k != "reveal")
        results.append({"policy": policy, "setting": setting, "infill": fill,
                        "continuation": {k: v for k, v in cont.items() if k != "generated"}})
        print(f"{policy:<14}{label:<34}{fill['nfe']:>6.1f}{fill['batch_nfe']:>6.0f}"
              f"{fill['tokens_per_call']:>9.2f}{fill['accuracy']:>7.3f}{fill['se']:>6.3f}"
              f"{fill['tokens_per_s']:>8.0f}{cont['nfe']:>9.1f}{cont['judge_pppl']:>11.1f}"
              f"{cont['distinct_2']:>7.2f}", flush=True)

    base = results[0]["infill"]
    for r in results:
        r["infill"]["diff_se"] = paired_se(base["per_window"], r["infill"]["per_window"]) \
            if r is not results[0] else 0.0
    fair = [r for r in results if r["policy"] in ("threshold", "factor", "entropy-bound")
            and r["infill"]["accuracy"] >= base["accuracy"] - 2 * r["infill"]["diff_se"]]
    best = max(fair, key=lambda r: base["nfe"] / r["infill"]["nfe"], default=None)
    summary = {"baseline_nfe": base["nfe"], "baseline_accuracy": base["accuracy"],
               "span_unigram_accuracy": span_unigram, "context_check": checks}
    print("\nadaptive settings within 2 paired standard errors (over windows) of the "
          "baseline's accuracy:")
    for r in results:
        if r["policy"] in ("threshold", "factor", "entropy-bound"):
            gap = base["accuracy"] - r["infill"]["accuracy"]
            print(f"  {r['policy']:<14}{str(r['setting']):<52} NFE {r['infill']['nfe']:5.1f} "
                  f"({base['nfe'] / r['infill']['nfe']:.1f}x fewer), accuracy gap {gap:+.3f} "
                  f"= {gap / max(r['infill']['diff_se'], 1e-12):+.1f} se "
                  f"{'(equal)' if r in fair else ''}")
    summary["context_shown"] = base["accuracy"] > span_unigram + 2 * base["se"]
    if not summary["context_shown"]:
        print("the baseline is not above the unigram baseline: the model has not learned "
              "context, and no speed-quality claim follows from this run")
    if best is not None:
        ratio = base["nfe"] / best["infill"]["nfe"]
        batch_ratio = base["batch_nfe"] / best["infill"]["batch_nfe"]
        summary.update(best_policy=best["policy"], best_setting=best["setting"],
                       best_nfe=best["infill"]["nfe"], best_batch_nfe=best["infill"]["batch_nfe"],
                       best_accuracy=best["infill"]["accuracy"],
                       best_diff_se=best["infill"]["diff_se"], call_ratio=ratio,
                       batch_call_ratio=batch_ratio,
                       floor_met=ratio >= 3 and summary["context_shown"])
        print(f"at equal accuracy: {best['policy']} {best['setting']} needs "
              f"{best['infill']['nfe']:.1f} calls per sequence vs {base['nfe']:.1f} for one "
              f"token per step: {ratio:.1f}x fewer (floor 3x: "
              f"{'met' if summary['floor_met'] else 'NOT met'}); the batched run of "
              f"{len(windows)} rows: {best['infill']['batch_nfe']:.0f} vs "
              f"{base['batch_nfe']:.0f} calls ({batch_ratio:.1f}x)")
    else:
        print("no adaptive setting reached the baseline's accuracy within 2 se")
    for r in results:
        r["infill"].pop("per_window")

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
        "speedup": exact["seconds"] / fast["seconds"], "token_agreement": agree,
        "exact_judge_pppl": exact["judge_pppl"], "cached_judge_pppl": fast["judge_pppl"],
        "max_logprob_error": error, "nfe": fast["nfe"]}
    print(f"block cache (96 tokens, blocks of 8, 48 steps): {exact['seconds']:.2f} s exact vs "
          f"{fast['seconds']:.2f} s cached ({exact['seconds'] / fast['seconds']:.2f}x); "
          f"tokens equal {agree:.1%}; judge PPPL {exact['judge_pppl']:.1f} vs "
          f"{fast['judge_pppl']:.1f}; largest log-prob error of a cached call {error:.3f}")

    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "summary": summary},
                                              indent=1) + "\n")
    if args.plot:
        plot(results, args.plot, span_unigram)


def plot(results, path, unigram: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    styles = {"count": "o-", "threshold": "s-", "factor": "^-", "entropy-bound": "D-",
              "remask": "x", "edit": "*"}
    for policy, style in styles.items():
        rows = sorted((r for r in results if r["policy"] == policy),
                      key=lambda r: r["infill"]["nfe"])
        if not rows:
            continue
        left.errorbar([r["infill"]["nfe"] for r in rows],
                      [r["infill"]["accuracy"] for r in rows],
                      yerr=[r["infill"]["se"] for r in rows], fmt=style, label=policy,
                      capsize=2, markersize=5)
        right.plot([r["continuation"]["nfe"] for r in rows],
                   [r["continuation"]["judge_pppl"] for r in rows], style, label=policy,
                   markersize=5)
    if unigram is not None:
        left.axhline(unigram, color="grey", linestyle=":", linewidth=1,
                     label="unigram baseline")
    left.set(xscale="log", xlabel="model calls (NFE) per 16-token span",
             ylabel="infilling accuracy (held-out)", title="Infilling: speed vs quality")
    right.set(xscale="log", xlabel="model calls (NFE) per 32-token continuation",
              ylabel="judge pseudo-perplexity (lower is better)",
              title="Continuation: speed vs quality")
    left.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
