"""Checkpoint files: the process's umask, no debris of killed saves after the next start,
a clear way on when every state is damaged."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from mlmkit.core import staging
from mlmkit.errors import RunError
from mlmkit.training.checkpoint import (
    list_states,
    load_latest_state,
    remove_leftovers,
    save_model_dir,
    save_state,
)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _state(step: int) -> dict:
    return {"counters": {"step": step}, "weights": torch.arange(10.0) * step}


def test_states_and_model_folders_follow_the_umask(tmp_path, umask_022):
    path = save_state(tmp_path, 3, _state(3))
    assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0o600
    assert path.with_name(path.name + ".sha256").stat().st_mode & 0o777 == 0o644

    def save(folder):
        (folder / "model.bin").write_bytes(b"x")

    target = save_model_dir(save, tmp_path / "final")
    assert target.stat().st_mode & 0o777 == 0o755  # not mkdtemp's 0o700
    assert (target / "model.bin").stat().st_mode & 0o777 == 0o644
    save_model_dir(save, tmp_path / "final")  # replacing an older folder leaves nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "final"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "state-00000003.pt", "state-00000003.pt.sha256"]


def test_a_failed_model_save_leaves_no_folder(tmp_path):
    def broken(folder):
        (folder / "half").write_bytes(b"x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_model_dir(broken, tmp_path / "step-5")
    assert list(tmp_path.iterdir()) == []


KILLED_SAVE = """
import os, sys, time
from pathlib import Path
from mlmkit.core import staging
run = Path(sys.argv[1])
staging.staging_dir(run / "step-100")                                    # a model folder
(run / "checkpoints").mkdir(exist_ok=True)
staging.staging_path(run / "checkpoints" / "state-00000100.pt", "tmp").write_bytes(b"x" * 99)
print("ready", flush=True)
time.sleep(60)
"""


def test_leftovers_of_a_killed_save_are_removed_at_the_next_start(tmp_path):
    save_state(tmp_path, 1, _state(1))
    # tempfile-named leftovers of older versions, and of a save killed by SIGKILL
    (tmp_path / ".step-100.k2j4_x9a").mkdir()
    (tmp_path / ".final.old.abcd1234").mkdir()
    (tmp_path / "checkpoints" / ".state-00000100.pt.q1w2e3r4.tmp").write_bytes(b"x")
    (tmp_path / ".metrics.jsonl.zzzz1111.tmp").write_bytes(b"x")
    process = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(tmp_path)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    alive = sorted(p.name for p in tmp_path.iterdir() if ".staging" in p.name)
    assert len(alive) == 1
    assert remove_leftovers(tmp_path) and (tmp_path / alive[0]).exists()  # a live writer's stays
    process.kill()
    process.wait()
    removed = remove_leftovers(tmp_path)
    assert len(removed) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "state-00000001.pt", "state-00000001.pt.sha256"]
    assert load_latest_state(tmp_path)[0]["counters"] == {"step": 1}


def test_user_files_are_never_taken_for_leftovers(tmp_path):
    (tmp_path / ".gitignore").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden").mkdir()
    old = time.time() - 10 * 86400
    for path in tmp_path.iterdir():
        os.utime(path, (old, old))
    assert remove_leftovers(tmp_path) == []
    assert staging.remove_leftovers(tmp_path, target="model") == []


def test_every_state_damaged_is_a_run_error_naming_restart(tmp_path):
    for step in (1, 2):
        save_state(tmp_path, step, _state(step))
    newest, older = list_states(tmp_path)
    newest.write_bytes(newest.read_bytes()[:-5])  # truncated
    assert load_latest_state(tmp_path)[1] == older  # one damaged: the previous one
    older.with_name(older.name + ".sha256").unlink()  # a save that did not finish
    with pytest.raises(RunError, match="--restart") as error:
        load_latest_state(tmp_path)
    assert "\n" not in str(error.value) and "state-00000002.pt" in str(error.value)


def test_shard_cache_removes_a_dead_builders_staging(tmp_path, wordpiece_tokenizer):
    from mlmkit.corpus.shards import tokenize_corpus

    host = staging._HOST
    dead = tmp_path / f".abc.{host}-99999999.staging"  # no such process
    dead.mkdir()
    (dead / "tokens.bin").write_bytes(b"\0" * 1000)
    other_host = tmp_path / ".abc.elsewhere-1.staging"  # maybe alive on another machine
    other_host.mkdir()
    shards = tokenize_corpus(lambda: ["some text to tokenize"] * 5, wordpiece_tokenizer,
                             root=tmp_path, show_progress=False)
    assert not dead.exists() and other_host.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [shards.path.name, other_host.name])


def test_a_run_directory_follows_the_umask(tmp_path, umask_022, fixture_dir,
                                           wordpiece_tokenizer):
    from mlmkit.pretraining import PretrainConfig, pretrain

    run_dir = tmp_path / "run"
    pretrain(PretrainConfig(model="tiny", tokenizer=str(fixture_dir / "tok-wordpiece"),
                            seq_len=32, batch_size=4, steps=2, eval_every=0, eval_blocks=1,
                            pppl_sentences=0, save_every=1, log_every=1, progress=False,
                            fill_mask_examples=0, threads=1, precision="fp32",
                            run_dir=str(run_dir)))
    modes = {str(p.relative_to(run_dir)): p.stat().st_mode & 0o777
             for p in run_dir.rglob("*") if "tensorboard" not in p.parts}
    assert "final/model.safetensors" in modes and "summary.json" in modes
    assert "config.yaml" in modes and "tokenizer/tokenizer.json" in modes
    wrong = {k: oct(v) for k, v in modes.items() if v not in (0o644, 0o755)}
    assert not wrong, wrong  # nothing owner-only
    assert not list(run_dir.rglob(".*"))  # no temporary files left
