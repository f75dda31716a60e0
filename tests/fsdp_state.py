"""What PyTorch FSDP2 holds per rank, measured on CPU (gloo): run as `python tests/fsdp_state.py
CONFIG_JSON PORT OUT_JSON` by tests/test_memory_fsdp.py. Two ranks shard a transformers Llama
as torchtitan does (torchtitan/models/llama3/infra/parallelize.py, apply_fsdp: each block and then
the whole model under fully_shard with MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32), the last block not resharded after its forward), run one forward, backward
and AdamW step, and write rank 0's bytes: the parameters still gathered after the forward, and its
local shards of the parameters, gradients and optimizer state."""

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


def _worker(rank: int, world: int, port: int, config: dict[str, Any], out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config)).float()
    mesh = init_device_mesh("cpu", (world,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    blocks = model.model.layers
    for i, block in enumerate(blocks):
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=i < len(blocks) - 1)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logits = model(input_ids=torch.randint(0, config["vocab_size"], (2, 16))).logits
    # unsharded after the forward: a plain tensor in the module where the shard was a DTensor
    gathered = sum(_bytes(p) for p in model.parameters() if not isinstance(p, DTensor))
    logits.float().sum().backward()
    optimizer.step()
    params = list(model.parameters())
    held = {
        "gathered": gathered,
        "weights": sum(_bytes(p) for p in params),
        "gradients": sum(_bytes(p.grad) for p in params),
        "optimizer": sum(_bytes(v) for p in params for v in optimizer.state[p].values() if v.dim()),
        "elements": sum(p.numel() for p in params),
    }
    if rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(held, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.multiprocessing.spawn(
        _worker, args=(2, int(sys.argv[2]), json.loads(sys.argv[1]), sys.argv[3]), nprocs=2
    )
