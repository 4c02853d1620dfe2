"""Fuzz every command with generated bad inputs, in-process and seeded.

For each command a valid base invocation (BASE) is mutated one thing at a time: each model
argument becomes a damaged model, each input file a bad file (empty, blank, binary,
non-UTF-8, a huge garbage line, truncated JSON, the wrong format, missing, a directory),
each numeric option NaN, infinite, negative or not a number, the output a directory, a path
under a file or the input itself, the device or precision one this machine lacks. Every case
must end with exit status 1 or 2, one line on standard error, no traceback, nothing new left
in the working directory and every input file unchanged.
"""

from __future__ import annotations

import hashlib
import os
import random
import typing
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mlmkit.cli import app

SEED = 20261203

# Names of parameters that take a model, and of those that read an input file.
MODEL_PARAMS = {"model", "model_a", "model_b", "init"}
INPUT_PARAMS = {"input_file", "texts_file", "file", "data", "facts", "items", "nbest", "corpus",
                "prompts_file", "templates_file", "refs", "config", "verbalizer", "input",
                "pairs", "stats", "masking_stats"}
OUTPUT_PARAMS = {"output", "out", "json_out", "report", "one_best", "pairs_csv"}
# Commands whose output is a directory: an existing file there is the bad case.
DIRECTORY_OUTPUTS = {("mask", "stats"), ("model", "init"), ("tokenizer", "train")}
# Numeric options that may legitimately be negative (negative values are not mutated).
SIGNED = {"seed", "weight", "min_pmi", "cfg_scale", "fix"}
# Numeric options where 0 is a meaningful value ('never', 'greedy', ...): 0 is not mutated.


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): _sha(p) for p in sorted(root.rglob("*"))}


def _listing(root: Path) -> dict[str, tuple]:
    """Each path's kind, size and modification time: a case that writes, truncates, adds or
    removes a file changes them (cheaper than hashing the ~10 MB of inputs after each of 400
    cases; the contents are hashed when the listing changed)."""
    out = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        out[str(path.relative_to(root))] = (stat.st_mode, stat.st_size, stat.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory, saved_tiny_mlm, monkeypatch_module):
    """A working directory of valid inputs and bad ones, and a tiny saved model."""
    root = tmp_path_factory.mktemp("fuzz")
    monkeypatch_module.setenv("MLMKIT_CACHE", str(tmp_path_factory.mktemp("fuzz-cache")))
    monkeypatch_module.setenv("MLMKIT_PROGRESS", "0")
    model = saved_tiny_mlm("bert")
    rng = random.Random(SEED)
    files = {
        "texts.txt": "The cat sat on the mat.\nA second sentence here.\n",
        "texts.jsonl": '{"text": "The cat sat on the mat."}\n{"text": "Another one."}\n',
        "pairs.jsonl": '{"good": "The cat sat.", "bad": "The cat sit."}\n',
        "labelled.jsonl": '{"text": "A fine film.", "label": "pos"}\n'
                          '{"text": "A dull film.", "label": "neg"}\n',
        "nbest.jsonl": '{"utt1": {"hyp_1": {"score": -4.1, "text": "return the items"}, '
                       '"hyp_2": {"score": -4.0, "text": "return the item"}, '
                       '"ref": "return the items"}}\n',
        "facts.jsonl": '{"masked_sentence": "Open the [MASK] for reading.", '
                       '"obj_label": "file"}\n',
        "items.jsonl": '{"candidates": ["Open the file.", "Open the fire."], "label": 0}\n',
        "crows.csv": ',sent_more,sent_less,stereo_antistereo,bias_type\n'
                     '0,The poor man is lazy.,The rich man is lazy.,stereo,socioeconomic\n'
                     '1,Women cannot drive.,Men cannot drive.,stereo,gender\n',
        "blimp-dir/causative.jsonl": '{"sentence_good": "Aaron breaks the glass.", '
                                     '"sentence_bad": "Aaron appeared the glass.", '
                                     '"field": "syntax", "linguistics_term": "argument_structure",'
                                     ' "UID": "causative", "pairID": "0"}\n',
        "empty.txt": "",
        "blank.txt": "\n   \n\t\n",
        "latin1.txt": None,
        "binary.bin": None,
        "huge.jsonl": "{" + "x" * 2_000_000 + "\n",
        "truncated.jsonl": '{"text": "The cat sat on',
        "wrong.jsonl": "text,label\nhello,1\n",
        "suite.json": '{"model": "m", "quick": true, "metrics": {}, "details": {}, '
                      '"seconds": {}, "items": {}}\n',
    }
    (root / "blimp-dir").mkdir()
    stereoset = Path(__file__).parents[1] / "data" / "stereoset_intrasentence_fixture.json"
    (root / "stereoset.json").write_bytes(stereoset.read_bytes())
    for name, text in files.items():
        if text is not None:
            (root / name).write_text(text, encoding="utf-8")
    (root / "latin1.txt").write_bytes("café au lait, naïve\n".encode("latin-1"))
    (root / "binary.bin").write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    (root / "a-dir").mkdir()
    (root / "a-file").write_text("I am a file\n", encoding="utf-8")
    models = root / "models"
    models.mkdir()
    (models / "empty").mkdir()
    (models / "garbage-config").mkdir()
    (models / "garbage-config" / "config.json").write_text("{not json", encoding="utf-8")
    for name, truncate in (("truncated-weights", True), ("no-tokenizer", False)):
        target = models / name
        target.mkdir()
        for item in model.iterdir():
            if name == "no-tokenizer" and "token" in item.name or item.name == "vocab.txt":
                continue
            (target / item.name).write_bytes(item.read_bytes())
        if truncate:
            weights = target / "model.safetensors"
            weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    return {"root": root, "model": str(model)}


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def BASE(w: dict) -> dict[tuple[str, ...], list[str]]:
    """A valid invocation of each command (relative paths are inside the working dir)."""
    m = w["model"]
    return {
        ("score",): [m, "texts.txt", "-o", "out.jsonl"],
        ("rescore",): [m, "nbest.jsonl", "-o", "out.jsonl"],
        ("fill",): [m, "The cat [MASK] on the mat."],
        ("generate",): [m, "The cat", "--length", "4", "--steps", "2"],
        ("infill",): [m, "The [MASK] sat on the mat.", "--steps", "1"],
        ("eval", "blimp"): [m, "blimp-dir", "--limit", "2"],
        ("eval", "elbo"): [m, "texts.txt", "--samples", "2"],
        ("probe", "classify"): [m, "labelled.jsonl", "--template", "{text} It was [MASK].",
                                "--verbalizer", '{"pos": ["good"], "neg": ["bad"]}'],
        ("probe", "facts"): [m, "facts.jsonl"],
        ("probe", "rank"): [m, "items.jsonl"],
        ("bias", "crows"): [m, "crows.csv", "--limit", "2"],
        ("bias", "stereoset"): [m, "stereoset.json", "--limit", "2"],
        ("bias", "compare"): [m, m, "crows.csv", "--limit", "2"],
        ("mask", "preview"): [m, "The cat sat on the mat."],
        ("mask", "stats"): ["texts.txt", m, "-o", "stats-out"],
        ("model", "init"): ["tiny", "--tokenizer", m, "--output", "new-model"],
        ("model", "info"): [m, "--json"],
        ("recipe", "show"): ["modernbert"],
        ("tokenizer", "train"): ["texts.txt", "--output", "new-tok", "--vocab-size", "128"],
        ("pretrain",): ["--model", "tiny", "--tokenizer", m, "--corpus", "texts.txt",
                        "--steps", "1", "--run-dir", "run"],
        ("finetune",): [m, "--task", "mine", "--train", "labelled.jsonl", "--text-field", "text",
                        "--epochs", "1"],
        ("eval", "suite"): [m, "--parts", "pppl", "--texts", "texts.txt"],
        ("eval", "compare"): ["suite.json", "suite.json", "--bootstrap", "50"],
    }


BAD_FILES = ("empty.txt", "blank.txt", "latin1.txt", "binary.bin", "huge.jsonl",
             "truncated.jsonl", "wrong.jsonl", "missing.txt", "a-dir")
STDIN_FILES = ("binary.bin", "latin1.txt", "empty.txt")
BAD_MODELS = ("models/missing", "models/empty", "models/garbage-config",
              "models/truncated-weights", "models/no-tokenizer")
BAD_FLOATS = ("nan", "inf", "-inf", "-1", "abc")
BAD_INTS = ("-1", "abc", "1.5", "nan")
BAD_OUTPUTS = ("a-dir", "a-file/out.jsonl")


def _commands():
    root = typer.main.get_command(app)

    def walk(command, path):
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in sorted(subcommands.items()):
                yield from walk(sub, (*path, name))
        else:
            yield path, command

    return dict(walk(root, ()))


def _kind(param) -> type | None:
    annotation = param.type_descriptor.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if args else annotation
    return base if base in (int, float, str, bool, Path) else None


def _replace_positional(argv: list[str], command, name: str, value: str) -> list[str] | None:
    """`argv` with the positional argument `name` replaced (None if it is not given)."""
    arguments = [p.name for p in command.params if p.param_type_name == "argument"]
    if name not in arguments:
        return None
    index = arguments.index(name)
    positions = [i for i, a in enumerate(argv) if not a.startswith("-")
                 and (i == 0 or not argv[i - 1].startswith("-") or _is_flag(command, argv[i - 1]))]
    if index >= len(positions):
        return None
    out = list(argv)
    out[positions[index]] = value
    return out


def _is_flag(command, option: str) -> bool:
    for p in command.params:
        if p.param_type_name == "option" and option in p.opts + p.secondary_opts:
            return bool(getattr(p, "is_flag", False))
    return False


def _with_option(argv: list[str], param, value: str) -> list[str]:
    """`argv` with `param` set to `value` (replacing it if present)."""
    out = list(argv)
    for flag in param.opts:
        if flag in out:
            out[out.index(flag) + 1] = value
            return out
    return out + [param.opts[-1], value]


def cases(w: dict) -> list[tuple[str, list[str], str | None]]:
    """Every generated bad invocation: (case id, argv)."""
    commands = _commands()
    generated = []
    for path, base in BASE(w).items():
        if path not in commands:
            continue
        command = commands[path]
        name = " ".join(path)
        for param in command.params:
            kind = _kind(param)
            flags = param.opts if param.param_type_name == "option" else []
            targets = []
            if param.name in MODEL_PARAMS:
                targets = [(bad, bad) for bad in BAD_MODELS]
            elif param.name in INPUT_PARAMS:
                targets = [(bad, bad) for bad in BAD_FILES]
                if param.param_type_name == "argument":
                    targets += [(f"stdin-{bad}", ("-", bad)) for bad in STDIN_FILES]
            elif param.name in OUTPUT_PARAMS and flags:
                input_path = next((a for a in base if Path(w["root"], a).is_file()), None)
                targets = [(bad, bad) for bad in BAD_OUTPUTS]
                if path in DIRECTORY_OUTPUTS:
                    targets = [("a-file", "a-file"), ("under-a-file", "a-file/out")]
                if input_path:
                    targets.append(("same-as-input", input_path))
            elif kind is float and flags:
                targets = [(v, v) for v in BAD_FLOATS if not (v == "-1" and param.name in SIGNED)]
            elif kind is int and flags:
                targets = [(v, v) for v in BAD_INTS if not (v == "-1" and param.name in SIGNED)]
            elif param.name == "device":
                targets = [("cuda:7", "cuda:7"), ("tpu", "tpu")]
            elif param.name == "precision":
                targets = [("fp16", "fp16")]
            for label, value in targets:
                stdin = None
                if isinstance(value, tuple):
                    value, stdin = value
                if param.param_type_name == "argument":
                    argv = _replace_positional(base, command, param.name, value)
                    if argv is None:
                        continue
                else:
                    argv = _with_option(base, param, value)
                generated.append((f"{name} {param.name}={label}", [*path, *argv], stdin))
    return _sample(generated)


# Cases drawn per command (seeded), so the whole run stays under a minute; set
# MLMKIT_FUZZ_PER_COMMAND=100000 to run every generated case.
PER_COMMAND = int(os.environ.get("MLMKIT_FUZZ_PER_COMMAND", "22"))


def _sample(generated: list[tuple]) -> list[tuple]:
    rng = random.Random(SEED)
    by_command: dict[str, list] = {}
    for case in generated:
        by_command.setdefault(case[0].split("=")[0].rsplit(" ", 1)[0], []).append(case)
    chosen = []
    for command in sorted(by_command):
        group = by_command[command]
        chosen += group if len(group) <= PER_COMMAND else rng.sample(group, PER_COMMAND)
    return chosen


@pytest.mark.slow
def test_fuzz_every_command(world, capfd):
    runner = CliRunner()
    root = world["root"]
    all_cases = cases(world)
    assert len(all_cases) >= 300, f"only {len(all_cases)} cases were generated"
    before, listed = _snapshot(root), _listing(root)
    failures = []
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for case, argv, stdin in all_cases:
            data = (root / stdin).read_bytes() if stdin else None
            result = runner.invoke(app, argv, input=data, catch_exceptions=True)
            stderr = result.stderr.strip()
            problems = []
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                problems.append(f"raised {type(result.exception).__name__}: "
                                f"{str(result.exception)[:200]}")
            elif result.exit_code not in (1, 2):
                problems.append(f"exit status {result.exit_code}")
            if "Traceback" in stderr or "Traceback" in result.stdout:
                problems.append("a traceback")
            if result.exit_code in (1, 2) and len(stderr.splitlines()) != 1:
                problems.append(f"{len(stderr.splitlines())} lines on stderr: {stderr[:300]!r}")
            if _listing(root) != listed:  # something was touched: hash to see what changed
                after = _snapshot(root)
                if after != before:
                    changed = sorted(set(after.items()) ^ set(before.items()))
                    problems.append(f"left or changed files: {changed[:5]}")
                    _restore(root, before)
                listed = _listing(root)
            if problems:
                failures.append(f"{case}: {'; '.join(problems)}")
    finally:
        os.chdir(cwd)
    print(f"{len(all_cases)} bad inputs, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {len(all_cases)} cases failed:\n" + \
        "\n".join(failures)


def _restore(root: Path, before: dict[str, str]) -> None:
    """Remove whatever a failed case left, so later cases start from the same state."""
    import shutil

    for path in sorted(root.rglob("*"), reverse=True):
        if str(path.relative_to(root)) not in before:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def test_base_invocations_succeed(world):
    """The mutations start from invocations that work, so each failure is the mutation's."""
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(world["root"])
    failures = []
    try:
        for path, argv in BASE(world).items():
            result = runner.invoke(app, [*path, *argv], catch_exceptions=True)
            if result.exit_code != 0:
                failures.append(f"{' '.join(path)}: exit {result.exit_code}: "
                                f"{result.stderr.strip()[-300:]!r} {result.exception!r}")
    finally:
        os.chdir(cwd)
        _cleanup_outputs(world["root"])
    assert not failures, "\n".join(failures)


def _cleanup_outputs(root: Path) -> None:
    import shutil

    for name in ("out.jsonl", "stats-out", "new-model", "new-tok", "run"):
        target = root / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
