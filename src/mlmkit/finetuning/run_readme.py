"""The README.md of a fine-tuning run directory: what each file is, how to resume, how to
load and use the fine-tuned model, for someone who opens the folder cold."""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.staging import write_text

README = "README.md"


def finetune_readme(run_dir: Path, task: str, method: str, seeds: list[int],
                    lora: bool, merged: bool) -> str:
    """The README's text of the fine-tuning run in `run_dir`."""
    run = str(run_dir)
    best = f"{run}/best" if len(seeds) == 1 else f"{run}/seed-{seeds[0]}/best"
    several = (f"\nThe run has one folder per seed (`seed-{seeds[0]}/` ... "
               f"`seed-{seeds[-1]}/`), each laid out as below.\n" if len(seeds) > 1 else "")
    if lora and not merged:
        model = ("a LoRA adapter (`peft.PeftModel.from_pretrained(base, best)`) with the "
                 "base model's config and the tokenizer")
    elif method == "prompt":
        model = ("the fine-tuned masked LM with its tokenizer and `prompt.json` (the cloze "
                 "template and the verbalizer's label words)")
    else:
        model = ("the classifier the run kept (the last epoch; with `--select best`, the "
                 "epoch best on validation) "
                 "(`AutoModelForSequenceClassification.from_pretrained`) with its tokenizer; "
                 "its config names the labels (`id2label`)")
    auto = "AutoModelForMaskedLM" if method == "prompt" else "AutoModelForSequenceClassification"
    use = "" if lora and not merged else f"""
## Use the classifier

```bash
mlmkit predict {best} texts.txt -o predictions.jsonl   # label and probabilities per line
mlmkit eval classify {best} --task {task} test.tsv   # the task's metrics on a split
```

```python
import mlmkit
from transformers import {auto}, AutoTokenizer

predictions = mlmkit.predict("{best}", ["a first text", "a second one"])
tokenizer = AutoTokenizer.from_pretrained("{best}")
model = {auto}.from_pretrained("{best}")
```
"""
    return f"""# Fine-tuning run `{Path(run).name}`

Task `{task}`, method `{method}`{", LoRA" if lora else ""}, fine-tuned by `mlmkit finetune`.

The commands below name the run as it was given (`{run}`): run them from the folder the
run was started in, or put this folder's path in its place.
{several}
## Files

| path | what it is |
| --- | --- |
| `best/` | {model} |
| `metrics.json` | the best epoch's validation metrics (and test metrics when a test split was given), the per-epoch history, truncated inputs per split, speed |
| `metrics.jsonl` | one JSON record per epoch: training loss and validation metrics |
| `checkpoints/state-N.pt` | the training state after step N (weights, optimizer, schedule, random state, position in the epoch), with its `.sha256`: what `--resume` continues from |

## Resume

```bash
mlmkit finetune MODEL --task {task} ... --resume --run-dir {run}   # the same settings and data
```
{use}"""


def write_finetune_readme(run_dir: Path, **details) -> None:
    write_text(Path(run_dir) / README, finetune_readme(run_dir, **details))
