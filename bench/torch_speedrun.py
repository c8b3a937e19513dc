"""configs/fashion-mnist-speedrun.toml in PyTorch, written as a careful user would: the
Fashion-MNIST tensors on the GPU, random 2-pixel translations (zero padding) and flips drawn on
the GPU, the same quarter-width CIFAR ResNet-18 (torch_cpu.py, channels 32), bf16 autocast and
channels-last, SGD lr 0.4 with Nesterov momentum and weight decay 5e-4, one-cycle (25% warm-up),
label smoothing 0.1, batch 512, test-time flip averaging, cudnn.benchmark, a fixed number of
epochs. Prints the final test accuracy and the seconds since the interpreter started (imports,
CUDA start-up and data loading included), as bench/speedrun.sh times hourglass.
    python3 bench/torch_speedrun.py --data DIR [--seed S] [--epochs 10]
"""
import time

START = time.perf_counter()  # before the heavy imports: counted, as a user waits for them

import argparse  # noqa: E402
import gzip  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cpu import ResNet18Cifar  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST


def read_idx(path, offset):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(data_dir, prefix):
    def find(name):
        for candidate in (name + ".gz", name):
            if os.path.exists(os.path.join(data_dir, candidate)):
                return os.path.join(data_dir, candidate)
        raise FileNotFoundError(os.path.join(data_dir, name))
    images = read_idx(find(f"{prefix}-images-idx3-ubyte"), 16).reshape(-1, 1, 28, 28)
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte"), 8)
    return images, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=10)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True

    def to_device(images, labels):
        x = torch.from_numpy(images.copy()).to(dev).float().div_(255).sub_(MEAN).div_(STD)
        return x.contiguous(memory_format=torch.channels_last), torch.from_numpy(
            labels.astype(np.int64)).to(dev)

    x_train, y_train = to_device(*load(a.data, "train"))
    x_test, y_test = to_device(*load(a.data, "t10k"))
    model = ResNet18Cifar(1, 10, channels=32).to(dev).to(memory_format=torch.channels_last)
    batch = 512
    steps_per_epoch = (len(x_train) + batch - 1) // batch
    opt = torch.optim.SGD(model.parameters(), lr=0.4, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.4, pct_start=0.25,
                                                epochs=a.epochs, steps_per_epoch=steps_per_epoch)
    pad = 2
    background = (0 - MEAN) / STD  # a zero pixel, normalised
    for epoch in range(a.epochs):
        model.train()
        order = torch.randperm(len(x_train), device=dev)
        padded = F.pad(x_train, (pad, pad, pad, pad), value=background)
        for i in range(steps_per_epoch):
            idx = order[i * batch:(i + 1) * batch]
            n = len(idx)
            # Per-sample translations by gathering shifted windows, and flips.
            dy = torch.randint(0, 2 * pad + 1, (n,), device=dev)
            dx = torch.randint(0, 2 * pad + 1, (n,), device=dev)
            rows = (dy[:, None] + torch.arange(28, device=dev)[None, :])
            cols = (dx[:, None] + torch.arange(28, device=dev)[None, :])
            xb = padded[idx][torch.arange(n, device=dev)[:, None, None], :,
                             rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
            flip = torch.rand(n, device=dev) < 0.5
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            xb = xb.contiguous(memory_format=torch.channels_last)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(xb), y_train[idx], label_smoothing=0.1)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for i in range(0, len(x_test), 2048):
            xb = x_test[i:i + 2048]
            logits = model(xb) + model(xb.flip(3))
            correct += (logits.argmax(1) == y_test[i:i + 2048]).sum().item()
    acc = correct / len(x_test)
    print(f"pytorch {torch.__version__} seed {a.seed}: test accuracy {acc:.4f} after {a.epochs} "
          f"epochs, {time.perf_counter() - START:.2f} s from interpreter start (python start-up "
          f"before it not counted)")


if __name__ == "__main__":
    main()
