"""Benchmark: mlmkit's `confidence` sampler against the straightforward LLaDA-style loop.

The baseline recomputes the full logits (the MLM head at every position) at every step,
draws float64 Gumbel noise over the whole [B, L, V] tensor and picks the top-k per row in
a Python loop, as the LLaDA reference `generate` does. mlmkit runs the encoder once per
step and the head, the noise and the confidence only at the current block's masks.
Same model, prompts, steps, blocks and suppressed tokens; one run prints tokens/s of
both, the ratio, and whether both produce the same tokens at temperature 0, and the MFU of
each (benchmarks/flops.py: per step one forward of every row, read at the current block's
masks, over a matmul peak measured in this run with the same clock).

    .venv/bin/python benchmarks/generate.py [--preset mini] [--vocab 8192] [--device cpu]
"""

from __future__ import annotations

import argparse
import time

import torch
from flops import forwards_flops, matmul_peak, mfu, mfu_text

from mlmkit.core.cache import cache_dir
from mlmkit.corpus.python_docs import python_docs
from mlmkit.generation.canvas import MASK, PROMPT, Segment, build_canvas, suppressed_ids, text_ids
from mlmkit.generation.options import SamplerOptions
from mlmkit.generation.unmask import unmask
from mlmkit.models import LoadedMLM, build_mlm
from mlmkit.tokenizer import train_tokenizer


def baseline_generate(model, ids, gen_start, length, steps, block_length, temperature,
                      suppressed, mask_id, generator):
    """The LLaDA reference loop, on a canvas whose rows share `gen_start` (no padding)."""
    x = ids.clone()
    n_blocks = length // block_length
    steps_per_block = steps // n_blocks
    for block in range(n_blocks):
        start = gen_start + block * block_length
        end = start + block_length
        masks_in_block = (x[:, start:end] == mask_id).sum(1, keepdim=True)
        base, extra = masks_in_block // steps_per_block, masks_in_block % steps_per_block
        transfer_counts = base.repeat(1, steps_per_block)
        for row in range(x.shape[0]):
            transfer_counts[row, :int(extra[row])] += 1
        for step in range(steps_per_block):
            mask_index = x == mask_id
            logits = model(input_ids=x).logits
            logits[..., suppressed] = float("-inf")
            if temperature == 0:
                x0 = logits.argmax(-1)
            else:
                noise = torch.rand(logits.shape, dtype=torch.float64, generator=generator)
                gumbel = -torch.log(-torch.log(noise))
                x0 = (logits.double() / temperature + gumbel).argmax(-1)
            probs = torch.softmax(logits.double(), -1)
            x0_p = probs.gather(-1, x0.unsqueeze(-1)).squeeze(-1)
            x0_p[:, end:] = float("-inf")
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, torch.full_like(x0_p, float("-inf")))
            transfer = torch.zeros_like(x0, dtype=torch.bool)
            for row in range(x.shape[0]):
                _, selected = torch.topk(confidence[row], k=int(transfer_counts[row, step]))
                transfer[row, selected] = True
            x[transfer] = x0[transfer]
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--vocab", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: CPU-seconds are exact)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs per side, interleaved; the fastest counts")
    args = parser.parse_args()
    if args.length % args.block_length or args.steps % (args.length // args.block_length):
        parser.error("--length must be a multiple of --block-length, and --steps of the blocks")

    if args.threads:
        torch.set_num_threads(args.threads)
    texts = python_docs("train")
    tok_dir = cache_dir("benchmarks", f"tokenizer-wordpiece-{args.vocab}")
    if (tok_dir / "tokenizer.json").exists():
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    else:
        tokenizer = train_tokenizer(texts[:3000], tok_dir, kind="wordpiece",
                                    vocab_size=args.vocab, show_progress=False)
    device = torch.device(args.device)
    model = build_mlm(args.preset, tokenizer, max_length=512, seed=args.seed).to(device).eval()
    mlm = LoadedMLM(model=model, tokenizer=tokenizer, name=args.preset)
    prompts = [ids[:args.prompt_tokens] for ids in
               (text_ids(tokenizer, t[:500]) for t in texts[3000:3000 + 20 * args.batch])
               if len(ids) >= args.prompt_tokens][:args.batch]
    mask_id = tokenizer.mask_token_id
    rows = [[Segment(PROMPT, p), Segment(MASK, [mask_id] * args.length)] for p in prompts]
    canvas = build_canvas(tokenizer, rows, 512, what="prompt")
    gen_start = int(canvas.masked[0].nonzero()[0])
    banned = suppressed_ids(tokenizer, allow_eos=True)
    suppressed = torch.tensor(banned, device=device)

    def run_mlmkit(temperature):
        options = SamplerOptions(steps=args.steps, sampler="confidence",
                                 temperature=temperature, block_length=args.block_length)
        return unmask(mlm, canvas, options, suppressed=banned, seed=args.seed).ids

    def run_baseline(temperature):
        generator = torch.Generator(device=device).manual_seed(args.seed)
        with torch.inference_mode():
            return baseline_generate(model, canvas.ids.to(device), gen_start, args.length,
                                     args.steps, args.block_length, temperature, suppressed,
                                     mask_id, generator)

    def timed(function, temperature):
        """(output, seconds): CPU seconds of this process on the CPU (robust to other
        processes sharing the cores), wall seconds on a GPU."""
        if device.type == "cuda":
            torch.cuda.synchronize()
        start, cpu_start = time.perf_counter(), time.process_time()
        out = function(temperature)
        if device.type == "cuda":
            torch.cuda.synchronize()
            return out, time.perf_counter() - start
        return out, time.process_time() - cpu_start

    print(f"model {args.preset} (hidden {model.config.hidden_size}, "
          f"{model.config.num_hidden_layers} layers), vocab {len(tokenizer)}, batch {args.batch}, "
          f"prompt {args.prompt_tokens} + {args.length} generated tokens, {args.steps} steps, "
          f"blocks of {args.block_length}, device {device}, threads {torch.get_num_threads()}")
    run_mlmkit(args.temperature), run_baseline(args.temperature)  # warm-up
    # The FLOPs the task needs, the same for both sides: each step, one forward of every
    # row of the canvas, read at the masks left in the current block (what it may reveal).
    blocks, per_block = args.length // args.block_length, args.steps // (
        args.length // args.block_length)
    reads = []
    for _ in range(blocks):
        left = args.block_length
        for step in range(per_block):
            reads.append(left)
            left -= args.block_length // per_block + (step < args.block_length % per_block)
    needed = args.batch * forwards_flops(model.config, [(canvas.ids.shape[1], r)
                                                        for r in reads])
    cuda = device.type == "cuda"
    peak = matmul_peak(device=args.device, clock=time.perf_counter if cuda
                       else time.process_time)
    tokens = args.batch * args.length
    unit = "tokens/s" if device.type == "cuda" else "tokens per CPU-second"
    for temperature in sorted({args.temperature, 0.0}, reverse=True):
        ours_s = theirs_s = float("inf")
        for _ in range(args.repeats):
            ours, seconds = timed(run_mlmkit, temperature)
            ours_s = min(ours_s, seconds)
            theirs, seconds = timed(run_baseline, temperature)
            theirs_s = min(theirs_s, seconds)
        line = (f"temperature {temperature:g}: mlmkit {tokens / ours_s:8.1f}  "
                f"full-logits baseline {tokens / theirs_s:8.1f} {unit}  "
                f"ratio {theirs_s / ours_s:.2f}x")
        if temperature == 0:
            same = torch.equal(ours.cpu(), theirs.cpu())
            line += f"  same tokens: {same}"
        print(line)
        print("  " + mfu_text({"mlmkit": mfu(needed, ours_s, peak),
                               "baseline": mfu(needed, theirs_s, peak)}, peak,
                              "wall clock" if cuda else "CPU time"))


if __name__ == "__main__":
    main()
