#!/usr/bin/env python3
"""PyTorch DDP reference for data-parallel scaling, timed exactly as `hourglass bench`.

    torchrun --standalone --nproc_per_node N bench/torch_ddp.py --model resnet50 --batch 256 \
        --size 224 --precision bf16 [--steps 30 --rounds 3 --warmup 10] [--json]

Each rank trains bench/torch_gpu.py's model (channels-last, autocast) on one fixed random batch
of --batch rows (per GPU) on its LOCAL_RANK's GPU, wrapped in DistributedDataParallel over NCCL
(gradient buckets of 25 MiB, DDP's default); SGD with Nesterov momentum as in torch_gpu.py. The
timing is hourglass bench's: --warmup untimed steps, a sync, then --rounds rounds of --steps
steps each ended by a sync; the median round counts. Rank 0 prints one line (with --json, one
JSON object) with the job's images/s: ranks x batch / step time.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cpu import ResNet18Cifar  # noqa: E402
from torch_gpu import ResNet50  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet50", choices=["resnet18-cifar", "resnet50"])
    p.add_argument("--batch", type=int, default=256, help="rows per GPU")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    dev = torch.device("cuda", local_rank)
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(0)
    model = (ResNet18Cifar(3, a.classes) if a.model == "resnet18-cifar"
             else ResNet50(3, a.classes)).to(dev).to(memory_format=torch.channels_last)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    gen = torch.Generator(device=dev).manual_seed(1 + dist.get_rank())
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev, generator=gen)
    x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,), device=dev, generator=gen)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" else None

    def step():
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(ddp(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    ddp.train()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    per_step = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        torch.cuda.synchronize()
        per_step.append((time.perf_counter() - t0) / a.steps)
    ms = statistics.median(per_step) * 1e3
    if dist.get_rank() == 0:
        r = {"framework": "pytorch-ddp", "version": torch.__version__, "ranks": world,
             "device": torch.cuda.get_device_name(), "model": a.model, "batch": a.batch,
             "size": a.size, "precision": a.precision, "train_step_ms": ms,
             "train_images_per_s": world * a.batch * 1e3 / ms, "final_loss": float(loss)}
        print(json.dumps(r) if a.json else
              f"pytorch-ddp {a.model} {world} x {a.batch} {a.precision}: "
              f"{r['train_images_per_s']:.0f} images/s ({ms:.2f} ms/step)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
