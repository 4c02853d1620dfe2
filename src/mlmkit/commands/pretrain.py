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
import yaml

HELP = """Pretrain a masked LM on a corpus and save it in Hugging Face format.

With no arguments: a mini ModernBERT on the built-in python-docs corpus (about 5 minutes on 2 CPU cores), then evaluation, the saved model in runs/pretrain/final and a few fill-mask examples.

[bold]Examples[/]

  mlmkit pretrain
  mlmkit pretrain --model tiny --steps 200 --run-dir runs/tiny
  mlmkit pretrain --corpus notes.txt --time 10m --precision bf16 --device cuda
  mlmkit pretrain --init ./runs/pretrain/final --corpus domain.jsonl --steps 2000
  mlmkit pretrain --resume runs/pretrain
  mlmkit pretrain --objective electra --model electra-mini
  mlmkit pretrain --objective diffusion --masking diffusion
  torchrun --nproc_per_node 2 -m mlmkit pretrain --batch-size 32
"""

_FLAG_NAMES = {"time": "--time", "steps": "--steps", "tokens": "--tokens"}


def _annotation(tp) -> type:
    """The Optional[...] CLI type of a config field (Any fields take YAML text)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] if typing.get_args(tp) else []
    base = args[0] if args else tp
    if base not in (int, float, str, bool):
        base = str
    return typing.Optional[base]  # noqa: UP045 (typer needs a runtime type object)


def _field_options() -> list[inspect.Parameter]:
    from mlmkit.train.config import PretrainConfig

    hints = typing.get_type_hints(PretrainConfig)
    params = []
    for f in fields(PretrainConfig):
        default = f.default if f.default is not MISSING else f.default_factory()
        name = "--" + f.name.replace("_", "-")
        decls = (f"{name}/--no-{f.name.replace('_', '-')}",) if hints[f.name] is bool else (name,)
        option = typer.Option(None, *decls, help=f"{f.metadata['help']} (default: {default})",
                              rich_help_panel=f"Config: {f.metadata['group']}",
                              show_default=False)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                        annotation=_annotation(hints[f.name])))
    return params


def _parse_masking(value: str):
    """--masking takes a policy name or a YAML/JSON mapping ('{name: span, rate: 0.15}')."""
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return parsed if isinstance(parsed, dict) else value


def _print_summary(console, result) -> None:
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
    console.print(table)


def pretrain_command(**values) -> None:
    from rich.console import Console

    from mlmkit.train import load_config, pretrain
    from mlmkit.train.config import budget_overrides

    console = Console()
    config_path, resume = values.pop("config_file"), values.pop("resume")
    overrides = budget_overrides({k: v for k, v in values.items() if v is not None})
    if isinstance(overrides.get("masking"), str):
        overrides["masking"] = _parse_masking(overrides["masking"])
    config = load_config(config_path, **overrides) if config_path else None
    result = pretrain(config, resume=resume, overrides=None if config else overrides,
                      console=console)
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun only rank 0 reports (issue 6)
        return
    _print_summary(console, result)
    if result.final_dir is not None and result.summary.get("eval") is not None:
        _print_examples(console, result)
        console.print(f"model saved to [bold]{result.final_dir}[/] (load it with "
                      "AutoModelForMaskedLM.from_pretrained or mlmkit.load_mlm)")
    if result.interrupted:
        console.print(f"[yellow]stopped at step {result.summary['steps']} "
                      f"({result.summary['stop_reason']}); continue with "
                      f"{result.summary['resume_with']}[/]")
        reason = result.summary["stop_reason"]
        if reason in ("SIGINT", "SIGTERM"):
            sys.exit(128 + int(getattr(signal, reason)))


def _print_examples(console, result) -> None:
    from mlmkit.models import load_mlm
    from mlmkit.train.config import load_config
    from mlmkit.train.examples import fill_mask_examples

    count = load_config(Path(result.run_dir) / "config.yaml").fill_mask_examples
    if count <= 0:
        return
    final = Path(result.final_dir)
    if (final / "generator" / "config.json").exists():  # ELECTRA: the generator fills masks
        final = final / "generator"
    mlm = load_mlm(final, device="cpu")
    console.print("[bold]fill-mask examples[/]")
    for text, candidates in fill_mask_examples(mlm, count):
        shown = ", ".join(f"{token!r} {p:.2f}" for token, p in candidates)
        console.print(f"  {text}  →  {shown}")


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
    ]
    params = extra + _field_options()

    def command(**values):
        pretrain_command(**values)

    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = HELP
    return command


def register(app: typer.Typer) -> None:
    app.command("pretrain", help=HELP, no_args_is_help=False)(_build())
