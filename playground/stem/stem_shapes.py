# ResNet-50's stem (7x7 stride 2 over RGB, 224 px, batch 256, bf16, NHWC) written as different
# stride-1 convolutions over pixel blocks, timed through PyTorch's cuDNN (benchmark mode):
# forward and weight gradient, per formulation. An exploration: which shape do the library's
# fast engines take?
import torch

torch.backends.cudnn.benchmark = True
dev = "cuda"
n = 256


def timed(fn, iters=20):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters * 1000.0  # us


def case(name, c, h, w, k, r, s, stride, pad, useful_gflop):
    x = torch.randn(n, c, h, w, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wt = torch.randn(k, c, r, s, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    y = torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)
    dy = torch.randn_like(y).contiguous(memory_format=torch.channels_last)
    fwd = timed(lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad))
    wgrad = timed(lambda: torch.ops.aten.convolution_backward(
        dy, x, wt, None, [stride, stride], [pad, pad], [1, 1], False, [0, 0], 1,
        [False, True, False]))
    gflop = 2.0 * y.numel() * c * r * s / 1e9
    print(f"| {name} | {list(x.shape)} | {list(wt.shape)} | {list(y.shape)} | {gflop:.0f} | "
          f"{fwd:.1f} | {wgrad:.1f} | {useful_gflop / fwd * 1e3:.0f} |", flush=True)


print("| formulation | input NCHW | weight | output | GFLOP | fwd us | wgrad us | useful TFLOP/s fwd |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
useful = 2.0 * n * 112 * 112 * 64 * 147 / 1e9
case("plain 7x7/2 over 3 ch", 3, 224, 224, 64, 7, 7, 2, 3, useful)
case("plain 7x7/2 over 4 ch", 4, 224, 224, 64, 7, 7, 2, 3, useful)
case("2x2 blocks, 16 ch, 4x4 (now)", 16, 115, 115, 64, 4, 4, 1, 0, useful)
case("2x2 blocks, 12 ch, 4x4", 12, 115, 115, 64, 4, 4, 1, 0, useful)
case("2x4 blocks, 32 ch, 4x3, 2 px out", 32, 115, 58, 128, 4, 3, 1, 0, useful)
case("2x4 blocks, 24 ch, 4x3, 2 px out", 24, 115, 58, 128, 4, 3, 1, 0, useful)
case("2x2 blocks, 32 ch (padded), 4x4", 32, 115, 115, 64, 4, 4, 1, 0, useful)
case("2x8 blocks, 64 ch, 4x3, 4 px out", 64, 115, 30, 256, 4, 3, 1, 0, useful)

x = torch.randn(n, 64, 112, 112, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
x.requires_grad_(True)
pool = lambda: torch.nn.functional.max_pool2d(x, 3, 2, 1)
y = pool()
dy = torch.randn_like(y)
print(f"max pool 3x3/2 [256,64,112,112] bf16 NHWC: forward {timed(pool):.1f} us, "
      f"forward+backward {timed(lambda: torch.autograd.grad(pool(), x, dy)):.1f} us")
