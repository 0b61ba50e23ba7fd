"""Data parallelism: one process per device under `torchrun`, or a world of one.

`torchrun` sets RANK, LOCAL_RANK and WORLD_SIZE; the process group uses NCCL on GPUs and
gloo on CPUs. Every collective here is a no-op in a world of one, so the loop has one
code path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    device: torch.device
    backend: str | None  # None: a single process

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.size > 1:
            tensor = tensor.to(self.device)
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.cpu()

    def gather(self, value: Any) -> list[Any]:
        if self.size == 1:
            return [value]
        found: list[Any] = [None] * self.size
        dist.all_gather_object(found, value)
        return found

    def broadcast(self, value: Any) -> Any:
        if self.size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()


def start(device: str) -> World:
    """Join the process group when launched by torchrun; pick this rank's device."""
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        from pipeline.core.errors import ConfigError

        raise ConfigError("train.device is cuda but no GPU is visible; use auto or cpu")
    size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    chosen = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(chosen)
    backend = None
    if size > 1:
        backend = "nccl" if use_cuda else "gloo"
        if not dist.is_initialized():
            dist.init_process_group(backend=backend)
    return World(rank, size, chosen, backend)


def stop(world: World) -> None:
    if world.size > 1 and dist.is_initialized():
        dist.destroy_process_group()
