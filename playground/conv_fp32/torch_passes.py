#!/usr/bin/env python3
"""PyTorch's side of conv_passes.cu: the same layers, fp32 with TF32 off, channels-last,
cudnn.benchmark on. Times forward, backward-data and backward-filter per layer
(aten.convolution_backward with one output at a time; median of 5 after 2 warm-ups, CUDA
events) and writes CSV lines like conv_passes's (method "torch"). With --profile, also one
training step of each model under torch.profiler: the top kernels by device time.

    python3 torch_passes.py > torch.csv 2> torch.log
    python3 torch_passes.py --profile-only --precision fp32 > profile.txt
"""
import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F


def shapes():
    v = []
    b = 512
    v.append(("r18", "stem3x3_3-64@32", b, 32, 3, 64, 3, 1, 1, 1, False))
    v.append(("r18", "3x3_64@32", b, 32, 64, 64, 3, 1, 1, 4, True))
    cin, hw = 64, 32
    for cout in (128, 256, 512):
        v.append(("r18", f"3x3s2_{cin}-{cout}@{hw}", b, hw, cin, cout, 3, 2, 1, 1, True))
        v.append(("r18", f"3x3_{cout}@{hw // 2}", b, hw // 2, cout, cout, 3, 1, 1, 3, True))
        v.append(("r18", f"1x1s2_{cin}-{cout}@{hw}", b, hw, cin, cout, 1, 2, 0, 1, True))
        cin, hw = cout, hw // 2
    n = 256
    v.append(("r50", "stem7x7s2_3-64@224", n, 224, 3, 64, 7, 2, 3, 1, False))
    cin, hw = 64, 56
    for i, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        cout, stride = width * 4, (1 if i == 0 else 2)
        out = hw // stride
        v.append(("r50", f"1x1_{cin}-{width}@{hw}", n, hw, cin, width, 1, 1, 0, 1, True))
        v.append(("r50", f"3x3s{stride}_{width}@{hw}", n, hw, width, width, 3, stride, 1,
                  blocks if stride == 1 else 1, True))
        v.append(("r50", f"1x1_{width}-{cout}@{out}", n, out, width, cout, 1, 1, 0,
                  blocks + (1 if stride == 1 else 0), True))
        if stride != 1:
            v.append(("r50", f"1x1s2_{cin}-{cout}@{hw}", n, hw, cin, cout, 1, 2, 0, 1, True))
        v.append(("r50", f"1x1_{cout}-{width}@{out}", n, out, cout, width, 1, 1, 0, blocks - 1, True))
        if stride != 1:
            v.append(("r50", f"3x3_{width}@{out}", n, out, width, width, 3, 1, 1, blocks - 1, True))
        cin, hw = cout, out
    return v


def time_ms(fn, reps=5):
    fn()
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def per_layer(dtype):
    print("model,layer,count,pass,method,ms,detail")
    cl = torch.channels_last
    for model, layer, n, hw, c, k, r, stride, pad, count, needs_dx in shapes():
        x = torch.randn(n, c, hw, hw, device="cuda", dtype=dtype).to(memory_format=cl)
        w = torch.randn(k, c, r, r, device="cuda", dtype=dtype).to(memory_format=cl)
        y = F.conv2d(x, w, None, stride, pad)
        dy = torch.randn_like(y).to(memory_format=cl)
        st, pd = [stride, stride], [pad, pad]

        def bwd(mask):
            return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, st, pd, [1, 1],
                                                              False, [0, 0], 1, mask)
        passes = [("fwd", lambda: F.conv2d(x, w, None, stride, pad))]
        if needs_dx:
            passes.append(("bwd_data", bwd([True, False, False])))
        passes.append(("bwd_filter", bwd([False, True, False])))
        for name, fn in passes:
            ms = time_ms(fn)
            print(f"{model},{layer},{count},{name},torch,{ms:.4f},", flush=True)
        del x, w, y, dy


def profile(precision):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    from torch_cpu import ResNet18Cifar
    from torch_gpu import ResNet50
    from torch.profiler import ProfilerActivity, profile as prof
    for name, model, batch, size in [("r18", ResNet18Cifar(3, 10), 512, 32),
                                     ("r50", ResNet50(3, 10), 256, 224)]:
        model = model.cuda().to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
        x = torch.randn(batch, 3, size, size, device="cuda").to(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (batch,), device="cuda")

        def step():
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            step()
            torch.cuda.synchronize()
        print(f"== {name} {precision} batch {batch}: one training step, top kernels")
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=110))
        del model, opt, x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile-only", action="store_true")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32"])
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} "
          f"{torch.cuda.get_device_name()}", file=sys.stderr)
    if a.profile_only:
        profile(a.precision)
    else:
        per_layer(torch.float32)


if __name__ == "__main__":
    main()
