#!/usr/bin/python3
"""Generate the tiny-ResNet golden reference (tests/golden/tiny_resnet_v1.safetensors).

Run with Debian's CPU PyTorch (python3-torch), from the repository root:

    /usr/bin/python3 tests/golden/make_golden.py

Only the standard library, torch and numpy are used. The safetensors file is
written by hand (json + struct) and read back by the reader below as a
self-check; a second, independent check recomputes the step-0 forward pass in
numpy directly from the saved NHWC input and KRSC weights, which validates the
layout conversions the C++ engine relies on.

Regenerating the file with different contents requires bumping the version in
its name (tiny_resnet_v2.safetensors, ...) and FORMAT_VERSION below if the
layout of the file changes; see tests/golden/README.md.
"""

import argparse
import collections
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FORMAT_VERSION = "1"
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "tiny_resnet_v1.safetensors")

# Hyper-parameters (also recorded in the file's metadata).
SEED = 0
BATCH, IN_C, HW, NUM_CLASSES = 4, 3, 8, 10
STEPS = 3
LR, MOMENTUM, WEIGHT_DECAY, NESTEROV = 0.1, 0.9, 5e-4, True
LABEL_SMOOTHING = 0.1
BN_MOMENTUM, BN_EPS = 0.1, 1e-5


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------
def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def bn(c):
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class Stem(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = conv3x3(cin, cout)
        self.bn = bn(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Shortcut(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
        self.bn = bn(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv3x3(cin, cout, stride)
        self.bn1 = bn(cout)
        self.conv2 = conv3x3(cout, cout)
        self.bn2 = bn(cout)
        self.shortcut = (Shortcut(cin, cout, stride)
                         if stride != 1 or cin != cout else None)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = Stem(IN_C, 8)
        self.layer1 = nn.Sequential(BasicBlock(8, 8, 1))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2))
        self.fc = nn.Linear(16, NUM_CLASSES)

    def forward(self, x):
        acts = collections.OrderedDict()
        x = self.stem(x)
        acts["stem"] = x
        x = self.layer1(x)
        acts["layer1"] = x
        x = self.layer2(x)
        acts["layer2"] = x
        x = x.mean(dim=(2, 3))  # global average pool -> [N, 16]
        acts["pool"] = x
        logits = self.fc(x)
        return logits, acts


def build_model():
    """Seeded construction; PyTorch default inits, then non-trivial BN affine."""
    model = TinyResNet()
    with torch.no_grad():
        for m in model.modules():  # deterministic (registration) order
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model


# --------------------------------------------------------------------------
# Layout helpers (torch NCHW / OIHW -> hourglass NHWC / KRSC)
# --------------------------------------------------------------------------
def to_hg(t):
    """Convert a torch tensor to hourglass layout: 4-D -> permute(0,2,3,1)."""
    t = t.detach()
    if t.dim() == 4:
        t = t.permute(0, 2, 3, 1)
    return t.contiguous().clone()


def state_tensors(model):
    """Every parameter and buffer except num_batches_tracked, in module order."""
    out = collections.OrderedDict()
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        out[name] = to_hg(t)
    return out


# --------------------------------------------------------------------------
# Minimal safetensors writer / reader
# --------------------------------------------------------------------------
_DTYPES = {
    torch.float32: ("F32", "<f4"),
    torch.int64: ("I64", "<i8"),
}
_NP_BY_NAME = {v[0]: v[1] for v in _DTYPES.values()}


def save_safetensors(path, tensors, metadata):
    header = collections.OrderedDict()
    header["__metadata__"] = collections.OrderedDict(
        (k, str(v)) for k, v in metadata.items())
    blobs = []
    offset = 0
    for name, t in tensors.items():
        st_dtype, np_dtype = _DTYPES[t.dtype]
        data = t.detach().contiguous().numpy().astype(np_dtype, copy=False).tobytes()
        header[name] = collections.OrderedDict([
            ("dtype", st_dtype),
            ("shape", list(t.shape)),
            ("data_offsets", [offset, offset + len(data)]),
        ])
        blobs.append(data)
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    assert hlen % 8 == 0, "header length not a multiple of 8"
    header = json.loads(raw[8:8 + hlen].decode("utf-8"),
                        object_pairs_hook=collections.OrderedDict)
    data = raw[8 + hlen:]
    metadata = header.pop("__metadata__", {})
    tensors = collections.OrderedDict()
    expect = 0
    for name, info in header.items():
        b, e = info["data_offsets"]
        assert b == expect, f"{name}: non-contiguous data offsets"
        expect = e
        np_dtype = np.dtype(_NP_BY_NAME[info["dtype"]])
        shape = tuple(info["shape"])
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        assert e - b == n * np_dtype.itemsize, f"{name}: size mismatch"
        tensors[name] = np.frombuffer(data[b:e], dtype=np_dtype).reshape(shape)
    assert expect == len(data), "trailing bytes after last tensor"
    return tensors, metadata


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------
def generate():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(SEED)

    model = build_model()
    x = torch.randn(BATCH, IN_C, HW, HW)
    labels = torch.randint(0, NUM_CLASSES, (BATCH,))

    tensors = collections.OrderedDict()
    tensors["input"] = to_hg(x)            # NHWC [4,8,8,3]
    tensors["labels"] = labels.clone()     # I64 [4]
    for name, t in state_tensors(model).items():
        tensors["init." + name] = t

    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM,
                          nesterov=NESTEROV, weight_decay=WEIGHT_DECAY)
    criterion = nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING)
    model.train()

    losses = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        logits, acts = model(x)
        loss = criterion(logits, labels)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            for k, v in acts.items():
                tensors["step0.act." + k] = to_hg(v)
            tensors["step0.logits"] = to_hg(logits)
            for name, p in model.named_parameters():
                tensors["grad." + name] = to_hg(p.grad)
        opt.step()

    tensors["loss"] = torch.tensor(losses, dtype=torch.float32)
    for name, t in state_tensors(model).items():
        tensors["final." + name] = t
    return tensors, losses


def metadata():
    return collections.OrderedDict([
        ("format_version", FORMAT_VERSION),
        ("torch_version", torch.__version__),
        ("numpy_version", np.__version__),
        ("generator", "tests/golden/make_golden.py"),
        ("model",
         "tiny resnet, CIFAR stem. stem: conv3x3(3->8,s1,p1,no bias)+BN(8)+ReLU; "
         "layer1.0: BasicBlock(8->8,s1) conv3x3-bn1-relu-conv3x3-bn2 + identity, relu; "
         "layer2.0: BasicBlock(8->16,s2), conv1 stride 2, shortcut conv1x1(8->16,s2,no bias)+BN, relu; "
         "global average pool over H,W; fc Linear(16->10) with bias"),
        ("layout",
         "activations NHWC; conv weights KRSC [out,kh,kw,in] (torch permute(0,2,3,1)); "
         "linear weights [out,in]; act.* are outputs after each stage's final relu; "
         "act.pool [N,16]"),
        ("init",
         "torch.manual_seed(0); PyTorch default inits (conv/linear kaiming_uniform a=sqrt(5), "
         "linear bias U(+-1/sqrt(fan_in))); then for each BN in module order: "
         "weight.uniform_(0.5,1.5), bias.uniform_(-0.2,0.2); running_mean 0, running_var 1. "
         "Then x=randn(4,3,8,8) NCHW, labels=randint(0,10,(4,))"),
        ("batchnorm",
         f"training mode, momentum {BN_MOMENTUM}, eps {BN_EPS}; normalises with batch mean and "
         "biased batch variance; running_var updated with unbiased variance (n/(n-1)); "
         "running = (1-m)*running + m*batch"),
        ("loss", f"CrossEntropyLoss(label_smoothing={LABEL_SMOOTHING}), mean over batch; "
                 "loss[i] is the loss computed at step i before its update"),
        ("optimizer",
         f"torch.optim.SGD(lr={LR}, momentum={MOMENTUM}, nesterov={NESTEROV}, "
         f"weight_decay={WEIGHT_DECAY}, dampening=0) applied to all parameters incl. BN and bias: "
         "g=grad+wd*p; buf=g at step 0 else momentum*buf+g; p-=lr*(g+momentum*buf)"),
        ("steps", str(STEPS)),
        ("dtype", "float32; torch.set_num_threads(1); use_deterministic_algorithms(True)"),
        ("contents",
         "input NHWC [4,8,8,3] F32; labels I64 [4]; init.<name> params+buffers before training; "
         "step0.act.{stem,layer1,layer2,pool}; step0.logits [4,10]; grad.<name> raw parameter "
         "gradients at step 0 (before weight decay); loss F32 [3]; final.<name> params+buffers "
         "after 3 steps; BN num_batches_tracked not saved"),
    ])


# --------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------
def check_roundtrip(path, tensors, meta):
    loaded, lmeta = load_safetensors(path)
    assert list(loaded.keys()) == list(tensors.keys()), "tensor names/order differ"
    for name, t in tensors.items():
        ref = t.numpy()
        got = loaded[name]
        assert got.shape == ref.shape, f"{name}: shape {got.shape} vs {ref.shape}"
        assert got.dtype == ref.dtype, f"{name}: dtype {got.dtype} vs {ref.dtype}"
        assert np.array_equal(got, ref), f"{name}: values differ"
    assert lmeta == {k: str(v) for k, v in meta.items()}, "metadata differs"
    return loaded


def _np_conv_nhwc(x, w, stride, pad):
    """x: NHWC, w: KRSC -> NHWC, float64."""
    n, h, wd, c = x.shape
    k, r, s, c2 = w.shape
    assert c == c2
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    ho = (h + 2 * pad - r) // stride + 1
    wo = (wd + 2 * pad - s) // stride + 1
    out = np.zeros((n, ho, wo, k))
    for i in range(r):
        for j in range(s):
            patch = xp[:, i:i + stride * ho:stride, j:j + stride * wo:stride, :]
            out += patch @ w[:, i, j, :].T
    return out


def _np_bn_train(x, g, b):
    mean = x.mean(axis=(0, 1, 2))
    var = x.var(axis=(0, 1, 2))
    return (x - mean) / np.sqrt(var + BN_EPS) * g + b, mean, x.var(axis=(0, 1, 2), ddof=1)


def check_numpy_forward(loaded):
    """Independent float64 NHWC/KRSC forward of step 0 from the saved file."""
    P = {k[len("init."):]: v.astype(np.float64)
         for k, v in loaded.items() if k.startswith("init.")}
    relu = lambda a: np.maximum(a, 0.0)
    stats = {}

    def bnl(x, name):
        y, m, v = _np_bn_train(x, P[name + ".weight"], P[name + ".bias"])
        stats[name] = (m, v)
        return y

    x = loaded["input"].astype(np.float64)
    stem = relu(bnl(_np_conv_nhwc(x, P["stem.conv.weight"], 1, 1), "stem.bn"))
    o = relu(bnl(_np_conv_nhwc(stem, P["layer1.0.conv1.weight"], 1, 1), "layer1.0.bn1"))
    o = bnl(_np_conv_nhwc(o, P["layer1.0.conv2.weight"], 1, 1), "layer1.0.bn2")
    l1 = relu(o + stem)
    o = relu(bnl(_np_conv_nhwc(l1, P["layer2.0.conv1.weight"], 2, 1), "layer2.0.bn1"))
    o = bnl(_np_conv_nhwc(o, P["layer2.0.conv2.weight"], 1, 1), "layer2.0.bn2")
    sc = bnl(_np_conv_nhwc(l1, P["layer2.0.shortcut.conv.weight"], 2, 0), "layer2.0.shortcut.bn")
    l2 = relu(o + sc)
    pool = l2.mean(axis=(1, 2))
    logits = pool @ P["fc.weight"].T + P["fc.bias"]
    lbl = loaded["labels"]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    eps = LABEL_SMOOTHING
    loss = np.mean(-(1 - eps) * logp[np.arange(len(lbl)), lbl] - eps / NUM_CLASSES * logp.sum(axis=1))

    worst = 0.0
    for key, ref in [("step0.act.stem", stem), ("step0.act.layer1", l1),
                     ("step0.act.layer2", l2), ("step0.act.pool", pool),
                     ("step0.logits", logits)]:
        err = np.max(np.abs(loaded[key] - ref))
        worst = max(worst, err)
        assert err < 1e-4, f"numpy forward mismatch on {key}: {err}"
    assert abs(loaded["loss"][0] - loss) < 1e-5, "numpy loss mismatch"
    return worst


def check_structure(loaded):
    """Every init.<name> has a final.<name>; every parameter has a grad."""
    for k in loaded:
        if k.startswith("init."):
            name = k[len("init."):]
            assert loaded["final." + name].shape == loaded[k].shape
            if not name.endswith(("running_mean", "running_var")):
                assert ("grad." + name) in loaded, f"missing grad.{name}"
                assert loaded["grad." + name].shape == loaded[k].shape


def check_manual_sgd(loaded):
    """Retrain from the saved init with a hand-written Nesterov SGD (the
    formula in the metadata) and compare to the saved final state/losses."""
    torch.set_num_threads(1)
    model = TinyResNet()
    sd = {}
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            sd[name] = t
            continue
        a = torch.from_numpy(loaded["init." + name].copy())
        sd[name] = a.permute(0, 3, 1, 2).contiguous() if a.dim() == 4 else a
    model.load_state_dict(sd)
    model.train()
    x = torch.from_numpy(loaded["input"].copy()).permute(0, 3, 1, 2).contiguous()
    labels = torch.from_numpy(loaded["labels"].copy())
    bufs = {}
    losses = []
    for step in range(STEPS):
        model.zero_grad(set_to_none=True)
        logits, _ = model(x)
        loss = F.cross_entropy(logits, labels, label_smoothing=LABEL_SMOOTHING)
        loss.backward()
        losses.append(loss.item())
        with torch.no_grad():
            for name, p in model.named_parameters():
                g = p.grad + WEIGHT_DECAY * p
                bufs[name] = g.clone() if step == 0 else MOMENTUM * bufs[name] + g
                p -= LR * (g + MOMENTUM * bufs[name])
    worst = 0.0
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        err = float(np.max(np.abs(to_hg(t).numpy() - loaded["final." + name])))
        worst = max(worst, err)
        assert err < 1e-5, f"manual SGD mismatch on final.{name}: {err}"
    assert np.allclose(np.array(losses, dtype=np.float32), loaded["loss"], atol=1e-6, rtol=0)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()

    tensors, losses = generate()
    # Determinism: a second independent run must produce bit-identical tensors.
    tensors2, _ = generate()
    for k in tensors:
        assert torch.equal(tensors[k], tensors2[k]), f"non-deterministic: {k}"

    meta = metadata()
    save_safetensors(args.out, tensors, meta)
    loaded = check_roundtrip(args.out, tensors, meta)
    err = check_numpy_forward(loaded)
    check_structure(loaded)
    sgd_err = check_manual_sgd(loaded)

    size = os.path.getsize(args.out)
    print(f"wrote {args.out}: {len(tensors)} tensors, {size} bytes")
    print("losses: " + ", ".join(f"{l:.6f}" for l in losses))
    print(f"self-check ok (round trip exact; numpy NHWC forward max abs err {err:.2e}; "
          f"manual Nesterov SGD final max abs err {sgd_err:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
