"""Training state on disk: saved atomically, verified on load, newest valid one wins.

`checkpoints/state-00000400.pt` holds everything needed to continue bit-for-bit
(weights, optimizer, data position, RNG states, masking-policy state, metrics so far);
its `.sha256` sidecar is written after it, so a state without a matching digest (a crash
mid-save, a truncated copy) is detected and the previous one used, with a warning.

Every file and folder is fsynced, then renamed into place, then its folder fsynced
(`mlmkit.core.staging`), with the process's umask; what a killed save leaves behind
is removed by `remove_leftovers` when the next run starts in the directory.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import shutil
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from mlmkit.core import staging
from mlmkit.errors import RunError

logger = logging.getLogger(__name__)
STATE_FORMAT = 1
_STATE = re.compile(r"^state-(\d{8})\.pt$")


SHARDED_KEY = "sharded"  # in state-N.pt (--parallel fsdp): the DCP folder of its weights


def shard_sizes(folder: Path) -> dict[str, int]:
    """The files of a DCP folder and their sizes, stored in the state to verify it later."""
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}


def check_sharded(state: dict, path: Path) -> None:
    """Raise ValueError when the DCP folder a state points at is missing or damaged; note
    its path in the state."""
    info = state.get(SHARDED_KEY)
    if info is None:
        return
    folder = path.parent / info["folder"]
    info["path"] = str(folder)
    if not folder.is_dir():
        raise ValueError(f"its sharded weights {folder.name}/ are missing")
    if shard_sizes(folder) != info["sizes"]:
        raise ValueError(f"its sharded weights {folder.name}/ do not have the files and sizes "
                         "it was saved with (truncated or partly copied)")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save_state(run_dir: str | Path, step: int, state: dict, keep: int = 2) -> Path:
    """Write the training state of `step` and drop all but the newest `keep` states."""
    folder = checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save({"format": STATE_FORMAT, **state}, buffer)
    data = buffer.getvalue()
    path = folder / f"state-{step:08d}.pt"
    staging.write_bytes(path, data)
    staging.write_text(path.with_name(path.name + ".sha256"), hashlib.sha256(data).hexdigest())
    for old in list_states(run_dir)[keep:]:
        old.unlink(missing_ok=True)
        old.with_name(old.name + ".sha256").unlink(missing_ok=True)
        shutil.rmtree(old.with_suffix(".dcp"), ignore_errors=True)  # its shards (FSDP)
    return path


def list_states(run_dir: str | Path) -> list[Path]:
    """State files, newest first."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if _STATE.match(p.name)]
    return sorted(found, key=lambda p: int(_STATE.match(p.name).group(1)), reverse=True)


def _read_verified(path: Path) -> dict:
    digest_file = path.with_name(path.name + ".sha256")
    if not digest_file.exists():
        raise ValueError("its .sha256 digest is missing (the save did not finish)")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != digest_file.read_text().strip():
        raise ValueError("its content does not match its .sha256 digest (truncated or corrupt)")
    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError("it is not an mlmkit training state of this version")
    if "sharded" in state:  # --parallel fsdp: its weights are in a DCP folder beside it
        check_sharded(state, path)
    return state


def load_latest_state(run_dir: str | Path, *, new_run: str | None = None,
                      over: str | None = None) -> tuple[dict, Path]:
    """The newest state that verifies; earlier corrupt ones are skipped with a warning.
    `new_run` / `over`: what the errors tell to do (default: pretrain's --restart)."""
    states = list_states(run_dir)
    if not states:
        raise RunError(f"--resume {str(run_dir)!r}: no training state in "
                       f"{checkpoint_dir(run_dir)}; "
                       + (new_run or "start a new run instead (--restart starts over in the "
                          "same directory)"))
    problems = []
    for path in states:
        try:
            return _read_verified(path), path
        except Exception as error:  # any unreadable state: try the previous one
            problems.append(f"{path.name}: {error}")
            logger.warning("checkpoint %s is unusable (%s); falling back to the previous one",
                           path, error)
    raise RunError(f"--resume {str(run_dir)!r}: every training state in "
                   f"{checkpoint_dir(run_dir)} is damaged ({'; '.join(problems)}); the run "
                   "cannot continue: "
                   + (over or "start it over in the same directory with --restart"))


def resume_state(run_dir: str | Path, config: dict, files: tuple[str, ...] = (),
                 kind: str | None = None, marker: str | None = None) -> dict:
    """The newest state of a fine-tuning run directory, after checking it was trained with
    `config` (the settings a resume may not change); the error names each one that differs.
    The settings named in `files` are paths, the same where they name the same file (a
    relative path from another folder). A state whose settings lack `marker` (a setting
    every run of this `kind` records) is another kind of run, and said so."""
    run_dir = Path(run_dir)
    state, _ = load_latest_state(
        run_dir, new_run="start a new run there without --resume",
        over=f"remove {run_dir / 'checkpoints'} to start over, or choose another --run-dir")
    stored = state["config"]
    if marker is not None and marker not in stored:
        raise RunError(f"--resume {str(run_dir)!r}: it holds another kind of run, not a "
                       f"{kind or 'run of this command'} (a pretraining run, perhaps): pass "
                       "the --run-dir of the run to resume, or start a new one")
    changed = [k for k in stored if stored.get(k) != config.get(k)
               and not (k in files and _same_file(stored.get(k), config.get(k)))]
    if changed:
        settings = ", ".join(f"{k}: {stored[k]!r} then, {config.get(k)!r} now" for k in changed)
        raise RunError(f"--resume {str(run_dir)!r}: the run was trained with other settings "
                       f"({settings}); resume with the same ones, or start a new run directory")
    return state


def _same_file(a, b) -> bool:
    try:
        return Path(str(a)).expanduser().samefile(Path(str(b)).expanduser())
    except OSError:
        return False


def remove_leftovers(run_dir: str | Path) -> list[Path]:
    """Remove what killed saves left in the run directory and its checkpoints (temporary
    files, staging and half-replaced folders); the removed paths. Call at the start."""
    run_dir = Path(run_dir)
    removed = staging.remove_leftovers(run_dir) + staging.remove_leftovers(
        checkpoint_dir(run_dir))
    if removed:
        logger.info("removed %d leftover(s) of interrupted saves in %s", len(removed), run_dir)
    return removed


def save_model_dir(save_pretrained, target: str | Path) -> Path:
    """Call `save_pretrained(folder)` in a staging folder, fsync it and rename it to
    `target`: a model folder is whole or absent, and survives a power cut once returned."""
    target = Path(target)
    folder = staging.staging_dir(target)
    try:
        hf_logging.disable_progress_bar()  # one bar per saved shard clutters the training bar
        save_pretrained(folder)
        staging.publish_dir(folder, target)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return target


def prune_step_dirs(run_dir: str | Path, keep: int) -> None:
    """Keep the step-N model folders of the training states kept (at most the newest
    `keep`): each step folder left beside checkpoints/ has its state-N there."""
    kept = {int(_STATE.match(p.name).group(1)) for p in list_states(run_dir)}
    found = sorted((p for p in Path(run_dir).glob("step-*") if p.name[5:].isdigit()),
                   key=lambda p: int(p.name[5:]), reverse=True)
    for number, old in enumerate(found):
        if number >= keep or int(old.name[5:]) not in kept:
            shutil.rmtree(old, ignore_errors=True)
