"""The collectives PyTorch FSDP2 issues under HSDP, recorded on CPU (gloo): run as `python
tests/hsdp_collectives.py CONFIG_JSON PORT OUT_JSON` by tests/test_hsdp.py. Four ranks on a 2 x 2
mesh ("dp_replicate" the slower dimension, "dp_shard" the faster: torchtitan's ParallelDims mesh,
torchtitan/distributed/parallel_dims.py) shard a transformers Llama as torchtitan does
(torchtitan/parallelisms/parallelize_llama.py at 9dec370, apply_fsdp: each block, the last with
reshard_after_forward=False, then the whole model, under fully_shard with
MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)), run one
forward, backward and AdamW step, and write what rank 0's torch.distributed calls moved: per
collective and phase, in the order issued, the ranks of its group and its bytes (an all-gather's output, a
reduce-scatter's input, an all-reduce's tensor), as FSDP2's foreach_all_gather and foreach_reduce
issue them; and rank 0's local shards of the parameters, gradients and optimizer state after the
step (as tests/fsdp_state.py measures them), the root's parameters still gathered after the forward
and one block's parameters in bf16."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor


def _bytes(t: Any) -> int:
    local = t.to_local() if isinstance(t, DTensor) else t
    return int(local.numel() * local.element_size())


def _recording(calls: list[dict[str, Any]], phase: list[str]) -> None:
    """torch.distributed's collectives wrapped to note each call (rank 0 writes them): FSDP2's
    all-gather and reduce-scatter under both their names (all_gather_single and
    reduce_scatter_single in torch 2.13's DefaultAllGather and DefaultReduceScatter,
    all_gather_into_tensor and reduce_scatter_tensor before), and the all-reduce."""

    def wrap(name: str, op: str, at: int, key: str) -> None:
        original = getattr(dist, name, None)
        if original is None:
            return

        def recorded(*args: Any, **kwargs: Any) -> Any:
            t = kwargs[key] if key in kwargs else args[at]
            group = kwargs.get("group")
            ranks = dist.get_process_group_ranks(group) if group is not None else range(dist.get_world_size())
            calls.append(
                {"op": op, "phase": phase[0], "ranks": sorted(ranks), "bytes": t.numel() * t.element_size()}
            )
            return original(*args, **kwargs)

        setattr(dist, name, recorded)

    for name in ("all_gather_single", "all_gather_into_tensor"):
        wrap(name, "allgather", 0, "output_tensor")  # the gathered output
    wrap("reduce_scatter_single", "reducescatter", 1, "input")  # the whole gradient in
    wrap("reduce_scatter_tensor", "reducescatter", 1, "input")
    wrap("all_reduce", "allreduce", 0, "tensor")


def _worker(rank: int, world: int, port: int, config: dict[str, Any], out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config)).float()
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp_replicate", "dp_shard"))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    blocks = model.model.layers
    for i, block in enumerate(blocks):  # apply_fsdp at 9dec370: the last block kept gathered
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=i < len(blocks) - 1)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    calls: list[dict[str, Any]] = []
    phase = ["forward"]
    _recording(calls, phase)
    logits = model(input_ids=torch.randint(0, config["vocab_size"], (2, 16))).logits
    # unsharded after the forward: the root's parameters (a plain tensor where the shard was a
    # DTensor), those outside the blocks (the last block's are unsharded too)
    inside = {id(p) for p in blocks.parameters()}
    root = sum(_bytes(p) for p in model.parameters() if not isinstance(p, DTensor) and id(p) not in inside)
    block = sum(p.numel() for p in model.model.layers[0].parameters()) * 2  # gathered in bf16
    phase[0] = "backward"
    logits.float().sum().backward()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer.step()
    params = list(model.parameters())
    held = {
        "weights": sum(_bytes(p) for p in params),
        "gradients": sum(_bytes(p.grad) for p in params),
        "optimizer": sum(_bytes(v) for p in params for v in optimizer.state[p].values() if v.dim()),
        "root": root,
        "block": block,
    }
    if rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"calls": calls, "held": held}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.multiprocessing.spawn(
        _worker, args=(4, int(sys.argv[2]), json.loads(sys.argv[1]), sys.argv[3]), nprocs=4
    )
