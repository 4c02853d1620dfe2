"""The run config: one dataclass, every field documented, loadable from YAML, set by flags.

Fields are grouped as in cramming: *what is studied* (model, data, objective, masking,
optimizer, budget) changes results; *how it runs* (device, precision, compile, logging)
should change only speed. A resumed run must agree with its directory on the first group.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from mlmkit.core import checks
from mlmkit.core.yaml_values import NotFinite, dump_yaml, load_yaml
from mlmkit.errors import InvalidArgument, InvalidData, MlmkitError, PathError
from mlmkit.models.preset_table import init_positions, parse_preset, preset_positions
from mlmkit.pretraining.phase_specs import check_config_phases

STUDIED, BUDGET, EVALUATION, RUNTIME = "what is studied", "budget", "evaluation", "runtime"
PRECISIONS = ("auto", "fp32", "bf16")  # auto: bf16 where the device runs it natively
MASK_STREAMS = ("row", "counter")  # mlmkit.masking.seeding: the two random streams of masks
MAX_VOCAB_SIZE = 2**20  # the tokenizers trainer aborts the process far above this
MIN_VOCAB_SIZE = 64  # the smallest vocabulary a trained tokenizer is given
MIN_SEQ_LEN, MAX_SEQ_LEN = 8, 8192  # 8: [CLS] [SEP] and a few tokens
MAX_BATCH = 2**20
MAX_COUNT = 10**15  # steps, tokens, cadences: far beyond any run, but finite
AUTO = "auto"  # --batch-tokens auto: the micro-batch measured to fit (training.step_memory)


def _f(default, help: str, group: str = STUDIED, **kwargs):
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default),
                     metadata={"help": help, "group": group, **kwargs})
    return field(default=default, metadata={"help": help, "group": group, **kwargs})


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on (see `mlmkit pretrain --help`)."""

    # what is studied
    objective: str = _f("mlm", "training objective: mlm, electra (replaced-token detection), "
                               "diffusion (MDLM/LLaDA masked diffusion) or retromae (MLM + a "
                               "one-layer decoder rebuilding a heavily masked copy from [CLS])")
    model: str | None = _f(None, "model preset: SIZE or FAMILY-SIZE, e.g. mini, roberta-small, "
                                 "modernbert-base; default: modernbert-mini (pre-LN: a short "
                                 "run leaves the unigram stage far sooner than with a post-LN "
                                 "BERT), electra-mini for --objective electra")
    init: str | None = _f(None, "start from this HF masked LM (name or path) and its tokenizer "
                                "(continued pretraining); overrides --model and --tokenizer")
    allow_untrained_head: bool = _f(False, "--init: accept a checkpoint without a trained MLM "
                                           "head (a DeBERTa-v3 release, a classifier); the "
                                           "head starts random and is trained")
    dropout: float | None = _f(0.0, "dropout of the model (hidden and attention); 0 suits "
                                    "short budgets (cramming); None keeps the preset's / "
                                    "--init model's (0.1 for BERT)")
    tokenizer: str | None = _f(None, "tokenizer name or path; default: train one on the corpus")
    tokenizer_kind: str = _f("wordpiece", "kind of tokenizer trained when --tokenizer is not "
                                          "given: wordpiece, bpe or unigram; protein: ESM's "
                                          "amino-acid alphabet (nothing trained)")
    vocab_size: int = _f(8192, "vocabulary of the tokenizer trained when none is given "
                               "(rounded up to a multiple of 64); the run's config.yaml "
                               "records the size of the tokenizer it used, given or trained")
    corpus: str = _f("python-docs", "corpus: python-docs, a text/jsonl/parquet file or folder, "
                                    "or a local HF dataset", multiple=True,
                     metavar="SOURCE[:WEIGHT]")
    field: str = _f("text", "field holding the text in jsonl/parquet/dataset corpora",
                    flag="--text-field")
    validation_share: float = _f(0.05, "share of documents held out for validation when the "
                                       "corpus has no validation split")
    seq_len: int = _f(128, "tokens per packed block")
    packing: str = _f("full", "full: documents concatenated with [SEP] (RoBERTa "
                              "FULL-SENTENCES); document: one document per block, padded, "
                              "a long one split over blocks; crop: one document per block, a "
                              "long one cropped to a random window each epoch (ESM-2)")
    masking: Any = _f("default", "masking policy: a preset of mlmkit.masking (bert, whole_word, "
                                 "span, pmi, mask40, ...) or a YAML mapping; default: 30% "
                                 "whole-word masking, 80/10/10")
    masking_stats: str | None = _f(None, "statistics folder from `mlmkit mask stats` (needed "
                                         "by pmi / frequency / tfidf / bm25 (rom) / "
                                         "informask masking)")
    mask_stream: str = _f("counter", "random stream of the masks: counter (keyed by seed, "
                                     "step, row and position: the whole batch in a few tensor "
                                     "ops, on the model's device, the same on any device and "
                                     "process count) or row (a generator per row, on the "
                                     "host; runs saved without this field used it and resume "
                                     "with it)")
    label_smoothing: float = _f(0.0, "label smoothing of the MLM cross-entropy")
    decoder_masking_rate: float = _f(0.5, "--objective retromae: share of tokens masked in "
                                          "the decoder's copy (RetroMAE: 0.5-0.7)")
    dupmae_weight: float = _f(0.0, "--objective retromae: weight of DupMAE's bag-of-words "
                                   "loss (the max-pooled MLM-head logits of every token "
                                   "predict the block's words); 0: off")
    batch_size: int = _f(16, "blocks per optimizer step (all accumulation steps together)")
    grad_accum: int = _f(1, "gradient accumulation micro-steps per optimizer step")
    step_tokens: int | None = _f(None, "tokens per optimizer step (= --batch-size × --seq-len; "
                                       "sets --batch-size)")
    lr: float = _f(1e-3, "peak learning rate")
    weight_decay: float = _f(0.01, "AdamW weight decay (not applied to norms and biases)")
    beta1: float = _f(0.9, "AdamW beta1")
    beta2: float = _f(0.98, "AdamW beta2")
    eps: float = _f(1e-6, "AdamW epsilon")
    # -- optimizer, batch warm-up and unpadding
    optimizer: str = _f("adamw", "adamw, or stableadamw: AdamW with per-tensor update "
                                 "clipping (Wortsman et al. 2023; ModernBERT's optimizer)")
    decoupled_weight_decay: bool = _f(False, "weight decay scaled by the schedule (lr / --lr), "
                                             "not by the learning rate: decoupled as in "
                                             "ModernBERT/MosaicBERT (their --weight-decay is "
                                             "1e-5)")
    batch_warmup_tokens: int = _f(0, "batch-size warm-up: the batch grows linearly from "
                                     "--batch-warmup-start to --batch-size over the first N "
                                     "tokens (ModernBERT); 0: off")
    batch_warmup_start: int | None = _f(None, "first batch of the warm-up, in blocks (default: "
                                              "--batch-size / 8, at least one per "
                                              "micro-step and process)")
    unpadded: bool = _f(False, "packed rows without padding whose attention stays within each "
                               "document (positions restart per document): modernbert, "
                               "ettin, mmbert, eurobert, neobert, bert, roberta, xlm-roberta, "
                               "electra; on a GPU at bf16 without attention dropout through "
                               "PyTorch's varlen FlashAttention kernel, else SDPA with a "
                               "document mask")
    # -- end of optimizer, batch warm-up and unpadding
    clip: float = _f(1.0, "gradient-norm clipping threshold (0 disables)")
    schedule: str = _f("linear", "learning-rate schedule after warmup: linear, cosine, wsd "
                                 "(warmup-stable-decay) or constant")
    warmup: float = _f(0.06, "warmup: a share of the budget (< 1) or a number of steps (>= 1)")
    decay: float = _f(0.2, "wsd only: share of the budget spent decaying at the end")
    min_lr: float = _f(0.0, "learning rate at the end, as a share of --lr")
    seed: int = _f(0, "seed of initialisation, data order, masking and dropout")
    # -- recipes and phases (mlmkit.pretraining.recipes, mlmkit.pretraining.phase_specs)
    recipe: str | None = _f(None, "the recipe this run's settings came from (mlmkit pretrain "
                                  "--recipe NAME --show prints one)")
    phases: list | None = _f(None, "training phases, each a mapping of steps, seq_len, "
                                   "masking_rate, rope_theta, mixture and lr (see "
                                   "mlmkit.pretraining.phases); their steps add up to --steps")
    # -- end of recipes and phases
    # budget
    steps: int | None = _f(1000, "optimizer steps to train (the schedule ends there)", BUDGET,
                           shown_default="1000; on a CPU without native bf16 (fp32) also "
                                         "--time 10m")
    tokens: int | None = _f(None, "or: tokens to train on (non-padding input tokens)", BUDGET)
    time: str | None = _f(None, "or: wall-clock budget, e.g. 90s, 10m, 2h (the schedule "
                                "follows the elapsed share of it)", BUDGET)
    # evaluation
    eval_every: int = _f(100, "evaluate every N steps (and at the end); 0: only at the end",
                         EVALUATION)
    eval_blocks: int = _f(128, "held-out blocks evaluated (fixed, seeded mask)", EVALUATION)
    pppl_sentences: int = _f(32, "validation sentences scored for pseudo-perplexity (0: skip)",
                             EVALUATION)
    # -- evaluation suite: run by the caller's evaluation hook (mlmkit.pretraining.hooks)
    eval_suite: str | None = _f(None, "also run the evaluation suite at each evaluation: quick, "
                                      "full, or parts (e.g. blimp,cloze); into metrics.jsonl "
                                      "and plots/suite.png", EVALUATION)
    suite_data: str | None = _f(None, "folder of the suite's data (blimp/, sst2/, agnews/); "
                                      "default: $MLMKIT_DATA, else ~/.cache/mlmkit/data "
                                      "('mlmkit data fetch NAME' fills it)", EVALUATION)
    # -- end of evaluation suite
    save_every: int = _f(100, "save training state and step-N every N steps (0: only at the "
                              "end and on SIGINT/SIGTERM)", EVALUATION)
    keep_checkpoints: int = _f(2, "training states (and step-N folders) kept", EVALUATION)
    # runtime
    run_dir: str | None = _f(None, "run directory (outputs, checkpoints, logs); default: "
                                   "runs/pretrain, or runs/pretrain-2, -3, ... if taken", RUNTIME)
    device: str = _f("auto", "auto, cpu or cuda", RUNTIME)
    precision: str = _f("auto", "auto, fp32 or bf16 (torch.autocast); auto: bf16 where the "
                                "device multiplies bf16 natively (a GPU with bf16, a CPU with "
                                "AVX512-BF16 or AMX), else fp32", RUNTIME)
    compile: bool = _f(False, "torch.compile the model", RUNTIME)
    flex_attention: bool = _f(False, "with --unpadded on a GPU: attention through PyTorch's "
                                     "FlexAttention with a document block mask (blocks "
                                     "without a pair of one document are skipped)", RUNTIME)
    compile_layers: bool | None = _f(None, "torch.compile each encoder layer on its own "
                                            "(regional: one layer's compile time, the "
                                            "embedding, head and loss stay eager)", RUNTIME,
                                     shown_default="on with --device cuda (unless "
                                                   "--compile), else off")
    prefetch: int | None = _f(None, "build the next N steps' batches on a background thread "
                                    "(pinned and copied to a GPU on a side stream) while the "
                                    "step trains; the same batches as without; 0: in the "
                                    "step", RUNTIME, shown_default="2 on a GPU, 0 on a CPU")
    parallel: str = _f("ddp", "under torchrun: ddp (every process holds the whole model) or "
                              "fsdp (FSDP2: parameters, gradients and optimizer state sharded "
                              "over processes, states saved with torch.distributed.checkpoint)",
                       RUNTIME)
    activation_checkpointing: bool = _f(False, "recompute each layer's activations in the "
                                               "backward pass: less memory, ~1/3 more compute",
                                        RUNTIME)
    threads: int | None = _f(None, "CPU threads for torch (default: $MLMKIT_THREADS, else "
                                   "the usable cores less those the 1-minute load average "
                                   "says other processes keep busy, at least 1: threads "
                                   "waiting on busy cores slow every step; the run's first "
                                   "status line says the count)", RUNTIME)
    batch_tokens: int | str | None = _f(None, "largest micro-batch in tokens (a memory "
                                              "bound): when a step's blocks exceed it, "
                                              "--grad-accum is raised until each micro-step "
                                              "fits; the step, and so the result, stay the "
                                              "same. auto: the largest micro-batch measured "
                                              "to fit the device's free memory (trial "
                                              "steps before the first; a resumed run keeps "
                                              "the one it measured)", RUNTIME,
                                        own_flag=True, metavar="N|auto")
    # -- compiled, fused step (mlmkit.training.step_memory, mlmkit.pretraining.static_shapes)
    cuda_graphs: bool = _f(False, "replay each compiled region's kernels as CUDA graphs "
                                  "(torch.compile mode reduce-overhead): fewer kernel "
                                  "launches; needs a GPU, --compile-layers or --compile, and "
                                  "shapes that stay the same from step to step (no batch "
                                  "warm-up, no --unpadded); with --compile the masked "
                                  "positions are padded to a few fixed sizes", RUNTIME)
    # -- end of compiled, fused step
    log_every: int = _f(10, "log training metrics every N steps", RUNTIME)
    halt_after: int | None = _f(None, "stop (saving state) after this many steps of this "
                                      "process, as on SIGTERM; resume later with --resume",
                                RUNTIME)
    time_bound: str | None = _f(None, "warn after the first steps when the estimated time to "
                                      "finish (printed then) is longer than this, e.g. 8h",
                                RUNTIME)
    progress: bool = _f(True, "show progress bars", RUNTIME)
    progress_every: float = _f(30.0, "when standard error is not a terminal (a log file, a "
                                     "batch job): a plain progress line every N seconds "
                                     "(step, loss, tokens/s, time left); 0: none", RUNTIME)
    fill_mask_examples: int = _f(4, "fill-mask examples printed at the end", RUNTIME)

    def __post_init__(self):
        if self.model is None:  # resolved here, so config.yaml names the model trained
            self.model = default_model(self.objective)
        self.validate()

    def validate(self) -> None:
        """Check every field's type and range before any work (or any file) is done.

        Counts are whole numbers ≥ 1, except where 0 means "never": `eval_every` (only at
        the end), `save_every` (only at the end and on a signal), `pppl_sentences` (skip),
        `fill_mask_examples` (none) and `clip` (no clipping). `--steps`, `--tokens` and
        `--time` may be None (not that budget) but at least one is given. The sequence
        length fits the preset's position count (`mlmkit.models.preset_table.preset_positions`:
        512, ESM-2's 1,024) or a local `--init` model's. Errors are one-line `InvalidArgument`s naming the flag.
        """
        for name in ("objective", "tokenizer_kind", "corpus", "field", "packing", "schedule",
                     "device", "precision", "mask_stream"):
            _text(name, getattr(self, name))
        for name in ("model", "init", "tokenizer", "masking_stats", "run_dir", "time"):
            if getattr(self, name) is not None:
                _text(name, getattr(self, name))
        for name in ("compile", "progress", "activation_checkpointing", "allow_untrained_head",
                     "compile_layers", "cuda_graphs"):
            if name == "compile_layers" and self.compile_layers is None:  # auto: the device's
                continue
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"--{flag(name)} {getattr(self, name)!r}: use true or "
                                      "false")
        checks.choice("objective", self.objective, ("mlm", "electra", "diffusion", "retromae"))
        checks.choice("tokenizer_kind", self.tokenizer_kind,
                      ("wordpiece", "bpe", "unigram", "protein"))
        checks.choice("packing", self.packing, ("full", "document", "crop"))
        checks.choice("mask_stream", self.mask_stream, MASK_STREAMS)
        checks.choice("schedule", self.schedule, ("linear", "cosine", "wsd", "constant"))
        checks.choice("parallel", self.parallel, ("ddp", "fsdp"))
        if self.precision not in PRECISIONS:
            raise InvalidArgument(f"--precision {self.precision!r}: use auto, fp32 or bf16")
        # what is studied
        if self.dropout is not None:
            checks.probability("dropout", self.dropout)
        self.vocab_size = checks.count("vocab_size", self.vocab_size, MIN_VOCAB_SIZE,
                                       MAX_VOCAB_SIZE)
        checks.probability("validation_share", self.validation_share)
        self.seq_len = checks.count("seq_len", self.seq_len, MIN_SEQ_LEN, MAX_SEQ_LEN)
        checks.probability("label_smoothing", self.label_smoothing)
        checks.probability("decoder_masking_rate", self.decoder_masking_rate)
        self.dupmae_weight = checks.non_negative("dupmae_weight", self.dupmae_weight)
        if self.dupmae_weight and self.objective != "retromae":
            raise InvalidArgument(f"--dupmae-weight {self.dupmae_weight:g} is a term of "
                                  "--objective retromae: add it, or drop --dupmae-weight")
        self.batch_size = checks.count("batch_size", self.batch_size, 1, MAX_BATCH)
        self.grad_accum = checks.count("grad_accum", self.grad_accum, 1, MAX_BATCH)
        self._resolve_step_tokens()
        if self.batch_size % self.grad_accum:
            raise InvalidArgument(f"--batch-size {self.batch_size} is not divisible by "
                                  f"--grad-accum {self.grad_accum}")
        self._resolve_batch_tokens()
        checks.positive("lr", self.lr)
        if self.lr > 10:
            raise InvalidArgument(f"lr={self.lr!r} (--lr) is not a learning rate: use a value "
                                  "≤ 10 (typically 1e-4 to 1e-3)")
        checks.non_negative("weight_decay", self.weight_decay)
        checks.probability("beta1", self.beta1)
        checks.probability("beta2", self.beta2)
        checks.positive("eps", self.eps)
        self._validate_training_options()
        checks.non_negative("clip", self.clip)
        checks.non_negative("warmup", self.warmup)
        checks.probability("decay", self.decay, closed_high=True)
        checks.probability("min_lr", self.min_lr, closed_high=True)
        self.seed = checks.count("seed", self.seed, 0, 2**32 - 1)
        if self.prefetch is not None:
            self.prefetch = checks.count("prefetch", self.prefetch, 0, 64)
        # budget
        if self.steps is None and self.tokens is None and self.time is None:
            raise InvalidArgument("no budget: give --steps, --tokens or --time")
        if self.steps is not None:
            self.steps = checks.count("steps", self.steps, 1, MAX_COUNT)
        if self.tokens is not None:
            self.tokens = checks.count("tokens", self.tokens, 1, MAX_COUNT)
        if self.time is not None and parse_duration(self.time) <= 0:
            raise InvalidArgument(f"--time {self.time!r} must be a positive duration, "
                                  "e.g. 90s, 10m or 2h")
        if self.time_bound is not None:
            _text("time_bound", self.time_bound)
            if parse_duration(self.time_bound, "--time-bound") <= 0:
                raise InvalidArgument(f"--time-bound {self.time_bound!r} must be a positive "
                                      "duration, e.g. 30m or 8h")
        if self.warmup >= 1 and not float(self.warmup).is_integer():
            raise InvalidArgument(f"--warmup {self.warmup!r}: use a share of the budget "
                                  "(< 1) or a whole number of steps (≥ 1)")
        # evaluation and runtime
        self.eval_every = checks.count("eval_every", self.eval_every, 0, MAX_COUNT)
        self.eval_blocks = checks.count("eval_blocks", self.eval_blocks, 1, MAX_COUNT)
        self.pppl_sentences = checks.count("pppl_sentences", self.pppl_sentences, 0, MAX_COUNT)
        self.save_every = checks.count("save_every", self.save_every, 0, MAX_COUNT)
        self.keep_checkpoints = checks.count("keep_checkpoints", self.keep_checkpoints, 1, 1000)
        self.log_every = checks.count("log_every", self.log_every, 1, MAX_COUNT)
        if self.threads is not None:
            self.threads = checks.count("threads", self.threads, 1, 4096)
        if self.halt_after is not None:
            self.halt_after = checks.count("halt_after", self.halt_after, 1, MAX_COUNT)
        self.fill_mask_examples = checks.count("fill_mask_examples", self.fill_mask_examples, 0, 1000)
        self.progress_every = float(checks.non_negative("progress_every", self.progress_every))
        self._validate_positions()
        if self.cuda_graphs and self.device == "cpu":
            raise InvalidArgument("--cuda-graphs: CUDA graphs need a GPU and this run is on "
                                  "cpu: train with --device cuda or drop --cuda-graphs")
        if self.phases is not None:  # checked now: a bad phase would fail mid-run
            check_config_phases(self)

    def _resolve_step_tokens(self) -> None:
        """--step-tokens is the step in tokens: it sets --batch-size (whole blocks)."""
        if self.step_tokens is None:
            return
        self.step_tokens = checks.count("step_tokens", self.step_tokens, 1,
                                        MAX_BATCH * MAX_SEQ_LEN)
        if self.step_tokens % self.seq_len:
            raise InvalidArgument(
                f"--step-tokens {self.step_tokens} is not a multiple of --seq-len "
                f"{self.seq_len}: a step trains on whole blocks; use e.g. "
                f"{max(1, self.step_tokens // self.seq_len) * self.seq_len}")
        blocks = self.step_tokens // self.seq_len
        default = PretrainConfig.__dataclass_fields__["batch_size"].default
        if self.batch_size not in (default, blocks):
            raise InvalidArgument(f"--step-tokens {self.step_tokens} and --batch-size "
                                  f"{self.batch_size} both set the step: give one of them")
        self.batch_size = blocks

    def _resolve_batch_tokens(self) -> None:
        """--batch-tokens bounds one micro-batch (the blocks of one forward pass, counted
        over all processes, so the bound holds on any number of them): the smallest
        --grad-accum from the given one up that divides the step and fits the bound. The
        step is unchanged, so is what the run computes."""
        if self.batch_tokens is None:
            return
        if isinstance(self.batch_tokens, str):  # the flag's text: auto or a count
            text = self.batch_tokens.strip().lower()
            if text == AUTO:
                self.batch_tokens = AUTO  # measured once the model is built (build_run)
                return
            if not text.isdigit():
                raise InvalidArgument(f"--batch-tokens {self.batch_tokens!r}: give a number "
                                      "of tokens or auto")
            self.batch_tokens = int(text)
        self.batch_tokens = checks.count("batch_tokens", self.batch_tokens, 1)
        if self.batch_tokens < self.seq_len:
            raise InvalidArgument(f"--batch-tokens {self.batch_tokens} is less than one block "
                                  f"(--seq-len {self.seq_len}): use at least {self.seq_len}")
        rows = self.batch_tokens // self.seq_len
        self.grad_accum = next(accum for accum in range(self.grad_accum, self.batch_size + 1)
                               if self.batch_size % accum == 0
                               and self.batch_size // accum <= rows)

    def _validate_training_options(self) -> None:
        """--optimizer, --decoupled-weight-decay, --batch-warmup-*, --unpadded."""
        _text("optimizer", self.optimizer)
        checks.choice("optimizer", self.optimizer, ("adamw", "stableadamw"))
        for name in ("decoupled_weight_decay", "unpadded", "flex_attention"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"--{flag(name)} {getattr(self, name)!r}: use true or "
                                      "false")
        self.batch_warmup_tokens = checks.count("batch_warmup_tokens", self.batch_warmup_tokens,
                                                0, MAX_COUNT)
        if self.batch_warmup_start is not None:
            self.batch_warmup_start = checks.count("batch_warmup_start",
                                                   self.batch_warmup_start, 1, MAX_BATCH)
            if self.batch_warmup_start > self.batch_size:
                raise InvalidArgument(f"--batch-warmup-start {self.batch_warmup_start} is "
                                      f"larger than --batch-size {self.batch_size}: the "
                                      "warm-up grows the batch up to --batch-size")
            if not self.batch_warmup_tokens:
                raise InvalidArgument("--batch-warmup-start without --batch-warmup-tokens: "
                                      "give the tokens the warm-up lasts")

    def _validate_positions(self) -> None:
        """--seq-len fits the model's positions: the preset's, or a local --init's."""
        if self.init is None:
            try:
                parse_preset(self.model)
            except ValueError as error:
                raise InvalidArgument(f"--model: {error}") from error
            limit = preset_positions(self.model)
            if self.seq_len > limit:
                raise InvalidArgument(f"--seq-len {self.seq_len} is longer than the "
                                      f"{self.model} preset's {limit} positions: use at most "
                                      f"{limit}")
            return
        limit = init_positions(self.init)
        if limit is not None and self.seq_len > limit:
            raise InvalidArgument(f"--seq-len {self.seq_len} is longer than --init "
                                  f"{self.init!r} allows ({limit} positions)")

    # ---- what is studied vs how it runs
    def studied(self) -> dict:
        """The fields a resumed run must share with its directory (budget may be extended)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.metadata["group"] == STUDIED}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return dump_yaml(self.to_dict())

    def replace(self, **overrides) -> PretrainConfig:
        return from_dict({**self.to_dict(), **overrides})


def _text(name: str, value) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"--{flag(name)} {value!r}: give a non-empty text value")



def default_model(objective: str) -> str:
    """The preset a run trains when --model is not given."""
    return "electra-mini" if objective == "electra" else "modernbert-mini"


def flag(name: str) -> str:
    return name.replace("_", "-")


def from_dict(values: dict, source: str = "config") -> PretrainConfig:
    known = {f.name for f in fields(PretrainConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise MlmkitError(f"{source}: unknown field(s) {unknown}; valid fields: {sorted(known)}")
    return PretrainConfig(**values)


def budget_overrides(values: dict) -> dict:
    """A --time or --tokens budget given without --steps replaces the default step budget."""
    if ("time" in values or "tokens" in values) and "steps" not in values:
        return {**values, "steps": None}
    return values


def load_config(path: str | Path, **overrides) -> PretrainConfig:
    """A config from a YAML file, with `overrides` (flags) applied on top."""
    values = read_config_file(path)
    return from_dict(budget_overrides({**values, **overrides}), source=str(path))


def read_config_file(path: str | Path) -> dict:
    """The {field: value} mapping of a YAML config file, unchecked."""
    path = Path(path)
    if not path.is_file():
        raise PathError(f"config file {str(path)!r} does not exist (or is not a file)")
    try:
        values = load_yaml(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as error:
        raise InvalidData(f"config file {str(path)!r} is not UTF-8 text (byte offset "
                          f"{error.start}): save it as UTF-8") from error
    except OSError as error:
        raise PathError(f"config file {str(path)!r} cannot be read: {error.strerror}") from error
    except NotFinite as error:
        raise InvalidArgument(f"config file {str(path)!r}: {error}") from None
    except yaml.YAMLError as error:
        raise MlmkitError(f"config file {str(path)!r} is not valid YAML: {error}") from error
    if not isinstance(values, dict):
        raise MlmkitError(f"config file {str(path)!r} must hold a mapping of field: value")
    return values


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$")


def parse_duration(text: str, flag_name: str = "--time") -> float:
    """Seconds in `90`, `90s`, `10m`, `1.5h`."""
    match = _DURATION.match(str(text))
    if not match:
        raise InvalidArgument(f"{flag_name} {text!r} is not a duration: use e.g. 90s, 10m or "
                              "2h")
    value, unit = float(match.group(1)), (match.group(2) or "s")[0]
    return value * {"s": 1, "m": 60, "h": 3600}[unit]
