"""`mlmkit score` killed with SIGKILL resumes from its partial output to a file byte-identical
to an uninterrupted run; partial files of other settings never block a rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mlmkit.corpus.python_docs import python_docs
from mlmkit.models import load_mlm
from mlmkit.scoring.stream import score_file

CHUNK = 4
N_TEXTS = 48


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    texts = [t.replace("\n", " ")[:48] for t in python_docs("validation")[:N_TEXTS]]
    texts[5] = ""  # empty lines are records too
    path = folder / "texts.txt"
    path.write_text("\n".join(texts) + "\n")
    return path


def _argv(command, model, source, out, *extra):
    return [*command, "score", str(model), str(source), "-o", str(out),
            "--chunk-texts", str(CHUNK), "--device", "cpu", "--json", *extra]


def _env() -> dict[str, str]:
    """Read when a run starts: the fork server's shim finds the server through the
    environment (MLMKIT_FORKSERVER), which its fixture sets after this module is imported."""
    return dict(os.environ, MLMKIT_THREADS="1", OMP_NUM_THREADS="1")


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _partials(out):
    return list(out.parent.glob(f".{out.name}.*.partial"))


class _Fresh:
    """`python -m mlmkit ARGS` as a fresh process, for when the test fork server is off."""

    def __init__(self, args, stderr):
        self.process = subprocess.Popen([sys.executable, "-m", "mlmkit", *args], env=_env(),
                                        stdout=subprocess.DEVNULL, stderr=stderr)
        self.pid = self.process.pid

    def running(self):
        return self.process.poll() is None

    def wait(self, timeout):
        code = self.process.wait(timeout)
        return None if code == -signal.SIGKILL else code


def _kill_after(args, out, lines: int, fork_server, log):
    """Start `mlmkit ARGS` and SIGKILL it once its partial output holds at least `lines`
    lines. The process is the fork server's child itself (the shim cannot pass SIGKILL on),
    or a fresh interpreter when the server is off."""
    with open(log, "wb") as stderr:
        if fork_server is None:
            process = _Fresh(args, stderr)
        else:
            process = fork_server.start("mlmkit", ["mlmkit", *args], out.parent, _env(),
                                        stderr.fileno())
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            found = _partials(out)
            if found and found[0].read_bytes().count(b"\n") >= lines:
                break
            assert process.running(), "the run ended before it could be killed: " + \
                log.read_text(errors="replace")[-2000:]
            time.sleep(0.01)
        else:
            pytest.fail("no partial output appeared")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        status = process.wait(60)
    assert status is None, f"the run ended with status {status} before it was killed"
    assert not out.exists()


@pytest.fixture(scope="module")
def reference(corpus, saved_tiny_mlm):
    """The uninterrupted run's bytes (in-process: the same code and settings as the CLI)."""
    out = corpus.parent / "uninterrupted.jsonl"
    summary = score_file(load_mlm(saved_tiny_mlm("bert"), device="cpu"), corpus, out,
                         chunk_texts=CHUNK, device="cpu", progress=False)
    assert summary.resumed_lines == 0 and summary.texts == N_TEXTS
    return out.read_bytes()


@pytest.mark.slow
def test_a_killed_run_resumes_to_a_byte_identical_file(corpus, saved_tiny_mlm, reference,
                                                       tmp_path, mlmkit_command, fork_server):
    model = saved_tiny_mlm("bert")
    whole = tmp_path / "uninterrupted.jsonl"  # the same command, never killed
    _run(_argv(mlmkit_command, model, corpus, whole))
    out = tmp_path / "scores.jsonl"
    _kill_after(_argv([], model, corpus, out), out, 2 * CHUNK, fork_server,
                tmp_path / "killed.log")
    (partial,) = _partials(out)
    with partial.open("ab") as handle:  # a line cut in half by the kill
        handle.write(b'{"line": 99999, "text": "cut')
    summary = _run(_argv(mlmkit_command, model, corpus, out))
    assert summary["resumed_lines"] >= 2 * CHUNK and summary["resumed_lines"] % CHUNK == 0
    assert out.read_bytes() == whole.read_bytes()
    assert not _partials(out)


def _fake_partial(out, corpus, mlm, lines: int, reference: bytes):
    """The partial file a killed run with the default settings leaves after `lines` lines."""
    from mlmkit.scoring.stream import fingerprint, partial_path

    settings = dict(metric="pll", per_token=False, per_word=False, unk="score", stride=1,
                    reduction="sum", batch_tokens=None, precision="fp32", field=None, chunk_texts=CHUNK,
                    encoding="utf-8", encoding_errors="strict", device="cpu")
    path = partial_path(out, fingerprint(corpus, mlm, settings))
    kept = b"".join(reference.splitlines(keepends=True)[:lines])
    path.write_bytes(kept + b'{"line": 12345, "te')
    return path


def test_resume_no_resume_and_stale_partials(corpus, saved_tiny_mlm, reference, tmp_path):
    mlm = load_mlm(saved_tiny_mlm("bert"), device="cpu")
    out = tmp_path / "scores.jsonl"
    run = dict(chunk_texts=CHUNK, device="cpu", progress=False)
    _fake_partial(out, corpus, mlm, 3 * CHUNK + 1, reference)
    stale = out.with_name(f".{out.name}.0123456789abcdef.partial")  # other settings' debris
    stale.write_text("{}\n")
    summary = score_file(mlm, corpus, out, **run)
    assert summary.resumed_lines == 3 * CHUNK  # back to the last whole chunk
    assert out.read_bytes() == reference and not _partials(out)
    out.unlink()
    _fake_partial(out, corpus, mlm, 2 * CHUNK, reference)
    summary = score_file(mlm, corpus, out, resume=False, **run)
    assert summary.resumed_lines == 0 and out.read_bytes() == reference
    assert not _partials(out)


def test_an_edited_input_is_not_resumed(corpus, saved_tiny_mlm, reference, tmp_path):
    mlm = load_mlm(saved_tiny_mlm("bert"), device="cpu")
    source = tmp_path / "texts.txt"
    source.write_bytes(corpus.read_bytes())
    out = tmp_path / "scores.jsonl"
    _fake_partial(out, source, mlm, 2 * CHUNK, reference)
    lines = source.read_text().splitlines()
    lines[0] = "An edited first line."
    source.write_text("\n".join(lines) + "\n")
    summary = score_file(mlm, source, out, chunk_texts=CHUNK, device="cpu", progress=False)
    assert summary.resumed_lines == 0
    assert json.loads(out.read_text().splitlines()[0])["text"] == "An edited first line."
    assert not _partials(out)


def test_a_partial_being_written_is_not_touched(corpus, saved_tiny_mlm, tmp_path):
    """Another live run's partial file (locked) is neither removed nor shared."""
    import fcntl

    from mlmkit.errors import PathError

    mlm = load_mlm(saved_tiny_mlm("bert"), device="cpu")
    out = tmp_path / "scores.jsonl"
    other = out.with_name(f".{out.name}.fedcba9876543210.partial")
    other.write_text("")
    with open(other, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        mine = _fake_partial(out, corpus, mlm, 0, b"")
        with open(mine, "rb") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)
            with pytest.raises(PathError, match="another mlmkit score"):
                score_file(mlm, corpus, out, chunk_texts=CHUNK, device="cpu", progress=False)
        assert other.exists() and mine.exists()


def test_the_fingerprint_follows_the_model_and_the_settings(corpus, tiny_mlm):
    import copy

    import torch

    from mlmkit.models import LoadedMLM
    from mlmkit.scoring.stream import fingerprint

    mlm = tiny_mlm("bert")
    settings = {"metric": "pll", "chunk_texts": CHUNK}
    key = fingerprint(corpus, mlm, settings)
    assert key == fingerprint(corpus, mlm, dict(settings))
    retrained = copy.deepcopy(mlm.model)
    with torch.no_grad():
        for parameter in retrained.parameters():
            parameter.add_(1e-3)
    assert fingerprint(corpus, LoadedMLM(retrained, mlm.tokenizer), settings) != key
    assert fingerprint(corpus, tiny_mlm("electra"), settings) != key
    assert fingerprint(corpus, mlm, {**settings, "metric": "pll_word_l2r"}) != key


def test_ctrl_c_says_interrupted_and_where_the_partial_is(corpus, saved_tiny_mlm, reference,
                                                          tmp_path, monkeypatch):
    """Ctrl-C: exit 130 with 'interrupted' (it was a silent 130), the output file absent,
    the kept partial named; the same command then resumes to the uninterrupted bytes."""
    from typer.testing import CliRunner

    import mlmkit.scoring.stream as stream
    from mlmkit.cli import app

    calls, real = [], stream.score

    def interrupted_on_the_third_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    out = tmp_path / "scores.jsonl"
    argv = _argv([], saved_tiny_mlm("bert"), corpus, out)
    monkeypatch.setattr(stream, "score", interrupted_on_the_third_chunk)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 130 and not out.exists()
    warning, last = result.stderr.strip().splitlines()
    [kept] = _partials(out)
    assert last == "interrupted" and warning.startswith(f"warning: {str(out)!r} was not written")
    assert repr(str(kept)) in warning and kept.read_bytes().count(b"\n") == 2 * CHUNK
    monkeypatch.setattr(stream, "score", real)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0 and out.read_bytes() == reference
