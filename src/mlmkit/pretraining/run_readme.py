"""The README.md of a pretraining run directory: what each file is, how to resume the run
and how to load its models, for someone who opens the folder cold (months later, or on
another machine). Written when the run opens its directory."""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.staging import write_text

README = "README.md"


def run_readme(run_dir: Path, config) -> str:
    """The README's text for the run in `run_dir` trained with `config`."""
    run = str(run_dir)
    electra = config.objective == "electra"
    discriminator = ("\n| `final/discriminator/` | the ELECTRA discriminator "
                     "(`ElectraForPreTraining.from_pretrained`) |" if electra else "")
    return f"""# Pretraining run `{Path(run).name}`

A masked language model pretrained by `mlmkit pretrain` (model `{config.init or config.model}`,
objective `{config.objective}`, corpus `{config.corpus}`).

The commands below name the run as it was given (`{run}`): run them from the folder the
run was started in, or put this folder's path in its place.

## Files

| path | what it is |
| --- | --- |
| `config.yaml` | the run's settings, as used (the tokenizer's real vocabulary size included; its first lines say the device, precision and threads `auto` resolved to); a record: `--config` starts a new run from it |
| `tokenizer/` | the run's tokenizer, stored once (the step folders have none of their own) |
| `metrics.jsonl` | one JSON record per log line: `split` "train" (loss, lr, tokens/s, ...) or "eval" (held-out loss, accuracy, pseudo-perplexity) |
| `summary.json` | how the run ended: status, steps, tokens, speed, last evaluation, `final_dir` |
| `checkpoints/state-N.pt` | the training state after step N (weights, optimizer, data position, random states), with its `.sha256`: what `--resume` continues from |
| `step-N/` | the model after step N, in Hugging Face format (its training state is `checkpoints/state-N.pt`) |
| `final/` | the trained model with its tokenizer, written when the run finishes{discriminator} |
| `plots/`, `tensorboard/` | loss, accuracy and learning-rate curves (with the `plots` extra) |
| `wsd-stable/` | (WSD schedule) the state at the end of the stable phase, where an extension continues |

## Resume or extend

```bash
mlmkit pretrain --resume {run}                  # continue where it stopped
mlmkit pretrain --resume {run} --steps 2000     # train longer: the schedule continues
mlmkit pretrain --restart --run-dir {run}       # start over here (removes the run's files)
```

## Load the model

```python
import mlmkit
from transformers import AutoModelForMaskedLM, AutoTokenizer

mlm = mlmkit.load("{run}/final")                  # score, fill, generate, embed
model = AutoModelForMaskedLM.from_pretrained("{run}/final")
tokenizer = AutoTokenizer.from_pretrained("{run}/final")
# a step folder: mlmkit.load("{run}/step-N") finds the run's tokenizer;
# with transformers: AutoTokenizer.from_pretrained("{run}/tokenizer")
```

```bash
mlmkit fill {run}/final "The [MASK] is closed."
mlmkit serve {run}/final          # served under the run's name, "{Path(run).name}"
```
"""


def write_run_readme(run_dir: Path, config) -> None:
    write_text(Path(run_dir) / README, run_readme(run_dir, config))
