#!/usr/bin/env python3
"""GPU training-throughput reference with PyTorch, measured exactly as `hourglass bench`.

    python3 bench/torch_gpu.py --model resnet18-cifar --batch 512 --precision bf16 \
        [--channels-last] [--compile] [--steps 20 --rounds 3 --warmup 10] [--json]
    python3 bench/torch_gpu.py --model resnet50 --batch 256 --size 224 --precision bf16 \
        --channels-last

Training step = forward + cross-entropy + backward + SGD (lr 0.01, momentum 0.9, Nesterov,
weight decay 5e-4) + zero_grad, train mode, on one fixed random batch already on the GPU.
Precisions: fp32 (TF32 off), tf32 (TF32 on for matmul and cuDNN), bf16 and fp16 (autocast;
fp16 with torch.amp.GradScaler). cudnn.benchmark is on, as hourglass searches algorithms too.

Timing, the same as hourglass bench: --warmup untimed steps, a device sync, then --rounds
rounds of --steps steps, each round ended by a sync and timed as a whole; the median round's
time per step counts. Peak memory: torch.cuda.max_memory_allocated over the timed rounds
(the statistics are reset after warm-up, as hourglass resets its allocator's peak).

--phases STEPS: after timing, STEPS more steps under torch.profiler, each step's forward (with
the loss), backward and optimizer (step, scaler, zero_grad) in a record_function range; each
CUDA kernel counts in the range that was open when it was launched (its launch's host time:
the autograd engine launches the backward's kernels from its own thread while backward()
waits), and "gaps" is the timed step less all its kernels. Adds "phases" (milliseconds a step)
to the output: bench/step_phases.sh prints them beside hourglass profile's.

--inference: the eval forward alone (eval mode, no_grad, the same autocast), timed as the steps
are at the batch, then --latency-runs single images, each waited for: images/s and the batch-1
latency's p50 and p99 (hourglass bench --inference's measures).

Output: one line; with --json one JSON object on stdout.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cpu import ResNet18Cifar  # noqa: E402  (the same CIFAR ResNet-18 as hourglass)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride here) -> 1x1 x4, with a 1x1 conv+BN shortcut when the shape changes:
    hourglass's Bottleneck (torchvision's v1.5)."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + identity)


class ResNet50(nn.Module):
    """ImageNet stem (7x7/2 conv, BN, ReLU, 3x3/2 max-pool), stages of 3/4/6/3 Bottlenecks."""

    def __init__(self, in_channels=3, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for i, (width, count) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
            for b in range(count):
                blocks.append(Bottleneck(cin, width, 2 if (i > 0 and b == 0) else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, 2, 1)
        x = self.blocks(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def step_phases(step, steps, ranges, step_ms):
    """Milliseconds a step of each phase's kernels (by the range open at their launch), of the
    kernels launched outside the ranges, and the gaps: step_ms less all the kernels."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    ranges["on"] = True
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    ranges["on"] = False
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                   if e.get("cat") == "user_annotation" and e.get("name") in
                   ("forward", "backward", "optimizer"))
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    totals = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0, "(outside ranges)": 0.0}
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        t = launches.get(e.get("args", {}).get("correlation"))
        name = next((n for b, end, n in spans if t is not None and b <= t <= end),
                    "(outside ranges)")
        totals[name] += e["dur"] / 1e3 / steps
    out = dict(totals)
    out["gaps"] = step_ms - sum(totals.values())
    return out


def median_round_ms(a, run_once):
    """--rounds rounds of --steps calls of run_once, each round ended by a device sync and timed
    as a whole (after a sync): the median round's milliseconds per call."""
    torch.cuda.synchronize()
    per_step = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            run_once()
        torch.cuda.synchronize()
        per_step.append((time.perf_counter() - t0) / a.steps)
    return statistics.median(per_step) * 1e3


def emit(a, r, line):
    """The result: one JSON object with --json, else the line."""
    print(json.dumps(r) if a.json else line)


def inference(a, model, x, amp_dtype):
    """--inference: the eval forward's images/s at the batch and its batch-1 latency."""
    model.eval()

    def forward(inp):
        with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype,
                                             enabled=amp_dtype is not None):
            return model(inp)

    for _ in range(a.warmup):
        forward(x)
    ms = median_round_ms(a, lambda: forward(x))
    one = x[:1].contiguous(memory_format=torch.channels_last if a.channels_last
                           else torch.contiguous_format)
    for _ in range(max(3, a.warmup)):
        forward(one)
    torch.cuda.synchronize()
    each = []
    for _ in range(a.latency_runs):
        t0 = time.perf_counter()
        forward(one)
        torch.cuda.synchronize()
        each.append((time.perf_counter() - t0) * 1e3)
    each.sort()
    r = {"framework": "pytorch" + ("-compile" if a.compile else "-eager"),
         "version": torch.__version__, "device": torch.cuda.get_device_name(),
         "model": a.model, "batch": a.batch, "size": a.size, "precision": a.precision,
         "channels_last": a.channels_last, "images_per_s": a.batch * 1e3 / ms,
         "p50_ms": each[len(each) // 2],
         "p99_ms": each[min(len(each) - 1, int(len(each) * 0.99))]}
    emit(a, r, f"{r['framework']} {a.model} inference batch {a.batch} {a.precision}: "
               f"{r['images_per_s']:.0f} images/s; batch 1: p50 {r['p50_ms']:.3f} ms, "
               f"p99 {r['p99_ms']:.3f} ms")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet18-cifar", choices=["resnet18-cifar", "resnet50"])
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--phases", type=int, default=0, metavar="STEPS",
                   help="after timing, profile STEPS steps and report the device time of "
                        "forward, backward and optimizer a step, and the gaps")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="after timing, profile STEPS steps and print each kernel's time per "
                        "step (microseconds, one per line: us<TAB>calls<TAB>name) to stderr")
    p.add_argument("--inference", action="store_true",
                   help="time the eval forward (images/s at the batch, batch-1 latency)")
    p.add_argument("--latency-runs", type=int, default=200)
    a = p.parse_args()

    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(0)
    model = (ResNet18Cifar(a.in_channels, a.classes) if a.model == "resnet18-cifar"
             else ResNet50(a.in_channels, a.classes)).to(dev)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    step_model = torch.compile(model) if a.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    x = torch.randn(a.batch, a.in_channels, a.size, a.size, device=dev).to(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" else None

    import contextlib
    ranges = {"on": False}

    def phase(name):
        if not ranges["on"]:
            return contextlib.nullcontext()
        return torch.profiler.record_function(name)

    def step():
        with phase("forward"):
            with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(step_model(x), y)
        with phase("backward"):
            (scaler.scale(loss) if scaler else loss).backward()
        with phase("optimizer"):
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
        return loss

    if a.inference:
        return inference(a, model if not a.compile else step_model, x, amp_dtype)
    model.train()
    for _ in range(a.warmup):
        loss = step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    resident = torch.cuda.memory_allocated()  # held between steps (weights, optimizer state)
    last = {}
    ms = median_round_ms(a, lambda: last.update(loss=step()))
    loss = last["loss"]
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.profile):
                step()
            torch.cuda.synchronize()
        kernels = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                us, calls = kernels.get(e.name, (0.0, 0))
                kernels[e.name] = (us + e.time_range.elapsed_us() / a.profile, calls + 1)
        for name, (us, calls) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
            print(f"{us:.1f}\t{calls // a.profile}\t{name}", file=sys.stderr)
    phases = step_phases(step, a.phases, ranges, ms) if a.phases else None
    r = {
        "framework": "pytorch" + ("-compile" if a.compile else "-eager"),
        "version": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(),
        "model": a.model, "batch": a.batch, "size": a.size, "precision": a.precision,
        "channels_last": a.channels_last, "compile": a.compile,
        "train_step_ms": ms, "train_images_per_s": a.batch * 1e3 / ms,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "resident_memory_gib": resident / 2**30,
        "final_loss": float(loss),
    }
    if phases is not None:
        r["phases"] = phases
    emit(a, r, f"{r['framework']} {a.model} batch {a.batch} {a.precision}: "
               f"{r['train_images_per_s']:.0f} images/s ({ms:.2f} ms/step), "
               f"peak {r['peak_memory_gib']:.2f} GiB")


if __name__ == "__main__":
    main()
