"""Sharded data parallelism: `--parallel fsdp` (FSDP2, `torch.distributed.fsdp.fully_shard`).

    torchrun --nproc_per_node 8 -m mlmkit pretrain --parallel fsdp --model base

Each process holds 1/W of every parameter, gradient and optimizer state. The objective's
models are sharded layer by layer (every block of the outermost `nn.ModuleList` of each
model: its transformer layers), then as one root around the objective's loss (embeddings,
heads, norms), so that a layer's weights are gathered just before it runs and freed after.
The mixed-precision policy keeps bf16 parameters in the forward and backward where the run's
precision is bf16 (native on the device), and reduces gradients in fp32. As under DDP the
objective divides its loss by the step's global counts, so gradients are summed over
processes (divide factor 1), and synchronised on the last micro-step only.

Training states are written with `torch.distributed.checkpoint` (DCP): every rank writes
its shards into `checkpoints/state-N.dcp/`, rank 0 the rest (data position, RNG, counters,
metrics) into `state-N.pt` with its digest, last. DCP re-shards on load, so a run saved
on W processes resumes on any number of processes, under FSDP, DDP or one process
(`load_sharded`). Evaluation runs on every rank (a sharded forward needs them all); rank 0
records it. Step-N folders and `final/` stay ordinary Hugging Face checkpoints: the full
weights are gathered (to the CPU) and rank 0 writes them.

`--activation-checkpointing` recomputes each layer's activations in the backward pass
instead of keeping them (Hugging Face gradient checkpointing, non-reentrant), under any
`--parallel`: less memory for about a third more compute.
"""

from __future__ import annotations

import contextlib
import shutil
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from mlmkit.core import staging
from mlmkit.errors import InvalidArgument, RunError
from mlmkit.training.checkpoint import (
    SHARDED_KEY,
    checkpoint_dir,
    prune_step_dirs,
    save_model_dir,
    save_state,
    shard_sizes,
)
from mlmkit.training.ddp import DistributedRuntime, ObjectiveLoss
from mlmkit.training.objective import LossOutput

PARALLEL = ("ddp", "fsdp")


def layer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks of the outermost `nn.ModuleList`s of `model` (its transformer layers)."""
    blocks, inside = [], set()
    for name, module in model.named_modules():
        if any(name.startswith(prefix + ".") for prefix in inside):
            continue
        if isinstance(module, torch.nn.ModuleList):
            inside.add(name)
            blocks.extend(module)
    return blocks


def enable_activation_checkpointing(objective) -> None:
    """Recompute every layer's activations in the backward pass (HF gradient checkpointing)."""
    for name, module in objective.modules.items():
        if not getattr(module, "supports_gradient_checkpointing", False):
            raise InvalidArgument(f"--activation-checkpointing: the {name} model "
                                  f"({type(module).__name__}) does not support gradient "
                                  "checkpointing; train without the flag")
        module.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})


@dataclass
class FSDPRuntime(DistributedRuntime):
    """A process of a torchrun job training with fully sharded data parallelism."""

    sharded = True  # states through DCP; evaluation and export on every rank
    _root: object = field(default=None, repr=False)

    def wrap_objective(self, objective) -> None:
        bf16 = self.precision == "bf16"
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None,
                                      reduce_dtype=torch.float32)
        for module in objective.modules.values():
            for block in layer_blocks(module):
                fully_shard(block, mp_policy=policy)
        root = ObjectiveLoss(objective)
        fully_shard(root, mp_policy=policy)
        for module in root.modules():
            if isinstance(module, FSDPModule):
                module.set_gradient_divide_factor(1.0)  # sum: losses use global counts
                module.set_force_sum_reduction_for_comms(True)  # SUM (gloo has no PREMUL_SUM)
        self._root = root

        def loss(tensors, totals) -> LossOutput:
            value, metrics = root(tensors, totals)
            return LossOutput(loss=value, metrics=metrics)

        objective.loss = loss

    @contextlib.contextmanager
    def _sync(self, on: bool):
        self._root.set_requires_gradient_sync(on)
        try:
            yield
        finally:
            self._root.set_requires_gradient_sync(True)

    def no_sync(self, model, last_micro_step: bool):
        if self._root is None or last_micro_step:
            return contextlib.nullcontext()
        return self._sync(False)

    @contextlib.contextmanager
    def gathered(self):
        """The root's own parameters gathered, for calls outside the loss (evaluation);
        the layers gather themselves when they run."""
        self._root.unshard()
        try:
            yield
        finally:
            self._root.reshard()

    def full_state(self) -> dict[str, dict[str, torch.Tensor]]:
        """Every module's full weights on the CPU (a collective: call on every rank)."""
        full = get_model_state_dict(self._root, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True))
        parts: dict[str, dict[str, torch.Tensor]] = {}
        for key, value in full.items():
            _, name, rest = key.split(".", 2)  # parts.<module>.<parameter>
            parts.setdefault(name, {})[rest] = value
        return parts

    @contextlib.contextmanager
    def exporting(self, objective):
        """On every rank: gather the full weights; on rank 0, `save_pretrained` of each
        module writes them (a plain Hugging Face checkpoint)."""
        parts = self.full_state()
        patched = []
        if self.is_main:
            for name, module in objective.modules.items():
                state = _without_aliases(module, parts[name])
                module.save_pretrained = partial(type(module).save_pretrained, module,
                                                 state_dict=state)
                patched.append(module)
        try:
            yield
        finally:
            for module in patched:
                del module.save_pretrained


def _without_aliases(module: torch.nn.Module, state: dict) -> dict:
    """`state` less the second name of each shared (tied) parameter, as the model's own
    state dict would be saved: gathered copies no longer share storage, so the export
    would otherwise hold e.g. the tied output embedding twice."""
    seen, aliases = set(), set()
    for key, parameter in module.named_parameters(remove_duplicate=False):
        if id(parameter) in seen:
            aliases.add(key)
        seen.add(id(parameter))
    return {k: v for k, v in state.items() if k not in aliases}


def build_fsdp_runtime(runtime: DistributedRuntime) -> FSDPRuntime:
    """The FSDP runtime of this torchrun process (its process group already joined)."""
    return FSDPRuntime(device=runtime.device, precision=runtime.precision, rank=runtime.rank,
                       world_size=runtime.world_size, local_rank=runtime.local_rank,
                       group=runtime.group)


# ---- training states through torch.distributed.checkpoint


def _parts(run) -> torch.nn.Module:
    root = getattr(run.runtime, "_root", None)
    return root if root is not None else ObjectiveLoss(run.objective)



def save_sharded(run, run_dir: Path, keep: int) -> Path:
    """Write the run's state at its step under `run_dir`: DCP shards by every rank, then
    rank 0's `state-N.pt` (pointing at them, with their sizes) and its digest, last. A
    collective: call on every rank."""
    folder = checkpoint_dir(run_dir)
    target = folder / f"state-{run.state.step:08d}.dcp"
    names = [str(staging.staging_dir(target)) if run.is_main else None]
    if run.runtime.world_size > 1:
        dist.broadcast_object_list(names, src=0)  # every rank writes into rank 0's folder
    partial_dir = Path(names[0])
    model_state, optim_state = get_state_dict(_parts(run), run.optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(partial_dir))
    run.runtime.barrier()
    path = None
    if run.is_main:
        staging.publish_dir(partial_dir, target)
        state = run.state_dict(weights=False)
        state[SHARDED_KEY] = {"folder": target.name, "sizes": shard_sizes(target)}
        path = save_state(run_dir, run.state.step, state, keep=keep)
    run.runtime.barrier()
    return path



def load_sharded(run, state: dict) -> None:
    """Load a DCP state into the run's modules and optimizer, re-sharded for this run's
    processes (FSDP at any world size, DDP or one process)."""
    folder = Path(state[SHARDED_KEY]["path"])  # set when the state was read and verified
    parts = _parts(run)
    model_state, optim_state = get_state_dict(parts, run.optimizer)
    try:
        with warnings.catch_warnings():  # "assuming ... a single process": so it is
            warnings.simplefilter("ignore", UserWarning)
            dcp.load({"model": model_state, "optim": optim_state}, checkpoint_id=str(folder))
    except Exception as error:  # DCP's own errors name no flag
        raise RunError(f"--resume {str(run.run_dir)!r}: cannot read the sharded state "
                       f"{folder} ({type(error).__name__}: {error}); resume from an earlier "
                       "state by removing this one, or start over with --restart") from error
    set_state_dict(parts, run.optimizer, model_state_dict=model_state,
                   optim_state_dict=optim_state)


def prune_sharded(run_dir: Path) -> None:
    """Remove DCP folders whose state-N.pt is gone (pruned, or never finished)."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return
    for shards in folder.glob("state-*.dcp"):
        if not shards.with_suffix(".pt").exists():
            shutil.rmtree(shards, ignore_errors=True)


# ---- what the run calls under FSDP (train/run.py)


def save_run(run, with_model_dir: bool) -> None:
    """`Run.save` under FSDP: the state through DCP, a step-N folder from the full weights."""
    save_sharded(run, run.run_dir, run.config.keep_checkpoints)
    run.last_saved = run.state.step
    if with_model_dir:
        with run.runtime.exporting(run.objective):
            if run.is_main:
                save_model_dir(run.save_step_model, run.run_dir / f"step-{run.state.step}")
    if run.is_main:
        prune_step_dirs(run.run_dir, run.config.keep_checkpoints)
    run.runtime.barrier()


def export_final(run, save) -> Path | None:
    """`Run.save_final` under FSDP: gather the full weights; rank 0 writes `final/`."""
    with run.runtime.exporting(run.objective):
        final = save_model_dir(save, run.run_dir / "final") if run.is_main else None
    run.runtime.barrier()
    return final


def evaluate(run) -> dict:
    """Evaluation under FSDP: every rank runs it (a sharded forward needs them all)."""
    with run.runtime.gathered():
        return run.objective.evaluate(run.validation, run.data.sentences)


__all__ = ["FSDPRuntime", "PARALLEL", "build_fsdp_runtime",
           "enable_activation_checkpointing", "evaluate", "export_final", "layer_blocks",
           "load_sharded", "prune_sharded", "save_run", "save_sharded"]
