"""The model and runtime of a generation call: `device`, `precision` and `threads` resolved
once (`mlmkit.core.devices.prepare`), the model loaded onto the device or checked to be
on it, so that no option is silently ignored."""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.devices import prepare
from mlmkit.errors import InvalidArgument
from mlmkit.models import as_mlm, load_mlm


def _same_device(a, b) -> bool:
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def open_model(model, *, device=None, precision: str | None = "auto",
               threads: int | None = None, trust_remote_code: bool | None = None):
    """(MLM, resolved precision) for `model` (an MLM, a name/path, or a (model, tokenizer)
    pair). A name is loaded onto `device` (`trust_remote_code`: see `load_mlm`); a loaded model stays where it is, and an explicit
    `device` it is not on is an error (move it first)."""
    explicit = device is not None and device != "auto"
    resolved, precision = prepare(device, precision, threads, task="inference")
    if isinstance(model, (str, Path)):
        return load_mlm(model, device=resolved, trust_remote_code=trust_remote_code), precision
    mlm = as_mlm(model)
    if explicit and not _same_device(mlm.device, resolved):
        raise InvalidArgument(f"device={device!r} (--device) but the model is on "
                              f"{mlm.device}: move the model first (model.to(...)), or leave "
                              "device unset to use the model where it is")
    if not explicit:
        _, precision = prepare(mlm.device, precision, threads, task="inference")
    return mlm, precision


def check_texts(texts, what: str) -> None:
    """Every text encodes as UTF-8 (a command-line argument with undecodable bytes arrives
    with lone surrogates, which the tokenizers cannot take); else a one-line error."""
    for index, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            bad = text[error.start]
            byte = f"byte 0x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF \
                else f"character U+{ord(bad):04X}"
            name = what if len(texts) == 1 else f"{what} {index + 1}"
            raise InvalidArgument(f"{name} is not valid UTF-8 ({byte} at character "
                                  f"{error.start}): pass UTF-8 text, or put it in a file and "
                                  "give its --encoding") from None
