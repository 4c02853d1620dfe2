"""`--cuda-graphs`: the run's compiled regions replayed as CUDA graphs, refused up front
where a step's shapes would not stay the same.

A CUDA graph replays the kernels recorded for one set of tensor shapes; torch.compile's
mode "reduce-overhead" records one per shape it meets. A run fits that when every
micro-batch has the same rows and length: packed blocks of --seq-len (any packing: a
padded block keeps its length), a fixed --batch-size and --grad-accum. The regional
compile (`--compile-layers`) sees only the layers' [rows, length, hidden] inputs; the
whole-loss compile (`--compile`) also the masked positions, whose count changes every
batch: they go into a few fixed slot counts (`mlmkit.models.static_positions`).
What changes shape on its own is refused here, before any work, in one line each.
"""

from __future__ import annotations

import torch

from mlmkit.errors import InvalidArgument
from mlmkit.training.runtime import compile_layers_on


def check_cuda_graphs_device(device) -> None:
    """--cuda-graphs on a CPU: refused (the flag, the reason, the fix)."""
    if device is not None and str(device) != "auto" and torch.device(device).type != "cuda":
        raise InvalidArgument(f"--cuda-graphs: CUDA graphs need a GPU and this run is on "
                              f"{torch.device(device).type}: train with --device cuda or "
                              "drop --cuda-graphs")


def check_static_shapes(config, device, compiler_ready: bool | None = None) -> None:
    """What --cuda-graphs needs of the run (`device`: the resolved one, None if not yet;
    `compiler_ready`: see `compile_layers_on`)."""
    if not config.cuda_graphs:
        return
    check_cuda_graphs_device(device if device is not None else config.device)
    if config.objective != "mlm":
        raise InvalidArgument(f"--cuda-graphs trains --objective mlm only, not "
                              f"{config.objective!r}: drop --cuda-graphs")
    if config.unpadded:
        raise InvalidArgument("--cuda-graphs with --unpadded: the per-document attention's "
                              "shapes follow each batch's documents; drop one of them")
    if config.batch_warmup_tokens:
        raise InvalidArgument("--cuda-graphs with --batch-warmup-tokens: the micro-batch grows "
                              "step by step, a new shape each time; drop one of them")
    if not config.compile and not compile_layers_on(config, device or "cuda", compiler_ready):
        raise InvalidArgument("--cuda-graphs replays compiled code: add --compile-layers (or "
                              "--compile), or drop --cuda-graphs")
