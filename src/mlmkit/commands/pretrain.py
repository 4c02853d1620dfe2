"""`mlmkit pretrain`: every field of PretrainConfig is a flag; --config and --resume on top."""

from __future__ import annotations

import inspect
import os
import signal
import sys
import typing
from dataclasses import MISSING, fields
from pathlib import Path

import typer

HELP = """Pretrain a masked LM on a corpus and save it in Hugging Face format.

With no arguments: a mini ModernBERT on the built-in python-docs corpus, sized for the machine (1,000 steps, about 5 minutes on 2 CPU cores with native bf16; on a CPU without bf16 at most 10 minutes of training, under 15 minutes in all), then evaluation, the saved model in runs/pretrain/final and a few fill-mask examples. Status lines and the progress bar go to standard error; the summary (or --json) to standard output.

[bold]Examples[/]

  mlmkit pretrain --model tiny --steps 20 --seq-len 32 --run-dir runs/tiny
  mlmkit pretrain
  mlmkit pretrain --corpus notes.txt --time 10m --precision bf16 --device cuda
  mlmkit pretrain --init ./runs/pretrain/final --corpus domain.jsonl --steps 2000
  mlmkit pretrain --resume runs/pretrain
  mlmkit pretrain --resume runs/pretrain --steps 2000    # extend: the schedule continues
  mlmkit pretrain --resume runs/pretrain --override eval_every=50
  mlmkit pretrain --restart --run-dir runs/pretrain       # start over in the same directory
  mlmkit pretrain --objective electra --model electra-mini
  mlmkit pretrain --objective diffusion --masking diffusion
  mlmkit pretrain --recipe modernbert --show     # the recipe's phases, resolved
  mlmkit pretrain --recipe modernbert --steps 200
  torchrun --nproc_per_node 2 -m mlmkit pretrain --batch-size 32
"""

# The runtime flags every command shares (mlmkit.cli_options): same names, help and
# defaults; here their default is "not given", so a --config file's value stands.
SHARED = {"device": "DEVICE", "precision": "PRECISION", "threads": "THREADS", "seed": "SEED"}

_FLAG_NAMES = {"time": "--time", "steps": "--steps", "tokens": "--tokens"}


def _annotation(tp) -> type:
    """The Optional[...] CLI type of a config field (Any fields take YAML text)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] if typing.get_args(tp) else []
    base = args[0] if args else tp
    if base not in (int, float, str, bool):
        base = str
    return typing.Optional[base]  # noqa: UP045 (typer needs a runtime type object)


def _field_options() -> list[inspect.Parameter]:
    from mlmkit.pretraining.config import PretrainConfig

    hints = typing.get_type_hints(PretrainConfig)
    params = []
    from mlmkit import cli_options

    for f in fields(PretrainConfig):
        default = f.default if f.default is not MISSING else f.default_factory()
        name = "--" + f.name.replace("_", "-")
        decls = (f"{name}/--no-{f.name.replace('_', '-')}",) if hints[f.name] is bool else (name,)
        text = f.metadata["help"]
        if f.name == "steps":
            default = "1000; on a CPU without native bf16 (fp32) also --time 10m"
        annotation, flag_default = _annotation(hints[f.name]), None
        if f.name == "corpus":  # repeatable: several sources, or a weighted mixture
            annotation = typing.Optional[list[str]]  # noqa: UP045
        if f.name in SHARED:  # the shared flag: its help, its default
            shared = getattr(cli_options, SHARED[f.name])
            text, flag_default = shared.help.rstrip("."), shared.default
            if flag_default is not None:
                annotation = type(flag_default)
        option = typer.Option(flag_default, *decls, help=f"{text} (default: {default})",
                              rich_help_panel=f"Config: {f.metadata['group']}",
                              show_default=False, min=1 if f.name == "threads" else None,
                              metavar="SOURCE[:WEIGHT]" if f.name == "corpus" else None)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                        annotation=annotation))
    return params


def _summary_table(result):
    from rich.table import Table

    summary = result.summary
    table = Table(title="pretraining summary", show_header=False)
    for key in ("status", "model", "objective", "steps", "tokens", "train_seconds",
                "tokens_per_s", "final_dir"):
        value = summary.get(key)
        if isinstance(value, float):
            value = f"{value:,.1f}"
        elif isinstance(value, int):
            value = f"{value:,}"
        table.add_row(key.replace("_", " "), str(value))
    for key, value in summary.get("eval", {}).items():
        if key != "step" and isinstance(value, float):
            table.add_row(f"validation {key.replace('_', ' ')}", f"{value:.4f}")
    return table


def _batch_from_tokens(values: dict) -> None:
    """--batch-tokens: tokens per optimizer step, i.e. --batch-size × --seq-len."""
    batch_tokens = values.pop("batch_tokens", None)
    if batch_tokens is None:
        return
    from mlmkit.errors import InvalidArgument
    from mlmkit.pretraining.config import PretrainConfig

    if values.get("batch_size") is not None:
        raise InvalidArgument("give --batch-tokens or --batch-size, not both")
    seq_len = values.get("seq_len") or PretrainConfig.__dataclass_fields__["seq_len"].default
    if batch_tokens % seq_len:
        raise InvalidArgument(f"--batch-tokens {batch_tokens} is not a multiple of --seq-len "
                              f"{seq_len}: a step trains on whole blocks; use e.g. "
                              f"{max(1, batch_tokens // seq_len) * seq_len}")
    values["batch_size"] = batch_tokens // seq_len


def pretrain_command(**values) -> None:
    from rich.console import Console

    from mlmkit.core.progress import status
    from mlmkit.core.results import dumps
    from mlmkit.evaluation.training import pretrain
    from mlmkit.masking.config import parse_masking_option
    from mlmkit.pretraining import load_config
    from mlmkit.pretraining.config import budget_overrides, from_dict

    config_path, resume = values.pop("config_file"), values.pop("resume")
    restart, override = values.pop("restart"), values.pop("override")
    as_json = values.pop("json")
    show = values.pop("show")
    _batch_from_tokens(values)
    if values.get("corpus") is not None:  # --corpus a.txt:0.7 --corpus b.txt:0.3
        from mlmkit.corpus.mixture import join_corpus_spec

        values["corpus"] = join_corpus_spec(values["corpus"])
    from mlmkit.pretraining.run_state import parse_overrides

    overrides = budget_overrides({**{k: v for k, v in values.items() if v is not None},
                                  **parse_overrides(override)})
    if "masking" in overrides:
        overrides["masking"] = parse_masking_option(overrides["masking"])
    # --recipe NAME [--show]: a recipe's config and phases, flags on top (issue 19)
    from mlmkit.pretraining.recipes import recipe_from_flags

    recipe_config = recipe_from_flags(overrides, show, config_path, resume)
    if show:
        return
    if recipe_config is not None:
        config_path, overrides = None, recipe_config
    elif config_path is None and resume is None and not {"steps", "tokens", "time"} & set(
            overrides):  # no budget given: one sized for this machine
        from mlmkit.pretraining.budget import default_budget

        budget = default_budget(overrides.get("device"), overrides.get("precision"))
        overrides.update(budget)
        if "time" in budget:
            status(f"budget: {budget['steps']} steps or {budget['time']} of training, "
                   "whichever comes first: the default on a CPU without native bf16; give "
                   "--steps, --tokens or --time to choose")
    config = load_config(config_path, **overrides) if config_path else (
        None if recipe_config is None else from_dict(overrides, source="--recipe"))
    result = pretrain(config, resume=resume, overrides=None if config else overrides,
                      restart=restart)
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun only rank 0 reports (issue 6)
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
               "AutoModelForMaskedLM.from_pretrained or mlmkit.load_mlm)")
        if (Path(result.final_dir) / "discriminator" / "config.json").exists():
            status(f"ELECTRA discriminator saved to {result.final_dir}/discriminator (load "
                   "it with ElectraForPreTraining.from_pretrained)")
    if result.interrupted:
        status(f"stopped at step {summary['steps']} ({summary['stop_reason']}); continue "
               f"with {summary['resume_with']}")
        reason = summary["stop_reason"]
        if reason in ("SIGINT", "SIGTERM"):
            sys.exit(128 + int(getattr(signal, reason)))


def _print_examples(console, result) -> None:
    from mlmkit.models import load_mlm
    from mlmkit.pretraining.config import load_config
    from mlmkit.pretraining.examples import fill_mask_examples

    count = load_config(Path(result.run_dir) / "config.yaml").fill_mask_examples
    if count <= 0:
        return
    mlm = load_mlm(Path(result.final_dir), device="cpu")
    console.print("fill-mask examples", markup=False)
    for text, candidates in fill_mask_examples(mlm, count):
        shown = ", ".join(f"{token!r} {p:.2f}" for token, p in candidates)
        console.print(f"  {text}  →  {shown}", markup=False)


def _build():
    extra = [
        inspect.Parameter("config_file", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(None, "--config", help="YAML file of config "
                                               "fields (flags override it)"),
                          annotation=typing.Optional[Path]),  # noqa: UP045
        inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(None, "--resume", help="continue the run in "
                                               "this directory where it stopped"),
                          annotation=typing.Optional[Path]),  # noqa: UP045
        inspect.Parameter("restart", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(False, "--restart", help="start over in a run "
                                               "directory that holds a run (its checkpoints, "
                                               "final/ and logs are removed)"),
                          annotation=bool),
        inspect.Parameter("override", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(None, "--override", metavar="KEY=VALUE",
                                               help="change a config field, e.g. on --resume "
                                               "steps=2000 (budget, evaluation and runtime "
                                               "fields only; repeatable)"),
                          annotation=typing.Optional[list[str]]),  # noqa: UP045
        inspect.Parameter("batch_tokens", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(None, "--batch-tokens", min=1,
                                               help="tokens per optimizer step (= --batch-size "
                                               "× --seq-len; sets --batch-size)",
                                               rich_help_panel="Config: what is studied"),
                          annotation=typing.Optional[int]),  # noqa: UP045
        inspect.Parameter("show", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(False, "--show", help="with --recipe: print "
                                               "the recipe's source and resolved config "
                                               "(phases included), then exit"),
                          annotation=bool),
        inspect.Parameter("json", inspect.Parameter.KEYWORD_ONLY,
                          default=typer.Option(False, "--json", help="print the summary as "
                                               "JSON on standard output"),
                          annotation=bool),
    ]
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY,
                                annotation=typer.Context)
    params = [context, *extra, *_field_options()]

    def command(ctx: typer.Context, **values):
        from typer._click.core import ParameterSource

        for name in SHARED:  # a shared flag left at its default does not override --config
            if ctx.get_parameter_source(name) not in (ParameterSource.COMMANDLINE,
                                                      ParameterSource.ENVIRONMENT):
                values[name] = None
        pretrain_command(**values)

    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = HELP
    from mlmkit.cli_options import shared_options

    return shared_options(command)  # --trust-remote-code, for an --init model's code


def register(app: typer.Typer) -> None:
    app.command("pretrain", help=HELP, no_args_is_help=False)(_build())
