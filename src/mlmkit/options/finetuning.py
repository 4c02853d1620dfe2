"""The fine-tuning options: how `mlmkit.finetune` trains (`Finetuning`) and what it trains
on (`FinetuneData`, its data arguments). `mlmkit.finetune` takes these fields as keywords,
`mlmkit finetune` as flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlmkit.options import option


@dataclass(frozen=True)
class Finetuning:
    """How a model is fine-tuned on a task (each field is a flag of `mlmkit finetune`)."""

    method: Literal["head", "prompt"] = option(
        "head", "head (a classification head) or prompt (PET / LM-BFF: a cloze template "
        "through the MLM head).")
    epochs: int | None = option(None, "Epochs (default 3; few-shot 20).")
    lr: float | None = option(
        None, "Peak learning rate (default 5e-5, the Trainer's; few-shot 1e-4).")
    batch_size: int | None = option(
        None, "Examples per optimizer step (default 8, the Trainer's).")
    max_length: int = option(
        128, "Longest input in tokens; longer ones are truncated and counted in metrics.json.")
    warmup: float | None = option(None, "Share of the steps of linear warm-up (default 0, "
                                  "the Trainer's; few-shot 0.1).")
    weight_decay: float | None = option(None, "AdamW weight decay (default 0, the Trainer's; "
                                        "few-shot 0.01).")
    bucket: bool = option(False, "Length-bucketed batches (less padding where batches are "
                          "padded; examples meet in a less random order).")
    select: Literal["last", "best"] | None = option(
        None, "The model kept: last (the last epoch's) or best (evaluate each epoch, keep "
        "the best on the validation split).")
    packed: bool | None = option(
        None, "Packed batches: no padding, attention within each example (head fine-tuning "
        "of ModernBERT-, BERT-, RoBERTa-, XLM-R- and ELECTRA-type models). Default: wherever "
        "the model has them.")
    shots: int | None = option(None, "Few-shot: K training examples per class.")
    seeds: int = option(1, "Runs with seeds seed..seed+N-1; mean ± std.")
    template: str | None = option(
        None, "Prompt method: a cloze template with {text} (or {text1} and {text2}) and one "
        "[MASK].")
    verbalizer: str | None = option(
        None, "Prompt method: JSON {label: word} or a file holding it.")
    lora: bool = option(False, "Train LoRA adapters (peft) only.", flag="--lora")
    lora_rank: int = option(8, "LoRA rank.")
    lora_alpha: float = option(16.0, "LoRA alpha (scaling).")
    lora_targets: str | None = option(
        None, "Modules that get adapters, comma-separated (default: the attention query and "
        "value).")
    merge_lora: bool = option(
        False, "Save the LoRA model merged into a full model instead of an adapter.",
        flag="--merge-lora")
    train_limit: int | None = option(
        None, "Use at most N training examples (a fixed sample).")
    eval_limit: int | None = option(None, "Evaluate on at most N examples (a fixed sample).")
    save_every: int = option(
        0, "Also save the training state every N steps (always: each epoch's end and on "
        "Ctrl-C).")
    halt_after: int | None = option(None, "Stop (resumably) after N steps.")


@dataclass(frozen=True)
class FinetuneData:
    """The task, its data and the run directory of `mlmkit.finetune` (each field is a flag
    of `mlmkit finetune`)."""

    task: str = option("sst2", "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, agnews, or "
                       "a name of your own with --text-field.")
    train: str | None = option(None, "Training file (JSONL, TSV or CSV; - is standard input).")
    validation: str | None = option(None, "Validation file (default: the dataset's; else, "
                                    "without --test, 10% of train carved with a fixed seed).")
    test: str | None = option(None, "Test file: the kept model is evaluated on it.")
    dataset: str | None = option(None, "A Hugging Face datasets name NAME[:CONFIG] "
                                 "(downloaded if needed; see --offline).")
    offline: bool = option(False, "Read --dataset names and hub models from the local Hugging "
                           "Face caches only, never the network.", flag="--offline")
    text_field: str | None = option(None, "The text column (field), or two comma-separated "
                                    "(sentence pairs).")
    label_field: str | None = option(None, "The label column (field) (default: label).")
    regression: bool | None = option(None, "A custom task's kind (default: classification).",
                                     flag="--regression/--classification")
    run_dir: str | None = option(None, "Where the best model (best/), metrics.json, "
                                 "checkpoints and a README.md go (mlmkit finetune: default "
                                 "runs/finetune/TASK, or TASK-2, ... when that holds a run; "
                                 "the Python function writes nothing without it).")
    resume: bool = option(False, "Continue the run in --run-dir (default "
                          "runs/finetune/TASK).", flag="--resume")
