"""The exceptions mlmkit raises for bad input: one line that names the input and says what
to do. The CLI prints them without a traceback and exits with status 1.

Every class is a `MlmkitError` (a `ValueError`), so `except ValueError` keeps working;
the path errors are `OSError`s too.
"""

from __future__ import annotations


class MlmkitError(ValueError):
    """Bad input: the message names the input, what was wrong, and what to do."""


class InvalidArgument(MlmkitError):
    """An argument or flag has a value outside its range or not among its choices."""


class UnknownOption(InvalidArgument, TypeError):
    """A keyword a function does not take: a `TypeError` as Python's own, whose message
    also names the close options (`batch_size=` points at `batch_tokens`)."""


class InvalidData(MlmkitError):
    """An input file or record is malformed: the message names the file and line."""


class ModelError(MlmkitError):
    """A model cannot be loaded, or cannot do what was asked (e.g. no trained MLM head)."""


class UntrainedHead(ModelError):
    """A checkpoint without a trained MLM head, asked for what reads the head."""


class DeviceError(MlmkitError):
    """A device or precision this machine does not have."""


class RunError(MlmkitError):
    """A training run cannot start or resume as asked (changed config, damaged state)."""


class MissingExtra(MlmkitError):
    """A feature needs an optional dependency that is not installed: the message names the
    extra that installs it (`pip install 'mlmkit[serve]'`)."""


class PathError(MlmkitError, OSError):
    """A path is missing, of the wrong kind, or not writable."""

    __str__ = ValueError.__str__  # OSError's str() would format errno fields


__all__ = ["MlmkitError", "InvalidArgument", "UnknownOption", "InvalidData", "ModelError", "DeviceError",
           "RunError", "MissingExtra", "PathError"]
