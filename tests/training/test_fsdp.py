"""`--parallel fsdp` on CPU (gloo), launched as two torchrun "nodes" on localhost with a c10d
rendezvous (one process each): FSDP2 training follows one process with the global batch,
states are saved through torch.distributed.checkpoint (sharded at world size 2) and resume
on one process exactly, a damaged newest state falls back to the previous one, and the
exported model folders are ordinary Hugging Face checkpoints."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlmkit.pretraining import PretrainConfig, pretrain

# One worker runs the whole module (tests/conftest.py WHOLE_FILES): its multi-process fixture
# is built once.
pytestmark = pytest.mark.slow

TIMEOUT_S = 400


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(run_dir: Path, tokenizer: str, corpus: str, **overrides) -> dict:
    values = dict(model="tiny", tokenizer=tokenizer, corpus=corpus, validation_share=0.1,
                  seq_len=32, batch_size=8, grad_accum=2, steps=6, lr=3e-3, warmup=0.0,
                  dropout=0.0, eval_every=0, eval_blocks=4, pppl_sentences=0, save_every=2,
                  log_every=1, run_dir=str(run_dir), progress=False, fill_mask_examples=0,
                  threads=1, precision="fp32")
    values.update(overrides)
    return values


def _flags(config: dict) -> list[str]:
    flags = []
    for key, value in config.items():
        name = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(name if value else f"--no-{key.replace('_', '-')}")
        else:
            flags += [name, str(value)]
    return flags


def _two_nodes(config: dict, log_dir: Path, mlmkit_command: list[str]) -> None:
    """Two `torchrun --nnodes 2 --nproc_per_node 1` launches on this machine, meeting at a
    c10d rendezvous, each running `mlmkit pretrain` (the CLI, through the test fork server
    unless it is off)."""
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", MLMKIT_THREADS="1", GLOO_SOCKET_IFNAME="lo",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
            "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            f"127.0.0.1:{port}", "--rdzv_id", "mlmkit-test", "--max_restarts", "0",
            "--no-python", *mlmkit_command, "pretrain", *_flags(config)]
    logs = [open(log_dir / f"node{i}.log", "w") for i in range(2)]  # noqa: SIM115
    try:
        nodes = [subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
                 for log in logs]
        try:
            codes = [node.wait(timeout=TIMEOUT_S) for node in nodes]
        finally:
            for node in nodes:
                if node.poll() is None:
                    node.kill()
    finally:
        for log in logs:
            log.close()
    if codes != [0, 0]:
        pytest.fail(f"torchrun nodes exited {codes}: "
                    + (log_dir / "node0.log").read_text()[-3000:])


def _losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r.get("split") == "train"]


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _model_weights(run) -> dict:
    return {k: v.detach().clone() for k, v in run.objective.modules["model"].state_dict().items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, wordpiece_tokenizer, fixture_dir, mlmkit_command):
    from mlmkit.corpus.python_docs import python_docs

    root = tmp_path_factory.mktemp("fsdp")
    corpus = root / "docs.txt"
    corpus.write_text("\n".join(python_docs("train")[:300]), encoding="utf-8")
    tokenizer = str(fixture_dir / "tok-wordpiece")
    single = root / "single"
    pretrain(PretrainConfig(**_config(single, tokenizer, str(corpus), save_every=0)))
    sharded = root / "sharded"
    _two_nodes(_config(sharded, tokenizer, str(corpus), parallel="fsdp", halt_after=4), root,
               mlmkit_command)
    shutil.copytree(sharded, root / "damaged")  # before a test resumes the run
    return {"single": single, "sharded": sharded, "root": root}


def test_two_fsdp_nodes_follow_one_process(runs):
    one, two = _losses(runs["single"]), _losses(runs["sharded"])
    assert len(one) == 6 and len(two) == 4  # rank 0 logs once per step
    assert one[0] != one[3]  # it trains
    for a, b in zip(one, two, strict=False):
        assert abs(a - b) < 1e-4, (one, two)


def test_states_are_sharded_and_model_folders_are_whole(runs):
    checkpoints = runs["sharded"] / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("state-*.pt")) == [
        "state-00000002.pt", "state-00000004.pt"]
    shards = sorted(p.name for p in (checkpoints / "state-00000004.dcp").iterdir())
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]  # one file per rank
    exported = _weights(runs["sharded"] / "step-4")  # gathered: full shapes
    assert set(exported) == set(_weights(runs["single"] / "final"))  # tied weights once
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(runs["sharded"] / "step-4")
    for key, value in model.state_dict().items():
        if key in exported:
            assert value.shape == exported[key].shape, key


def test_saved_at_two_resumes_at_one_exactly_and_finishes(runs):
    from mlmkit.pretraining.run import build_run

    run_dir = runs["sharded"]
    loaded = build_run(resume=str(run_dir), overrides={"halt_after": None})
    assert loaded.state.step == 4
    exported = _weights(run_dir / "step-4")
    weights = _model_weights(loaded)
    for key, value in exported.items():  # the DCP state re-sharded to one process, bit-exact
        assert torch.equal(weights[key], value), key
    resumed = pretrain(resume=str(run_dir), overrides={"halt_after": None})
    assert resumed.summary["steps"] == 6 and resumed.final_dir is not None
    one, both = _losses(runs["single"]), _losses(run_dir)
    assert len(both) == 6
    for a, b in zip(one, both, strict=True):
        assert abs(a - b) < 1e-4, (one, both)
    final_one, final = _weights(runs["single"] / "final"), _weights(resumed.final_dir)
    for key in final_one:
        assert torch.allclose(final_one[key], final[key], atol=1e-4, rtol=0), key


def test_a_damaged_newest_sharded_state_falls_back_to_the_previous(runs):
    """What a kill -9 in the middle of a save leaves (a shard cut short): the state whose
    shards do not match its record is skipped, the previous one loads exactly."""
    from mlmkit.pretraining.run import build_run

    copy = runs["root"] / "damaged"
    shard = copy / "checkpoints" / "state-00000004.dcp" / "__1_0.distcp"
    shard.write_bytes(shard.read_bytes()[:100])
    loaded = build_run(resume=str(copy), overrides={"halt_after": None})
    assert loaded.state.step == 2
    exported = _weights(copy / "step-2")
    weights = _model_weights(loaded)
    for key, value in exported.items():
        assert torch.equal(weights[key], value), key
