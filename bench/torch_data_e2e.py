"""End-to-end CIFAR-10 training in PyTorch as a user writes it: torchvision's CIFAR10 dataset
(the pickled python version), its transforms (RandomCrop 32 with padding 4, horizontal flip,
ToTensor, Normalize) and a torch DataLoader (pinned memory, N workers), the CIFAR ResNet-18 of
torch_cpu.py in bf16 autocast and channels-last, SGD with Nesterov momentum, one-cycle, label
smoothing 0.1, batch 512, evaluation each epoch: the settings of configs/cifar10-resnet18.toml,
for bench/data_e2e.sh.

The files are converted from the CIFAR-10 binary version in --data (cifar-10-batches-bin, as
hourglass reads them) to the python version in --data/cifar-10-batches-py; their contents are
synthetic, so torchvision's MD5 checks of the official files are skipped.
Prints the training images/s of the epochs after the first (evaluation excluded).
"""
import argparse
import os
import pickle
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cpu import ResNet18Cifar  # noqa: E402

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def convert(data_dir):
    src = os.path.join(data_dir, "cifar-10-batches-bin")
    dst = os.path.join(data_dir, "cifar-10-batches-py")
    os.makedirs(dst, exist_ok=True)
    names = [(f"data_batch_{k}.bin", f"data_batch_{k}") for k in range(1, 6)]
    names.append(("test_batch.bin", "test_batch"))
    for binary, python in names:
        out = os.path.join(dst, python)
        if os.path.exists(out):
            continue
        records = np.fromfile(os.path.join(src, binary), dtype=np.uint8).reshape(-1, 3073)
        with open(out, "wb") as f:
            pickle.dump({"batch_label": python, "labels": records[:, 0].tolist(),
                         "data": np.ascontiguousarray(records[:, 1:]),
                         "filenames": [f"{i}.png" for i in range(len(records))]}, f, protocol=2)
    with open(os.path.join(dst, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": [str(i) for i in range(10)], "num_cases_per_batch": 10000,
                     "num_vis": 3072}, f, protocol=2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4)
    a = p.parse_args()
    try:
        import torchvision
        import torchvision.transforms as T
    except ImportError:
        print("torch_data_e2e: torchvision is not installed here: no PyTorch end-to-end row")
        return

    class Cifar10(torchvision.datasets.CIFAR10):
        # Synthetic files: not the official MD5s, which torchvision checks on the batches and
        # the metadata file.
        def _check_integrity(self):
            return True

        def _load_meta(self):
            self.classes = [str(i) for i in range(10)]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    convert(a.data)
    train_tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize(MEAN, STD)])
    test_tf = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    train_set = Cifar10(a.data, train=True, transform=train_tf)
    test_set = Cifar10(a.data, train=False, transform=test_tf)
    loader_args = dict(num_workers=a.workers, pin_memory=True, persistent_workers=a.workers > 0)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=512, shuffle=True,
                                               **loader_args)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=512, **loader_args)

    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    model = ResNet18Cifar(3, 10).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, pct_start=0.25,
                                                epochs=a.epochs,
                                                steps_per_epoch=len(train_loader))
    rates, firsts = [], []
    for epoch in range(a.epochs):
        model.train()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for x, y in train_loader:
            x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
            y = y.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
        torch.cuda.synchronize()
        train_s = time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for x, y in test_loader:
                x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
                correct += (model(x).argmax(1).cpu() == y).sum().item()
        epoch_s = time.perf_counter() - t0
        (firsts if epoch == 0 else rates).append(len(train_set) / train_s)
        print(f"  epoch {epoch + 1}: train {train_s:.2f} s ({len(train_set) / train_s:,.0f} "
              f"images/s), with evaluation {epoch_s:.2f} s, test acc {correct / len(test_set):.4f}",
              file=sys.stderr)
    rate = len(rates) / sum(1 / r for r in rates) if rates else firsts[0]
    print(f"pytorch {torch.__version__} torchvision {torchvision.__version__} DataLoader "
          f"workers={a.workers}: {rate:,.0f} images/s over epochs 2-{a.epochs}; first epoch "
          f"{len(train_set) / firsts[0]:.2f} s of training")


if __name__ == "__main__":
    main()
