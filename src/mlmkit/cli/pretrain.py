"""`mlmkit pretrain`: every field of PretrainConfig is a flag; --config and --resume on top."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import mlmkit
from mlmkit.cli.options import TRUST_REMOTE_CODE, Given, command, trusting
from mlmkit.core.progress import status
from mlmkit.core.results import dumps
from mlmkit.pretraining.config import PretrainConfig, budget_overrides, from_dict, load_config

DEFAULT_RUN_DIR = "runs/pretrain"  # mlmkit.pretraining.run's (that module loads torch)

HELP = """Pretrain a masked LM on a corpus and save it in Hugging Face format.

With no arguments: a mini ModernBERT on the built-in python-docs corpus, sized for the machine (1,000 steps, about 5 minutes on 2 CPU cores with native bf16; on a CPU without bf16 at most 10 minutes of training, under 15 minutes in all), then evaluation, the saved model in runs/pretrain/final and a few fill-mask examples. Status lines and the progress bar go to standard error (without a terminal, a plain progress line every --progress-every seconds instead of the bar); the summary (or --json) to standard output. The run directory's README.md says what each file is, how to resume and how to load the model.

Threads on a CPU: --threads N, else $MLMKIT_THREADS, else the cores this process may use less those the 1-minute load average says other processes keep busy (at least 1): threads that wait on busy cores slow every step. The first status line states the count.

[bold]Examples[/]

  mlmkit pretrain --model tiny --steps 20 --seq-len 32 --run-dir runs/tiny
  mlmkit pretrain
  mlmkit pretrain --corpus notes.jsonl --text-field body --time 10m --precision bf16 --device cuda
  mlmkit pretrain --init ./runs/pretrain/final --corpus domain.jsonl --steps 2000
  mlmkit pretrain --resume --run-dir runs/pretrain
  mlmkit pretrain --resume --steps 2000    # extend runs/pretrain: the schedule continues
  mlmkit pretrain --resume --run-dir runs/tiny --override eval_every=50
  mlmkit pretrain --restart --run-dir runs/pretrain       # start over in the same directory
  mlmkit pretrain --objective electra --model electra-mini
  mlmkit pretrain --objective diffusion --masking diffusion
  mlmkit pretrain --recipe modernbert --show     # the recipe's phases, resolved
  mlmkit pretrain --recipe modernbert --steps 200
  torchrun --nproc_per_node 2 -m mlmkit pretrain --batch-size 32
"""


def pretrain_command(
    *,
    config_file: Path = typer.Option(None, "--config", help="YAML file of config fields (flags "
                                     "override it)"),
    resume: bool = typer.Option(False, "--resume", help="continue the run in --run-dir "
                                "(default: runs/pretrain) where it stopped"),
    restart: bool = typer.Option(False, "--restart", help="start over in a run directory that "
                                 "holds a run (its checkpoints, final/ and logs are removed)"),
    override: list[str] = typer.Option(None, "--override", metavar="KEY=VALUE", help="change "
                                       "a config field, e.g. on --resume steps=2000 (budget, "
                                       "evaluation and runtime fields only; repeatable)"),
    show: bool = typer.Option(False, "--show", help="with --recipe: print the recipe's source "
                              "and resolved config (phases included), then exit"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON on standard "
                                 "output"),
    trust_remote_code: bool = TRUST_REMOTE_CODE,
    values: Annotated[dict, Given(PretrainConfig)],
) -> None:
    """Only the flags given override the --config file, the recipe or the resumed run."""
    with trusting(trust_remote_code):  # an --init model's own code
        run_dir = Path(values.pop("run_dir", None) or DEFAULT_RUN_DIR) if resume else None
        _pretrain(values, config_file, run_dir, restart, override, show, as_json)


def _pretrain(values, config_path, resume, restart, override, show, as_json) -> None:
    if values.get("corpus") is not None:  # --corpus a.txt:0.7 --corpus b.txt:0.3
        from mlmkit.corpus.mixture import join_corpus_spec  # numpy: not for --help

        values["corpus"] = join_corpus_spec(values["corpus"])
    given = mlmkit.pretraining.run_state.parse_overrides(override)
    overrides = budget_overrides({**values, **given})
    if "masking" in overrides:
        overrides["masking"] = mlmkit.masking.config.parse_masking_option(overrides["masking"])
    # --recipe NAME [--show]: a recipe's config and phases, flags on top
    recipe_config = mlmkit.pretraining.recipes.recipe_from_flags(overrides, show, config_path,
                                                                 resume)
    if show:
        return
    if recipe_config is not None:
        config_path, overrides = None, recipe_config
    elif config_path is None and resume is None and not {"steps", "tokens", "time"} & set(
            overrides):  # no budget given: one sized for this machine
        budget = mlmkit.pretraining.budget.default_budget(overrides.get("device"),
                                                          overrides.get("precision"))
        overrides.update(budget)
        if "time" in budget:
            status(f"budget: {budget['steps']} steps or {budget['time']} of training, "
                   "whichever comes first: the default on a CPU without native bf16; give "
                   "--steps, --tokens or --time to choose")
    config = load_config(config_path, **overrides) if config_path else (
        None if recipe_config is None else from_dict(overrides, source="--recipe"))
    result = mlmkit.pretrain(config, resume=resume, overrides=None if config else overrides,
                             restart=restart)
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun only rank 0 reports
        return
    summary = result.summary
    if as_json:
        print(dumps(summary))
    else:
        out = Console(highlight=False)
        out.print(_summary_table(result))
        if result.final_dir is not None and summary.get("eval") is not None:
            _print_examples(out, result)
    if result.final_dir is not None:
        status(f"model saved to {result.final_dir} (load it with "
               "AutoModelForMaskedLM.from_pretrained or mlmkit.load; "
               f"{Path(result.run_dir) / 'README.md'} says what each file of the run is)")
        if (Path(result.final_dir) / "discriminator" / "config.json").exists():
            status(f"ELECTRA discriminator saved to {result.final_dir}/discriminator (load "
                   "it with ElectraForPreTraining.from_pretrained)")
    if result.interrupted:
        status(f"stopped at step {summary['steps']} ({summary['stop_reason']}); continue "
               f"with {summary['resume_with']}")
        reason = summary["stop_reason"]
        if reason in ("SIGINT", "SIGTERM"):
            sys.exit(128 + int(getattr(signal, reason)))


def _summary_table(result):
    summary = result.summary
    table = Table(title="pretraining summary", show_header=False)
    for key in ("status", "model", "objective", "steps", "tokens", "train_seconds",
                "tokens_per_s", "final_dir"):
        value = summary.get(key)
        if value is None:  # a stopped run has no final model; a zero-second run no rate
            if key != "final_dir":
                continue
            value = f"none yet: the run stopped ({summary.get('stop_reason')}); resume it"
        if isinstance(value, float):
            value = f"{value:,.1f}"
        elif isinstance(value, int):
            value = f"{value:,}"
        table.add_row(key.replace("_", " "), str(value))
    for key, value in summary.get("eval", {}).items():
        if key != "step" and isinstance(value, float):
            table.add_row(f"validation {key.replace('_', ' ')}", f"{value:.4f}")
    return table


def _print_examples(console, result) -> None:
    from mlmkit.pretraining.examples import FillExample, fill_mask_examples  # not at --help

    examples = [FillExample(**e) for e in result.summary.get("fill_mask_examples") or []]
    if not examples:
        return
    mlm = mlmkit.load_mlm(Path(result.final_dir), device="cpu")
    console.print("fill-mask examples (held-out text, one word or residue masked)",
                  markup=False)
    for text, answer, candidates in fill_mask_examples(mlm, examples):
        shown = ", ".join(f"{token!r} {p:.2f}" for token, p in candidates)
        console.print(f"  {text}  →  {shown}  (the answer: {answer!r})", markup=False)


def register(app: typer.Typer) -> None:
    command(app, "pretrain", pretrain_command, help=HELP, no_args_is_help=False)
