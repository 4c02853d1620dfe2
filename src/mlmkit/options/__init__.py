"""Options dataclasses: one per task, the single source of its Python keywords, CLI flags and
HTTP request fields.

A field is declared with `option(default, help)`: its type (the annotation), its default and
its help text travel together, so the command line (`mlmkit.cli.options.command`), the
server's request schema (`mlmkit.serve.schemas`) and the library's keyword arguments are
derived from one declaration and cannot drift apart. The modules here import nothing heavy:
the command line reads them to print `--help` without loading torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
import warnings
from typing import Any

from mlmkit.errors import InvalidArgument


def option(default: Any, help: str, **cli: Any) -> Any:
    """A dataclass field with its help text. `cli` holds how the command line spells it when
    the rule (`--min-gap` from `min_gap`, `--x/--no-x` for a bool) does not fit: `flag`
    (the declarations, e.g. "--per-token"), `panel` (the help section), `cli=False` (a
    field that is no flag)."""
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default),
                                 metadata={"help": help, **cli})
    return dataclasses.field(default=default, metadata={"help": help, **cli})


def fields_of(cls) -> list[dataclasses.Field]:
    """The fields of an options dataclass, in declaration order."""
    return list(dataclasses.fields(cls))


def types_of(cls) -> dict[str, Any]:
    """Each field's type, resolved (the modules use `from __future__ import annotations`)."""
    return typing.get_type_hints(cls)


def default_of(field: dataclasses.Field) -> Any:
    """A field's default value (a fresh one for a mutable default)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()


def check_names(cls, names, what: str | None = None) -> None:
    """Refuse a keyword that is no field of `cls`, in one line that lists the close names."""
    known = [f.name for f in fields_of(cls)]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else \
                f"the options are {', '.join(known)}"
            raise InvalidArgument(f"{name!r} is not an option of {what or cls.__name__}: "
                                  f"{hint}")


def build(cls, values: dict[str, Any] | None = None, **overrides: Any):
    """`cls(**values, **overrides)`, with an unknown name refused in one line (close names
    listed) instead of Python's TypeError."""
    values = {**(values or {}), **overrides}
    check_names(cls, values)
    return cls(**values)


def renamed_keyword(function: str, old: str, old_value: Any, new: str, new_value: Any) -> Any:
    """The value of keyword `new` of `function`, also given under its previous name `old`
    (accepted for one release, with a DeprecationWarning; None means not given)."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise InvalidArgument(f"{function}: give {new}= or its old name {old}=, not both")
    warnings.warn(f"{function}({old}=...) is deprecated: use {new}= (the old name stops "
                  "working in the next release)", DeprecationWarning, stacklevel=3)
    return old_value


def as_keywords(options) -> dict[str, Any]:
    """The fields of an options instance as keyword arguments of its library function."""
    return {f.name: getattr(options, f.name) for f in fields_of(options)}
