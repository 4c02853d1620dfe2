"""How `--help` reads: real metavariables, the terminal's width, the examples first.

typer labels every value with its Python type (`<str>`, `<bool>`, `{model}` in usage lines)
and rich wraps at 80 columns where no terminal tells it the width. Every mlmkit command and
group is built with the classes of `mlmkit.cli.options`, which call the functions here: a
value reads as what it is (`MODEL`, `FILE`, `N`, `pll|pll-word-l2r`), a switch shows no value
at all, and the examples come right after the one-line description, before the flags.
"""

from __future__ import annotations

import os
import re
import sys
import typing

from typer import rich_utils
from typer.core import TyperArgument

NO_TERMINAL_WIDTH = 120
"""Columns of help read without a terminal (a pager, a file, a log): wide enough for a flag
and its help on one line, where rich would assume 80."""

ARGUMENT_NAMES = {"input_file": "INPUT", "texts": "TEXT", "models": "MODEL", "runs": "RUN",
                  "model_a": "MODEL_A", "model_b": "MODEL_B", "shards": "SHARD_OUTPUT"}
"""Positional arguments whose metavariable is not their name in capitals."""

WORDS = {"output": "FILE", "file": "FILE", "csv": "FILE", "trace": "FILE", "best": "FILE",
         "run": "FILE", "refs": "FILE", "relations": "FILE", "config": "FILE",
         "dir": "DIR", "stats": "DIR", "field": "NAME", "key": "KEY", "text": "TEXT",
         "device": "DEVICE", "tokenizer": "DIR", "data": "PATH", "corpus": "PATH",
         "precision": "auto|fp32|bf16", "verbalizer": "JSON", "fix": "POSITION=TEXT"}
"""The metavariable of a text value, by the last word of its flag (`--run-dir` -> DIR)."""

EXAMPLES = re.compile(r"^\s*(\[bold\])?Examples?\b")


def help_width() -> int:
    """The width help is drawn at: $COLUMNS, else the terminal's (standard output, error or
    input, whichever is one), else NO_TERMINAL_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            width = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            continue
        if width > 0:
            return width
    return NO_TERMINAL_WIDTH


def use_help_width() -> None:
    """Draw the help about to be printed at `help_width()` (typer reads this setting each
    time it prints help)."""
    rich_utils.MAX_WIDTH = help_width()


class Argument(TyperArgument):
    """A positional argument shown by its metavariable alone: `MODEL`, `[TEXT]...` in the
    usage line, no type tag beside it."""

    def display_type_rich(self, ctx):
        return None

    def display_type(self, ctx):
        return ""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


def label_params(params) -> None:
    """Give each argument and option of a command its metavariable, in place."""
    for param in params:
        if isinstance(param, TyperArgument):
            param.__class__ = Argument
            if param.metavar is None:
                param.metavar = ARGUMENT_NAMES.get(param.name, param.name.upper())
        elif param.metavar is None and hasattr(param, "type_descriptor"):
            param.metavar = option_metavar(param)


def option_metavar(option) -> str:
    """`""` for a switch, the choices joined by `|`, N for a whole number, X for a real
    one, else a word for what the text names (FILE, DIR, NAME, ...)."""
    if option.is_flag or option.count:
        return ""
    descriptor = option.type_descriptor
    if descriptor.choices is not None:
        return "|".join(dict.fromkeys(str(c).replace("_", "-") for c in descriptor.choices))
    kind = _bare(descriptor.annotation)
    if kind is int:
        return "N"
    if kind is float:
        return "X"
    long_names = [o for o in option.opts if o.startswith("--")] or [option.name]
    last = long_names[0].lstrip("-").split("-")[-1].lower()
    return WORDS.get(last, last.upper())


def _bare(annotation):
    """`X` of `X | None` and of `list[X]`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is list or (args and len(args) == 1):
        return _bare(args[0]) if args else annotation
    return annotation


def examples_first(help_text: str | None, epilog: str | None) -> tuple[str, None]:
    """The help text with its examples block (a line `Example:`/`Examples:` and the indented
    command lines under it) moved up after the one-line description; the epilog's examples
    and prose join the help text."""
    text = "\n\n".join(t.strip("\n") for t in (help_text or "", epilog or "") if t)
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if EXAMPLES.match(line)), None)
    if start is None:
        return text, None
    end = start + 1
    while not lines[end - 1].rstrip().endswith((":", "[/]")) and end < min(len(lines),
                                                                        start + 3):
        end += 1  # a heading that runs over a few lines, up to its colon
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith("  ")):
        end += 1
    block = "\n".join(lines[start:end]).strip("\n")
    rest = "\n".join(lines[:start] + lines[end:]).strip("\n")
    first, _, details = rest.partition("\n\n")
    # the block starts on a blank line: typer dedents what follows the first paragraph by
    # the indentation its lines share after the first one, which would flatten the commands
    parts = [first, "\n" + block, details.strip("\n")]
    return "\n\n".join(p for p in parts if p.strip()), None
