"""What a generation call checks first: its texts must encode as UTF-8."""

from __future__ import annotations

from mlmkit.errors import InvalidArgument


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
