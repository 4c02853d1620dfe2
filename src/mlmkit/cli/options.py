"""The command line's one way of declaring flags.

- The runtime flags every command shares are defined once here (DEVICE, PRECISION, ...), so
  their names, defaults and help are the same everywhere (docs/CLI.md); a command that runs
  a model declares them all at once as `runtime: Runtime`.
- A task's options come from its options dataclass (`mlmkit.options`): a command parameter
  annotated with the dataclass (`sampling: Sampling`) becomes one flag per field (`--min-gap`
  from `min_gap`, the field's help, type, choices and default), and the command receives the
  dataclass built from the parsed values. `Given(SomeConfig)` instead hands over only the
  flags given on the command line, as a dict (so a config file's values stand). `command()`
  registers every command this way, as a `Command`; `group()` makes every group, a `Group`.
- `Command` and `Group` are where the whole command line's conventions are applied: the old
  flags of `mlmkit.cli.vocabulary` are read in today's words, choice values in any accepted
  spelling, and help is drawn by `mlmkit.cli.help` (metavariables, width, examples first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import typing
from dataclasses import dataclass
from typing import Annotated, Literal

import typer
from typer.core import TyperCommand, TyperGroup

from mlmkit.cli import help as help_text
from mlmkit.cli import vocabulary
from mlmkit.core import checks
from mlmkit.engine.job_shards import parse_shard
from mlmkit.options import default_of, fields_of, types_of

DEVICE = typer.Option("auto", "--device", help="auto (the first GPU if any, else cpu), cpu, "
                      "cuda, cuda:N or mps.", rich_help_panel="Runtime")
PRECISION = typer.Option("auto", "--precision", help="auto, fp32 or bf16. auto: fp32 for "
                         "scores and inference; bf16 autocast for training where the hardware "
                         "multiplies bf16 natively.", rich_help_panel="Runtime")
THREADS = typer.Option(None, "--threads", min=1, help="CPU threads (default: $MLMKIT_THREADS, "
                       "else the cores this process may use; training leaves out the cores "
                       "the 1-minute load average says other processes keep busy).",
                       rich_help_panel="Runtime")
BATCH_TOKENS = typer.Option(None, "--batch-tokens", min=1, help="Padded tokens per forward "
                            "batch (default: sized for the model and memory).",
                            rich_help_panel="Runtime")
SEED = typer.Option(0, "--seed", help="Seed of every random choice: same seed, same result.",
                    rich_help_panel="Runtime")
OUTPUT = typer.Option("-", "-o", "--output", help="Where to write the results (- for "
                      "standard output).")
JSON = typer.Option(False, "--json", help="Print machine-readable JSON on standard output.")

TRUST_REMOTE_CODE = typer.Option(False, "--trust-remote-code", help="Run the model code a "
                                 "checkpoint ships with (config.json auto_map: NeoBERT, LLaDA, "
                                 "Dream, ...); read it first, it runs on this machine. "
                                 "Default: $MLMKIT_TRUST_REMOTE_CODE=1, else refused.",
                                 rich_help_panel="Model")

TOKENIZER = typer.Option(None, "--tokenizer", metavar="DIR", help="The tokenizer's folder (or "
                         "hub name), for a model saved without one (default: the model's "
                         "own).", rich_help_panel="Model")

SHARED = {"device": DEVICE, "precision": PRECISION, "threads": THREADS,
          "batch_tokens": BATCH_TOKENS, "seed": SEED, "trust_remote_code": TRUST_REMOTE_CODE,
          "tokenizer": TOKENIZER}
"""Runtime flags by field name: an options field of one of these names is this flag."""

ENCODING = typer.Option("utf-8", "--encoding", help="Text encoding of the input file.")
# The inputs of the commands that take texts (score, embed): a file, or literal texts.
TEXTS_FILE = typer.Argument(None, help="A text per line, JSONL (see --text-field), TSV/CSV "
                            "with a header or FASTA (a protein per record); - reads standard "
                            "input.")
TEXTS = typer.Option([], "--text", help="This text instead of a file (repeatable: one "
                     "output record each, in order).")
# A file worked through by chunks, resumably, and split into independent jobs (score, embed).
CHUNK_TEXTS = typer.Option(2048, "--chunk-texts", help="Texts read and written per chunk (the "
                           "unit a killed run resumes from).")
RESUME = typer.Option(True, "--resume/--no-resume", help="Continue the work a killed run left "
                      "in the output (its partial file, same input and flags); --no-resume "
                      "starts over.")
SHARD = typer.Option(None, "--shard", metavar="I/N", help="Only pieces I, I+N, ... of "
                     "--chunk-texts texts (I from 0), one job per shard; 'merge' (e.g. mlmkit "
                     "score merge) joins the N outputs.")


def check_chunked_file(chunk_texts: int, shard: str | None) -> None:
    """--chunk-texts and --shard checked before a model loads (the file job checks them
    again, for its Python callers)."""
    checks.count("chunk_texts", chunk_texts, 1)
    if shard is not None:
        parse_shard(shard)


TEXT_FIELD = typer.Option(None, "--text-field", help="JSONL/TSV/CSV input: the field holding "
                          "the text (default: text).")
ENCODING_ERRORS = typer.Option("strict", "--encoding-errors", help="strict (stop at the "
                               "first undecodable byte), replace or ignore.")


@dataclass(frozen=True)
class Runtime:
    """How a command loads and runs its model, declared once: a command takes
    `runtime: Runtime` and `command()` expands it into the shared flags above (--device,
    --precision, --threads, --batch-tokens, --seed, --trust-remote-code, --tokenizer; their
    names, help and defaults are SHARED's). The command hands `runtime.load_keywords()` to `mlmkit.load`,
    which resolves them once."""

    device: str = DEVICE.default
    precision: str = PRECISION.default
    threads: int | None = THREADS.default
    batch_tokens: int | None = BATCH_TOKENS.default
    seed: int = SEED.default
    trust_remote_code: bool = TRUST_REMOTE_CODE.default
    tokenizer: str | None = TOKENIZER.default

    def load_keywords(self) -> dict:
        """The keywords of `mlmkit.load(model, ...)` (the seed is no property of a model;
        without --trust-remote-code, $MLMKIT_TRUST_REMOTE_CODE decides)."""
        return {"device": self.device, "precision": self.precision, "threads": self.threads,
                "batch_tokens": self.batch_tokens, "tokenizer": self.tokenizer,
                "trust_remote_code": self.trust_remote_code or None}

    def run_keywords(self) -> dict:
        """The runtime keywords of the functions that load, train and score a model
        themselves (`finetune`, `evaluate_suite`): training resolves its own precision."""
        return {"device": self.device, "precision": self.precision, "threads": self.threads,
                "batch_tokens": self.batch_tokens, "seed": self.seed,
                "tokenizer": self.tokenizer}

    def seed_everything(self) -> None:
        """Fix torch's generator with --seed, also for commands that draw nothing at random
        (every command that runs a model accepts --seed and means the same by it)."""
        import torch  # the one call that needs it before a model loads

        checks.count("seed", self.seed, 0, 2**63 - 1)
        torch.manual_seed(self.seed)


MODEL_PARAMETERS = ("model", "models", "model_a")
"""A command with one of these parameters loads a model: it declares --trust-remote-code
(with `runtime: Runtime`, or `trust_remote_code: bool = TRUST_REMOTE_CODE`) and runs its
body inside `trusting(...)`."""

GIVEN_SOURCES = ("COMMANDLINE", "ENVIRONMENT")


@dataclass(frozen=True)
class Given:
    """Annotate a command parameter `Annotated[dict, Given(SomeConfig)]`: the fields of
    SomeConfig are flags that default to "not given", and the command receives
    {name: value} of the flags given on the command line only."""

    cls: type


PRECISIONS = ("auto", "fp32", "bf16")  # --precision's values (mlmkit.core.devices checks them)


def command_path(ctx) -> str:
    """The command's words below `mlmkit` ("probe rank")."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(reversed(names))


class Command(TyperCommand):
    """Every mlmkit command: its old flags read in today's words (`mlmkit.cli.vocabulary`),
    its choice values in any accepted spelling, its help drawn by `mlmkit.cli.help`."""

    def __init__(self, *args, **settings):
        super().__init__(*args, **settings)
        help_text.label_params(self.params)

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, vocabulary.rewrite(command_path(ctx), list(args),
                                                          self.choices()))

    def choices(self) -> dict[str, tuple]:
        """Each flag that takes one of a set of values -> those values."""
        out = {}
        for param in self.params:
            values = getattr(getattr(param, "type_descriptor", None), "choices", None)
            if param.name == "precision":
                values = PRECISIONS
            if values is not None and getattr(param, "opts", None):
                out.update({opt: tuple(map(str, values)) for opt in param.opts
                            if opt.startswith("--")})
        return out

    def format_help(self, ctx, formatter):
        return _format_help(self, super().format_help, ctx, formatter)


class Group(TyperGroup):
    """Every mlmkit group: its help drawn as a command's (`mlmkit.cli.help`)."""

    def format_help(self, ctx, formatter):
        return _format_help(self, super().format_help, ctx, formatter)


def _format_help(command, format_help, ctx, formatter):
    """Print `command`'s help with its examples first, at the terminal's width."""
    kept = command.help, command.epilog
    command.help, command.epilog = help_text.examples_first(*kept)
    help_text.label_params(command.get_params(ctx))  # --help too, which click adds here
    help_text.use_help_width()
    try:
        return format_help(ctx, formatter)
    finally:
        command.help, command.epilog = kept


def command_group(help: str, **settings) -> typer.Typer:
    """A group of commands (`mlmkit probe ...`), shown by its help when run bare."""
    settings.setdefault("no_args_is_help", True)
    return typer.Typer(help=help, cls=Group, **settings)


def command(app: typer.Typer, name: str, function, **settings) -> None:
    """Register `function` as the command `name` of `app` (settings: typer's `help`,
    `short_help`, `epilog`, ...), its options dataclass parameters expanded into flags."""
    settings.setdefault("cls", Command)
    app.command(name, **settings)(with_options(function))


def subcommand(group: typer.Typer, name: str, **settings):
    """Decorator: register the function as the command `name` of the group `group` by
    `command()` (options dataclass parameters expanded into flags)."""

    def register(function):
        command(group, name, function, **settings)
        return function

    return register


def with_options(function):
    """`function` as typer reads it: each parameter annotated with an options dataclass (or
    `Given`) is replaced by one keyword parameter per field, and the function is called with
    the dataclass (or the dict of given flags) built back from them. A field whose name is
    a parameter of the function itself (`seed`, ...) takes that parameter's value."""
    hints = typing.get_type_hints(function, include_extras=True)
    signature = inspect.signature(function)
    own, groups = [], {}
    for parameter in signature.parameters.values():
        kind = _options_kind(hints.get(parameter.name))
        if kind is None:
            own.append(parameter.replace(annotation=hints.get(parameter.name,
                                                              parameter.annotation)))
        else:
            groups[parameter.name] = kind
    if not groups:
        return function
    taken = {p.name for p in own}
    added = []
    for kind in groups.values():
        given = isinstance(kind, Given)
        cls = kind.cls if given else kind
        types = types_of(cls)
        for field in fields_of(cls):
            if field.name not in taken and field.metadata.get("cli", True):
                added.append(_flag(field, types[field.name], given))
                taken.add(field.name)
    context = "_mlmkit_context"
    added.append(inspect.Parameter(context, inspect.Parameter.KEYWORD_ONLY,
                                   annotation=typer.Context))

    def run(**values):
        ctx = values.pop(context)
        for name, kind in groups.items():
            if isinstance(kind, Given):
                values[name] = {f.name: values[f.name] for f in fields_of(kind.cls)
                                if f.name in values and f.name not in signature.parameters
                                and _given(ctx, f.name)}
            else:
                values[name] = kind(**{f.name: values[f.name] for f in fields_of(kind)
                                       if f.name in values and f.metadata.get("cli", True)})
        return function(**{name: values[name] for name in signature.parameters})

    run.__name__, run.__doc__ = function.__name__, function.__doc__
    run.__signature__ = signature.replace(parameters=_ordered([*own, *added]))
    return run


def _options_kind(annotation):
    if typing.get_origin(annotation) is Annotated:
        return next((m for m in typing.get_args(annotation)[1:] if isinstance(m, Given)), None)
    return annotation if dataclasses.is_dataclass(annotation) else None


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in GIVEN_SOURCES


def _ordered(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """Positional parameters first, keyword-only ones after (a valid signature)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    return [p for p in parameters if p.kind is not keyword] + \
        [p for p in parameters if p.kind is keyword]


def _flag(field: dataclasses.Field, kind, given: bool) -> inspect.Parameter:
    """The typer option of one options field: `--min-gap` from `min_gap` (`--x/--no-x` for
    a bool), its help, type (choices for a Literal) and default. With `given`, the flag
    defaults to "not given" and its help says the field's default."""
    meta = field.metadata
    if field.name in SHARED and not meta.get("own_flag"):  # own_flag: e.g. N or auto
        option = SHARED[field.name]
        return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                 annotation=type(option.default) if option.default is not None
                                 else _cli_type(kind))
    flag = "--" + field.name.replace("_", "-")
    base = _cli_type(kind)
    declarations = meta.get("flag") or (f"{flag}/--no-{flag[2:]}" if base is bool else flag)
    panel = meta.get("panel") or (f"Config: {meta['group']}" if "group" in meta else None)
    default = default_of(field)
    text = meta["help"]
    if meta.get("multiple"):
        base = list[_cli_type(kind)]
    if given:
        shown = meta.get("shown_default", default)
        text, default = f"{text} (default: {shown})", None
        base = base | None
    option = typer.Option(default, *declarations.split(" "), help=text,
                          rich_help_panel=panel, show_default=not given,
                          metavar=meta.get("metavar"), min=meta.get("min"), max=meta.get("max"))
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                             annotation=base)


def field_option(cls, name: str):
    """The typer option of one field of an options dataclass, for a command that takes that
    field alone (`metric: str = field_option(Scoring, "metric")`)."""
    field = next(f for f in fields_of(cls) if f.name == name)
    return _flag(field, types_of(cls)[name], given=False).default


def _cli_type(kind):
    """The command-line type of a field: a Literal stays (its choices), `X | None` is X, and
    anything that is not a number, text, flag or choice is read as text (YAML values)."""
    if typing.get_origin(kind) is Literal:
        return kind
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if args and len(args) < len(typing.get_args(kind)):  # X | None
        return _cli_type(args[0]) if len(args) == 1 else str
    return kind if kind in (int, float, str, bool) else str



@contextlib.contextmanager
def trusting(trust: bool):
    """Run a command's body with --trust-remote-code for every model it loads (`load_mlm`,
    `as_mlm`, `prepare_mlm` deep in the library see it); without the flag the models follow
    $MLMKIT_TRUST_REMOTE_CODE."""
    if not trust:
        yield
        return
    from mlmkit.models.load import trusting_remote_code  # torch: only once a model loads

    with trusting_remote_code():
        yield
