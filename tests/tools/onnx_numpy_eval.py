#!/usr/bin/env python3
"""Checks an ONNX model with onnx.checker (full check, shape inference) and evaluates it with
NumPy, an interpreter of its own for the operators `hourglass export --format onnx` writes
(Conv, BatchNormalization, Relu, Add, MaxPool, GlobalAveragePool, Flatten, Gemm, and the INT8
export's QuantizeLinear and DequantizeLinear, per tensor or per axis), independent of
hourglass's kernels. Prints JSON: the opset, the input and output names, and the logits.

Usage: onnx_numpy_eval.py MODEL.onnx RAW_F32_NCHW N,C,H,W
"""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def conv(x, w, a):
    stride = a.get("strides", [1, 1])
    pad = a.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h - kh) // stride[0] + 1
    ow = (wd - kw) // stride[1] + 1
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = x[:, :, i:i + stride[0] * oh:stride[0], j:j + stride[1] * ow:stride[1]]
    return np.einsum("nckluv,ockl->nouv", cols, w)


def max_pool(x, a):
    k = a["kernel_shape"]
    stride = a.get("strides", [1, 1])
    pad = a.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])), constant_values=-np.inf)
    n, c, h, w = x.shape
    oh = (h - k[0]) // stride[0] + 1
    ow = (w - k[1]) // stride[1] + 1
    out = np.full((n, c, oh, ow), -np.inf)
    for i in range(k[0]):
        for j in range(k[1]):
            out = np.maximum(out, x[:, :, i:i + stride[0] * oh:stride[0], j:j + stride[1] * ow:stride[1]])
    return out


def main():
    path, raw, shape = sys.argv[1], sys.argv[2], [int(v) for v in sys.argv[3].split(",")]
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    g = model.graph
    values = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    # The integer range of each int8/uint8 zero point (QuantizeLinear saturates to it).
    ranges = {t.name: (np.iinfo(numpy_helper.to_array(t).dtype).min,
                       np.iinfo(numpy_helper.to_array(t).dtype).max)
              for t in g.initializer if numpy_helper.to_array(t).dtype in (np.int8, np.uint8)}
    values[g.input[0].name] = np.fromfile(raw, dtype="<f4").reshape(shape).astype(np.float64)
    for node in g.node:
        x = [values[i] for i in node.input]
        a = attrs(node)
        op = node.op_type
        if op == "Conv":
            y = conv(x[0], x[1], a)
            if len(x) > 2:  # the bias
                y = y + x[2][None, :, None, None]
        elif op == "BatchNormalization":
            eps = a.get("epsilon", 1e-5)
            s = (x[1] / np.sqrt(x[4] + eps))[None, :, None, None]
            y = (x[0] - x[3][None, :, None, None]) * s + x[2][None, :, None, None]
        elif op == "Relu":
            y = np.maximum(x[0], 0)
        elif op == "Add":
            y = x[0] + x[1]
        elif op == "MaxPool":
            y = max_pool(x[0], a)
        elif op == "GlobalAveragePool":
            y = x[0].mean(axis=(2, 3), keepdims=True)
        elif op == "Flatten":
            y = x[0].reshape(x[0].shape[0], -1)
        elif op == "Gemm":
            w = x[1].T if a.get("transB", 0) else x[1]
            y = x[0] @ w + x[2]
        elif op == "QuantizeLinear":
            lo, hi = ranges[node.input[2]]
            y = np.clip(np.rint(x[0] / x[1]) + x[2], lo, hi)  # rint: half to even
        elif op == "DequantizeLinear":
            scale, zero = x[1], x[2]
            if scale.ndim == 1:  # per axis
                shape = [1] * x[0].ndim
                shape[a.get("axis", 1)] = scale.size
                scale, zero = scale.reshape(shape), zero.reshape(shape)
            y = (x[0] - zero) * scale
        else:
            raise SystemExit(f"operator {op} is not evaluated here")
        values[node.output[0]] = y
    out = {"opset": model.opset_import[0].version, "input": g.input[0].name,
           "output": g.output[0].name, "logits": values[g.output[0].name].tolist()}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
