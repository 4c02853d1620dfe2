"""Run a test's gloo ranks as separate processes, each a child of multiprocessing's fork
server.

A spawned rank is a fresh interpreter that spends ~3 s of CPU importing torch and mlmkit
before its first collective; the fork server imports them once (for every rank that this
pytest worker starts) and forks each rank from there. A rank is still its own process, with
its own process group over gloo; it does not inherit the test's state (as with spawn, its
function and arguments are pickled), and its environment is the one the fork server started
with, so a rank sets what it needs (MASTER_PORT, ...) itself.
"""

from __future__ import annotations

import multiprocessing
import socket
import time

import pytest
import torch.multiprocessing as mp

# What the fork server imports before it forks a rank: what every rank function imports.
PRELOAD = ["torch", "torch.distributed", "mlmkit.masking", "mlmkit.pretraining"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ranks(function, args: tuple, world: int, deadline_s: float) -> None:
    """`function(rank, *args)` in `world` processes; fails the test past `deadline_s` (a hung
    collective) or if a rank fails."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    context = mp.start_processes(function, args=args, nprocs=world, join=False,
                                 start_method="forkserver")
    deadline = time.monotonic() + deadline_s
    try:
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"{world} processes did not finish in {deadline_s} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
