"""The `mlmkit` command line: a typer app, one module per command in this package.

Each command module defines `register(app)`; they are discovered, so adding a command
never edits this file. Commands parse arguments, call the library, and print; their flags
are declared through `mlmkit.cli.options`.

Exit status (docs/CLI.md): 0 ok, 1 a user error (one line on standard error, no
traceback), 2 a usage error (typer's own message), 130 interrupted.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import warnings

import typer
from rich.console import Console
from typer._click.exceptions import ClickException
from typer.exceptions import Abort

from mlmkit import __version__
from mlmkit.cli.options import Group
from mlmkit.core.progress import warn
from mlmkit.errors import MlmkitError

CONTEXT = {"help_option_names": ["-h", "--help"]}


def error_line(message: str) -> str:
    """A user error as the one line the CLI prints."""
    return "error: " + " ".join(str(message).split())


def _user_error(message: str):
    print(error_line(message), file=sys.stderr, flush=True)
    return typer.Exit(1)


class _Group(Group):
    """The root group: any user error raised inside a command becomes one line on standard
    error and exit status 1, also when the app is invoked in-process (tests, CliRunner)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        """Standalone runs print a usage error as one line too (exit 2), not a box."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as error:
            context = getattr(error, "ctx", None)
            where = context.command_path if context is not None else "mlmkit"
            if not error.format_message().strip() and context is not None:
                print(context.get_help(), file=sys.stderr, flush=True)  # no arguments
                sys.exit(error.exit_code)
            print(f"{error_line(error.format_message())} (see '{where} -h')",
                  file=sys.stderr, flush=True)
            sys.exit(error.exit_code)
        except Abort:
            print("interrupted", file=sys.stderr, flush=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _warning_line
                return super().invoke(ctx)
        except MlmkitError as error:
            raise _user_error(str(error)) from None
        except KeyboardInterrupt:  # typer would turn it into a silent exit 130
            print("interrupted", file=sys.stderr, flush=True)
            raise typer.Exit(130) from None
        except BrokenPipeError:  # typer would make it a silent exit 1, read as a failure
            _reader_gone()
            raise typer.Exit(0) from None
        except OSError as error:
            for kind, message in PATH_ERRORS:
                if isinstance(error, kind):
                    raise _user_error(f"{error.filename or error}{message}") from None
            raise


def _reader_gone() -> None:
    """The reader of standard output went away (`| head`): not an error. Later writes and
    the interpreter's last flush go to /dev/null, so nothing more is said (exit status 0)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _rich_broken_pipe(console) -> None:
    """rich's Console meets a closed pipe: raise it, to end as every command does (rich's own
    handler exits with status 1, silently)."""
    console.quiet = True
    raise BrokenPipeError


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning that reaches the command line as one `warning:` line on standard error
    (Python's own format adds the file, the category and the source line)."""
    warn(str(message))


# Path errors that escape a command, as one line (the path, then what to do).
PATH_ERRORS = (
    (IsADirectoryError, " is a directory: pass a file path"),
    (FileNotFoundError, ": no such file or directory; check the path"),
    (PermissionError, ": permission denied; choose a path you can read or write"),
    (NotADirectoryError, ": a part of this path is a file, not a directory; choose another "
                         "path"),
    (FileExistsError, " already exists and is in the way; choose another path or remove it"),
)


app = typer.Typer(
    name="mlmkit",
    help="Masked language models: pretrain, score, fill, generate, probe and audit.\n\n"
    "Example: mlmkit score ./model texts.txt -o scores.jsonl",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings=CONTEXT,
    cls=_Group,
)


def _version(value: bool) -> None:
    if value:
        print(f"mlmkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version,
                                       is_eager=True, help="Print the version and exit.")):
    """Masked language models: pretrain, score, fill, generate, probe and audit."""


def _register_commands() -> None:
    """Every module of this package with a `register(app)` is a command (or a group)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(app)


_register_commands()


def _quiet_libraries() -> None:
    """Hide transformers' per-load progress bars and advice: mlmkit prints its own progress.

    Set through the environment (read when transformers is imported), so `--help` stays
    free of the import.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    """Entry point: run the app (user errors: one line, exit 1; see `_Group`)."""
    _quiet_libraries()
    Console.on_broken_pipe = _rich_broken_pipe  # tables and text end at `| head` with 0 too
    try:
        app(standalone_mode=True)
    except BrokenPipeError:
        # The reader of our standard output went away (e.g. `| head`): that is fine.
        _reader_gone()
        sys.exit(0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
