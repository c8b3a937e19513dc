#!/usr/bin/python3
"""CPU training-throughput benchmark with Debian's PyTorch (python3-torch).

Side-by-side reference for hourglass. Run with Debian's interpreter:

    /usr/bin/python3 bench/torch_cpu.py --model resnet18-cifar --batch 64 \
        --warmup 3 --steps 10 --threads 2 [--channels-last] [--json]
    /usr/bin/python3 bench/torch_cpu.py --model small-cnn --batch 128 \
        --in-channels 1 --size 28 [--json]

Training step = zero_grad + forward + CrossEntropy + backward + SGD step
(lr 0.1, momentum 0.9, Nesterov, weight decay 5e-4), float32 (or, with --bf16,
bf16 autocast over float32 weights), train mode.
Eval step = forward only under torch.no_grad() in eval mode. Both report the
median wall time over --steps timed iterations after --warmup untimed ones,
on one fixed random batch (inputs and labels drawn once from a fixed seed).

Output: one human-readable line; with --json the human line goes to stderr and
stdout holds exactly one JSON object (framework, version, model, batch,
train_images_per_s, train_step_ms, eval_images_per_s, eval_step_ms, threads,
channels_last, ... plus min/mean/max, process CPU ms per step and the 1-minute
load average before/after). On a shared 2-core box, a load average above the
core count makes 2-thread timings several times slower (OpenMP barriers), so
the script warns when that happens; compare against hourglass only on an idle
machine.

Only the standard library, torch and numpy are used.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time


def _pre_threads(argv):
    """--threads before torch is imported, so OpenBLAS/OpenMP pools match it."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "2"


# Debian's torch links the system OpenBLAS (BLAS_INFO=generic), whose thread
# pool torch.set_num_threads does not control; pin it to the same count.
_t = _pre_threads(sys.argv[1:])
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, _t)

import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + identity)


class ResNet18Cifar(nn.Module):
    """CIFAR ResNet-18: 3x3 stem (64 ch, no max-pool), stages 64/128/256/512 of
    two BasicBlocks with strides 1/2/2/2, global average pool, linear 512->classes.
    `channels` scales the widths as hourglass's model.channels: c/2c/4c/8c."""

    def __init__(self, in_channels=3, num_classes=10, channels=64):
        super().__init__()
        c = channels
        self.conv = nn.Conv2d(in_channels, c, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        layers, cin = [], c
        for cout, stride in [(c, 1), (2 * c, 2), (4 * c, 2), (8 * c, 2)]:
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride),
                                        BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(8 * c, num_classes)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class SmallCNN(nn.Module):
    """conv3x3(C->32)+BN+ReLU+maxpool2, conv3x3(32->64)+BN+ReLU+maxpool2,
    flatten, Linear(64*(HW/4)^2 -> 128)+ReLU, Linear(128->classes)."""

    def __init__(self, in_channels=1, size=28, num_classes=10):
        super().__init__()
        if size % 4:
            raise ValueError("small-cnn needs --size divisible by 4")
        self.conv1 = nn.Conv2d(in_channels, 32, 3, 1, 1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, 1)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * (size // 4) ** 2, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


MODELS = {
    "resnet18-cifar": lambda a: ResNet18Cifar(a.in_channels, a.num_classes),
    "small-cnn": lambda a: SmallCNN(a.in_channels, a.size, a.num_classes),
}


# --------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------
def timed(fn, warmup, steps):
    """Wall times of `steps` calls after `warmup` calls, plus total process CPU time."""
    for _ in range(warmup):
        fn()
    times = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times, time.process_time() - c0


def summarize(timing, batch):
    times, cpu = timing
    med = statistics.median(times)
    return {
        "cpu_ms_per_step": cpu / len(times) * 1e3,
        "median_ms": med * 1e3,
        "mean_ms": statistics.fmean(times) * 1e3,
        "min_ms": min(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "images_per_s": batch / med,
    }


def run(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    mf = torch.channels_last if args.channels_last else torch.contiguous_format

    model = MODELS[args.model](args).to(memory_format=mf)
    x = torch.randn(args.batch, args.in_channels, args.size, args.size)
    x = x.contiguous(memory_format=mf)
    y = torch.randint(0, args.num_classes, (args.batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                          nesterov=True, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    n_params = sum(p.numel() for p in model.parameters())

    last_loss = [float("nan")]

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16)

    def train_step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        last_loss[0] = loss.item()  # also a sync point

    def eval_step():
        with torch.no_grad(), autocast():
            model(x).sum().item()

    load_before = os.getloadavg()[0]
    model.train()
    train = summarize(timed(train_step, args.warmup, args.steps), args.batch)
    model.eval()
    evals = summarize(timed(eval_step, args.warmup, args.steps), args.batch)

    load_after = os.getloadavg()[0]
    return {
        "framework": "pytorch",
        "version": torch.__version__,
        "model": args.model,
        "batch": args.batch,
        "train_images_per_s": round(train["images_per_s"], 3),
        "train_step_ms": round(train["median_ms"], 3),
        "eval_images_per_s": round(evals["images_per_s"], 3),
        "eval_step_ms": round(evals["median_ms"], 3),
        "threads": args.threads,
        "channels_last": bool(args.channels_last),
        "precision": "bf16" if args.bf16 else "fp32",
        "in_channels": args.in_channels,
        "size": args.size,
        "num_classes": args.num_classes,
        "steps": args.steps,
        "warmup": args.warmup,
        "params": n_params,
        "train_step_ms_stats": {k: round(v, 3) for k, v in train.items() if "_ms" in k},
        "eval_step_ms_stats": {k: round(v, 3) for k, v in evals.items() if "_ms" in k},
        "last_train_loss": round(last_loss[0], 6),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "loadavg_1m": [round(load_before, 2), round(load_after, 2)],
    }


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch CPU training-throughput benchmark")
    ap.add_argument("--model", choices=sorted(MODELS), default="resnet18-cifar")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10, help="timed iterations")
    ap.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--in-channels", type=int, default=None,
                    help="input channels (default 3 for resnet18-cifar, 1 for small-cnn)")
    ap.add_argument("--size", type=int, default=None,
                    help="input height=width (default 32 for resnet18-cifar, 28 for small-cnn)")
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--channels-last", action="store_true",
                    help="use torch.channels_last (NHWC) memory format for model and input")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 autocast (torch.autocast('cpu', torch.bfloat16)), fp32 weights")
    ap.add_argument("--json", action="store_true", help="also print a JSON object")
    args = ap.parse_args(argv)
    small = args.model == "small-cnn"
    if args.in_channels is None:
        args.in_channels = 1 if small else 3
    if args.size is None:
        args.size = 28 if small else 32
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.threads < 1:
        ap.error("need --steps >= 1, --warmup >= 0, --batch >= 1, --threads >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    r = run(args)
    print(f"pytorch {r['version']} {r['model']} batch {r['batch']} "
          f"{r['in_channels']}x{r['size']}x{r['size']} threads {r['threads']} "
          f"{'channels_last' if r['channels_last'] else 'contiguous(NCHW)'}: "
          f"train {r['train_step_ms']:.1f} ms/step ({r['train_images_per_s']:.1f} img/s), "
          f"eval {r['eval_step_ms']:.1f} ms/step ({r['eval_images_per_s']:.1f} img/s) "
          f"[median of {r['steps']} after {r['warmup']} warm-up]",
          file=sys.stderr if args.json else sys.stdout)
    if max(r["loadavg_1m"]) > (os.cpu_count() or 1):
        print(f"warning: 1-min load average {r['loadavg_1m']} exceeds {os.cpu_count()} CPUs; "
              "other processes are competing, timings are pessimistic",
              file=sys.stderr)
    if args.json:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
