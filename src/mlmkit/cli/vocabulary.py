"""The command line's one vocabulary (docs/CLI.md), and the old spellings it still accepts.

Every command speaks the same words: `MODEL` then its inputs as positional arguments, `--text`
for a literal text where a file is the norm (and `--file` where a literal text is), columns
as `--text-field` / `--label-field`, `-o/--output` for a file, `--run-dir` for the folder of a
run, choice values spelled with dashes. Flags of earlier releases keep working for one
release: `rewrite()` turns them into today's words before the command parses its arguments,
and says so in one `deprecated:` line on standard error. Choice values spelled the library's
or an anchor's way (`pll_word_l2r`, minicons' `within_word_l2r`, Hugging Face's `bfloat16`)
are read as the value they name.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.core.progress import warn

POSITIONAL = "POSITIONAL"
"""The new spelling of an old flag whose value is now a positional argument."""


@dataclass(frozen=True)
class Renamed:
    """An old flag of a command and what replaced it: another flag, or (POSITIONAL) the
    command's positional input. `switch`: the new flag takes no value and the old one's
    value goes to `then` (`--resume DIR` -> `--resume --run-dir DIR`)."""

    old: str
    new: str
    then: str | None = None


def _renames(*pairs) -> tuple[Renamed, ...]:
    return tuple(p if isinstance(p, Renamed) else Renamed(*p) for p in pairs)


FIELD = ("--field", "--text-field")
RENAMED: dict[str, tuple[Renamed, ...]] = {
    "score": _renames(FIELD),
    "embed": _renames(FIELD),
    "pretrain": _renames(FIELD, Renamed("--resume", "--resume", then="--run-dir")),
    "tokenizer train": _renames(FIELD),
    "mask stats": _renames(FIELD),
    "finetune": _renames(("--text-cols", "--text-field"), ("--label-col", "--label-field")),
    "generate": _renames(("--prompt", POSITIONAL), ("--prompts-file", "--file")),
    "infill": _renames(("--templates-file", "--file")),
    "eval blimp": _renames(("--data", POSITIONAL)),
    "eval sts": _renames(("--data", POSITIONAL)),
    "eval classify": _renames(("--data", POSITIONAL)),
    "eval suite": _renames(("--out-dir", "--run-dir")),
    "bias crows": _renames(("--data", POSITIONAL)),
    "bias stereoset": _renames(("--data", POSITIONAL)),
    "bias compare": _renames(("--data", POSITIONAL)),
    "protein variants": _renames(("--dms", POSITIONAL), ("--mutation-col", "--mutation-field"),
                                 ("--score-col", "--score-field"),
                                 ("--target-col", "--target-field")),
    "protein binders": _renames(("--target", POSITIONAL)),
}
"""Per command (its path below `mlmkit`): the flags of the previous release and their
replacements. They are accepted until the next release."""

CHOICE_ALIASES = {
    "within-word-l2r": "pll-word-l2r",  # minicons' name of the metric
    "bfloat16": "bf16",  # Hugging Face's / torch's dtype names
    "float32": "fp32",
}
"""Other names of choice values (the anchors' spellings), in the dashed form."""


def dashed(value: str) -> str:
    """A choice value as the command line spells it: lower case, words joined by dashes."""
    return value.lower().replace("_", "-")


def choice_value(value: str, choices) -> str:
    """The one of `choices` that `value` names: itself, its spelling with dashes or
    underscores, or an anchor's name of it (CHOICE_ALIASES); else `value` unchanged (the
    caller's check refuses it, listing the choices)."""
    if value in choices:
        return value
    key = dashed(value)
    key = CHOICE_ALIASES.get(key, key)
    return next((c for c in choices if dashed(str(c)) == key), value)


def rewrite(path: str, args: list[str], choices: dict[str, tuple]) -> list[str]:
    """`args` of the command `path` in today's words: each old flag of RENAMED[path] becomes
    its new spelling (a positional input goes after the other arguments), with one
    deprecation line on standard error; each value of a choice flag (`choices`: flag -> its
    values) becomes the choice it names."""
    renamed = {r.old: r for r in RENAMED.get(path, ())}
    out, positional, told = [], [], set()
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":  # the rest is positional as it stands
            out += args[i - 1:]
            break
        flag, equals, value = token.partition("=") if token.startswith("--") \
            else (token, "", "")
        rename = renamed.get(flag)
        if rename is not None and rename.then is not None:  # a flag that became a switch
            if not equals and i < len(args) and not args[i].startswith("-"):
                equals, value = "=", args[i]
                i += 1
            if equals:
                _tell(path, told, f"{flag} VALUE", f"{rename.new} {rename.then} VALUE")
                out += [rename.new, rename.then, value]
            else:
                out.append(token)
            continue
        if rename is not None:
            if rename.new == POSITIONAL:
                _tell(path, told, flag, "a positional argument (after the model)")
                if not equals and i < len(args):
                    equals, value = "=", args[i]
                    i += 1
                if equals:
                    positional.append(value)
                continue
            _tell(path, told, flag, rename.new)
            flag = rename.new
            token = flag + equals + value
        if flag in choices:
            if equals:
                token = flag + "=" + choice_value(value, choices[flag])
            elif i < len(args):
                out += [token, choice_value(args[i], choices[flag])]
                i += 1
                continue
        out.append(token)
    if positional:
        out += positional if "--" in out else ["--", *positional]
    return out


def _tell(path: str, told: set, old: str, new: str) -> None:
    """One line per old spelling and run."""
    if old not in told:
        told.add(old)
        warn(f"'mlmkit {path} {old}' is deprecated: use {new} (the old spelling stops "
             "working in the next release)")
