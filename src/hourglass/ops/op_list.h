// The list of ops: every op's signature, written once, with its documentation and its checks.
// No include guard: each includer defines the macros below, includes this file, and gets one
// expansion; the file undefines them at its end.
//
//   HG_OP(return type, name, (parameters), { checks; dispatch })
//       An op every backend implements. Expands to the declaration of hg::ops::name in ops.h,
//       the definition of hg::ops::name (the body) in ops.cpp, a pure virtual in Backend
//       (backend.h) and an override declaration in CpuBackend and GpuBackend. The op-registry
//       test (tests/ops/test_registry.cpp) fails when no op test calls it.
//   HG_COMPOSITE_OP(return type, name, (parameters), { body })
//       An op built from other ops in ops.cpp: declared in ops.h, defined by its body, no
//       backend method.
//   HG_OP_COST(expr) (in a body)
//       What the call asks of the device (an OpCost, op_cost.h) for the op profiler; evaluated
//       only while a profiler records.
//   HG_OP_PROFILE_NAME(expr) (in a body)
//       The name the profiler records this call under (a string literal): the member of an op
//       family it is, e.g. batch_norm_train+add+relu.
//   HG_OP_DEFAULT(value)
//       A default argument: `= value` in the public declaration (ops.h), nothing elsewhere
//       (backends always receive every argument).
//
// Bodies are the public functions: they run in namespace hg::ops of ops.cpp, see the check
// helpers defined there (check_float, check_binary, ...), and have `op`, the op's name as a
// string, for their error messages. A body checks shapes, dtypes and devices (errors name the op
// and the operands) and calls the backend of the inputs' device with contiguous tensors;
// backends may assume what the body checked. Dtypes a particular backend lacks (f64 on GPUs,
// bf16/f16 on the CPU) are refused by that backend, naming the op.
//
// Layouts: activations NHWC [N, H, W, C]; convolution weights KRSC [K, R, S, C/groups];
// linear weights [out, in]. Results with several tensors are structs declared in ops.h.

#ifndef HG_OP
#error "define HG_OP(ret, name, params, ...) before including hourglass/ops/op_list.h"
#endif
#ifndef HG_COMPOSITE_OP
#define HG_COMPOSITE_OP(ret, name, params, ...)
#endif
#ifndef HG_OP_DEFAULT
#define HG_OP_DEFAULT(value)
#endif

// The entries are laid out by hand (clang-format would indent every body under its macro).
// clang-format off

// ---- convolution ----

// x [N,H,W,C], w [K,R,S,C/groups], bias [K] or undefined -> [N,P,Q,K]
HG_OP(Tensor, conv2d, (const Tensor& x, const Tensor& w, const Tensor& bias,
                       const Conv2dParams& p), {
  check_float(op, "input", x);
  check_float(op, "weight", w);
  check_dim(op, "input [N,H,W,C]", x, 4);
  check_dim(op, "weight [K,R,S,C/groups]", w, 4);
  check_same_device(op, x, w);
  check_same_dtype(op, x, w);
  HG_CHECK(p.groups >= 1 && x.size(3) % p.groups == 0 && w.size(0) % p.groups == 0,
           "{}: groups={} must divide input channels {} and output channels {}", op, p.groups,
           x.size(3), w.size(0));
  HG_CHECK(w.size(3) * p.groups == x.size(3),
           "{}: weight {} expects {} input channels, input {} has {}", op, w.describe(),
           w.size(3) * p.groups, x.describe(), x.size(3));
  HG_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0 &&
               p.pad_h >= 0 && p.pad_w >= 0,
           "{}: stride and dilation must be positive, padding non-negative", op);
  const int64_t oh = conv_out_size(x.size(1), w.size(1), p.stride_h, p.pad_h, p.dilation_h);
  const int64_t ow = conv_out_size(x.size(2), w.size(2), p.stride_w, p.pad_w, p.dilation_w);
  HG_CHECK(oh > 0 && ow > 0, "{}: kernel {} does not fit input {}", op, w.describe(),
           x.describe());
  if (bias.defined()) {
    check_vector(op, "bias", bias, w.size(0));
    check_same_device(op, x, bias);
  }
  HG_OP_COST(conv2d_cost(x, w, bias, p));
  return backend_for(x.device()).conv2d(x.contiguous(), w.contiguous(), contig(bias), p);
})

// dx undefined when input_grad is InputGrad::Skip, dbias when has_bias is false.
HG_OP(ops::Conv2dGrads, conv2d_backward, (const Tensor& dy, const Tensor& x, const Tensor& w,
                                          bool has_bias, const Conv2dParams& p,
                                          InputGrad input_grad), {
  check_dim(op, "grad output", dy, 4);
  HG_CHECK(dy.size(0) == x.size(0) && dy.size(3) == w.size(0) &&
               dy.size(1) == conv_out_size(x.size(1), w.size(1), p.stride_h, p.pad_h,
                                           p.dilation_h) &&
               dy.size(2) == conv_out_size(x.size(2), w.size(2), p.stride_w, p.pad_w,
                                           p.dilation_w),
           "{}: grad output {} does not match input {} and weight {}", op, dy.describe(),
           x.describe(), w.describe());
  check_same_dtype(op, dy, x);
  HG_OP_COST(conv2d_backward_cost(dy, x, w, has_bias, input_grad));
  return backend_for(x.device())
      .conv2d_backward(dy.contiguous(), x.contiguous(), w.contiguous(), has_bias, p, input_grad);
})

// ---- batch normalisation over N,H,W per channel C (x is [N,H,W,C] or [N,C]) ----

// Normalises with batch statistics and updates running_mean / running_var in place
// (running_var takes the unbiased variance, as PyTorch does). `fusion` adds what follows the
// normalisation in a residual network in the same passes (ops::BatchNormFusion): a ReLU (and its
// mask, for the backward), a residual before it, or a second batch norm's output (a shortcut,
// whose statistics and running statistics are handled as the first's). One op family: plain,
// batch norm + ReLU, + residual + ReLU, and the pair.
HG_OP(ops::BatchNormForward, batch_norm_train, (const Tensor& x, const Tensor& weight,
                                                const Tensor& bias, Tensor& running_mean,
                                                Tensor& running_var, double momentum, double eps,
                                                const ops::BatchNormFusion& fusion
                                                    HG_OP_DEFAULT({})), {
  check_batch_norm_train(op, "", x, weight, bias, running_mean, running_var);
  const ops::BatchNormShortcut& s = fusion.shortcut;
  HG_CHECK(fusion.relu || (!fusion.residual.defined() && !s.x.defined()),
           "{}: a residual or a shortcut batch norm is fused only before a ReLU (set relu)", op);
  HG_CHECK(!fusion.residual.defined() || !s.x.defined(),
           "{}: fuse either a residual or a shortcut batch norm, not both", op);
  if (fusion.residual.defined()) check_binary(op, x, fusion.residual);
  if (s.x.defined()) {
    check_batch_norm_train(op, "shortcut ", s.x, s.weight, s.bias, s.running_mean,
                           s.running_var);
    check_binary(op, x, s.x);
  }
  HG_OP_COST(elementwise_cost(x, s.x.defined() ? 4 : fusion.residual.defined() ? 2 : 1, 1));
  HG_OP_PROFILE_NAME(s.x.defined()                ? "batch_norm_train+shortcut+relu"
                     : fusion.residual.defined() ? "batch_norm_train+add+relu"
                     : fusion.relu               ? "batch_norm_train+relu"
                                                 : "batch_norm_train");
  ops::BatchNormFusion f = fusion;
  f.residual = contig(f.residual);
  f.shortcut.x = contig(f.shortcut.x);
  return backend_for(x.device())
      .batch_norm_train(x.contiguous(), weight, bias, running_mean, running_var, momentum, eps, f);
})

HG_OP(Tensor, batch_norm_eval, (const Tensor& x, const Tensor& weight, const Tensor& bias,
                                const Tensor& running_mean, const Tensor& running_var,
                                double eps), {
  check_float(op, "input", x);
  const int64_t c = bn_channels(op, x);
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    check_vector(op, "parameter", *t, c);
    check_dtype(op, "parameters and statistics", *t, DType::F32);
    check_same_device(op, x, *t);
  }
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device())
      .batch_norm_eval(x.contiguous(), weight, bias, running_mean, running_var, eps);
})

// The gradients of batch_norm_train from its input and saved statistics; `fusion` (the
// forward's fusions, ops::BatchNormBackwardFusion) masks dy by the forward's ReLU first (with
// dz = dy where y > 0, else 0: dx, dweight, dbias are the plain backward's of dz), and returns
// the residual's gradient (dz) or the shortcut batch norm's gradients beside them.
HG_OP(ops::BatchNormGrads, batch_norm_backward, (const Tensor& dy, const Tensor& x,
                                                 const Tensor& weight, const Tensor& mean,
                                                 const Tensor& invstd,
                                                 const ops::BatchNormBackwardFusion& fusion
                                                     HG_OP_DEFAULT({})), {
  check_same_shape(op, dy, x);
  const bool relu = fusion.relu_output.defined(), shortcut = fusion.shortcut.x.defined(),
             residual = fusion.residual_grad == ResidualGrad::Compute;
  HG_CHECK(relu || (!fusion.dy2.defined() && !residual && !shortcut),
           "{}: a second gradient part, a residual's or a shortcut's gradient needs the "
           "forward's ReLU output or mask (relu_output)", op);
  HG_CHECK(!residual || !shortcut,
           "{}: a residual's gradient and a shortcut's exclude each other", op);
  if (relu) {
    check_binary(op, dy, x);
    check_relu_mask(op, x, fusion.relu_output);
  }
  if (fusion.dy2.defined()) check_binary(op, dy, fusion.dy2);
  if (shortcut) {
    const ops::BatchNormBackwardFusion::Shortcut& s = fusion.shortcut;
    HG_CHECK(fusion.relu_output.dtype() == DType::U8,
             "{}: with a shortcut, relu_output must be the forward's u8 ReLU mask, got {}", op,
             fusion.relu_output.describe());
    check_binary(op, x, s.x);
    const int64_t c = bn_channels(op, x);
    for (const auto& [what, t] : {std::pair<const char*, const Tensor*>{"shortcut weight", &s.weight},
                                  {"shortcut saved mean", &s.mean},
                                  {"shortcut saved invstd", &s.invstd}}) {
      check_vector(op, what, *t, c);
      check_dtype(op, what, *t, DType::F32);
      check_same_device(op, x, *t);
    }
  }
  HG_OP_COST(elementwise_cost(x, (shortcut ? 5 : relu ? 3 : 2) + (fusion.dy2.defined() ? 1 : 0),
                              shortcut ? 2 : residual ? 2 : 1));
  HG_OP_PROFILE_NAME(shortcut   ? "batch_norm_backward+shortcut+relu"
                     : residual ? "batch_norm_backward+add+relu"
                     : relu     ? "batch_norm_backward+relu"
                                : "batch_norm_backward");
  ops::BatchNormBackwardFusion f = fusion;
  f.relu_output = contig(f.relu_output);
  f.dy2 = contig(f.dy2);
  f.shortcut.x = contig(f.shortcut.x);
  return backend_for(x.device())
      .batch_norm_backward(dy.contiguous(), x.contiguous(), weight, mean, invstd, f);
})

// ---- INT8 inference: s8 or u8 tensors scaled by a factor per tensor (zero point 0) ----

// q = saturate(round_half_even(x * inv_scale)), x * inv_scale computed in float (double for
// f64), to s8 [-128, 127] (dtype I8) or u8 [0, 255] (dtype U8, for values that are never
// negative); NaN gives 0 (a quantised tensor has no NaN: check the input first where it matters).
HG_OP(Tensor, quantize_int8, (const Tensor& x, double inv_scale,
                              DType dtype HG_OP_DEFAULT(DType::I8)), {
  check_float(op, "input", x);
  HG_CHECK(std::isfinite(inv_scale) && inv_scale > 0,
           "{}: inv_scale must be positive and finite, got {}", op, inv_scale);
  HG_CHECK(dtype == DType::I8 || dtype == DType::U8, "{}: dtype must be i8 or u8, got {}", op,
           dtype_name(dtype));
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).quantize_int8(x.contiguous(), inv_scale, dtype);
})

// f32 x = q * scale for s8 or u8 q, the product rounded once.
HG_OP(Tensor, dequantize_int8, (const Tensor& q, double scale), {
  check_int8(op, "input", q);
  HG_CHECK(std::isfinite(scale) && scale > 0, "{}: scale must be positive and finite, got {}", op,
           scale);
  HG_OP_COST(elementwise_cost(q, 1, 1));
  return backend_for(q.device()).dequantize_int8(q.contiguous(), scale);
})

// Convolution of x [N,H,W,C] (s8 or u8) with s8 weights w [K,R,S,C] (groups 1), the products
// summed exactly in int32, then the epilogue of Int8ConvParams (ops/params.h) with the f32 [K]
// `multiplier` and `bias` and, when defined, the `residual` (s8 or u8, the output's shape). The
// output is u8 [N,P,Q,K] with p.relu (never negative), s8 without, f32 with p.f32_output. A
// linear layer is the case R = S = H = W = 1.
HG_OP(Tensor, conv2d_int8, (const Tensor& x, const Tensor& w, const Tensor& multiplier,
                            const Tensor& bias, const Tensor& residual,
                            const Int8ConvParams& p), {
  check_dim(op, "input [N,H,W,C]", x, 4);
  check_dim(op, "weight [K,R,S,C]", w, 4);
  check_int8(op, "input", x);
  check_dtype(op, "weight", w, DType::I8);
  check_same_device(op, x, w);
  HG_CHECK(p.conv.groups == 1 && p.conv.dilation_h == 1 && p.conv.dilation_w == 1,
           "{}: groups and dilation must be 1", op);
  HG_CHECK(w.size(3) == x.size(3), "{}: weight {} expects {} input channels, input {} has {}", op,
           w.describe(), w.size(3), x.describe(), x.size(3));
  HG_CHECK(p.conv.stride_h > 0 && p.conv.stride_w > 0 && p.conv.pad_h >= 0 && p.conv.pad_w >= 0,
           "{}: stride must be positive, padding non-negative", op);
  const int64_t oh = conv_out_size(x.size(1), w.size(1), p.conv.stride_h, p.conv.pad_h);
  const int64_t ow = conv_out_size(x.size(2), w.size(2), p.conv.stride_w, p.conv.pad_w);
  HG_CHECK(oh > 0 && ow > 0, "{}: kernel {} does not fit input {}", op, w.describe(),
           x.describe());
  for (const Tensor* t : {&multiplier, &bias}) {
    check_vector(op, t == &bias ? "bias" : "multiplier", *t, w.size(0));
    check_dtype(op, "multiplier and bias", *t, DType::F32);
    check_same_device(op, x, *t);
  }
  if (residual.defined()) {
    check_int8(op, "residual", residual);
    check_same_device(op, x, residual);
    HG_CHECK((residual.shape() == Shape{x.size(0), oh, ow, w.size(0)}),
             "{}: residual {} must have the output's shape [{}, {}, {}, {}]", op,
             residual.describe(), x.size(0), oh, ow, w.size(0));
    HG_CHECK(!p.f32_output, "{}: a residual is added to s8 and u8 outputs only", op);
  }
  HG_CHECK(std::isfinite(p.residual_multiplier), "{}: residual_multiplier is not finite", op);
  return backend_for(x.device())
      .conv2d_int8(x.contiguous(), w.contiguous(), multiplier.contiguous(), bias.contiguous(),
                   contig(residual), p);
})

// Max pooling of an s8 or u8 tensor [N,H,W,C], padding left out as in max_pool2d, the output of
// the input's dtype: for any positive scale s, quantize_int8(max_pool2d(dequantize_int8(x, s)).y,
// 1 / s) without the float round trip (rounding keeps the order). An INT8 network's pooling.
HG_OP(Tensor, max_pool2d_int8, (const Tensor& x, const Pool2dParams& p), {
  check_int8(op, "input", x);
  check_pool(op, x, p);
  return backend_for(x.device()).max_pool2d_int8(x.contiguous(), p);
})

// ---- pooling ----

HG_OP(ops::MaxPoolForward, max_pool2d, (const Tensor& x, const Pool2dParams& p), {
  check_float(op, "input", x);
  check_pool(op, x, p);
  return backend_for(x.device()).max_pool2d(x.contiguous(), p);
})

HG_OP(Tensor, max_pool2d_backward, (const Tensor& dy, const Tensor& x, const Tensor& workspace,
                                    const Pool2dParams& p), {
  check_pool(op, x, p);
  return backend_for(x.device()).max_pool2d_backward(dy.contiguous(), x, workspace, p);
})

// Padding counts towards the divisor (PyTorch's default, count_include_pad=True).
HG_OP(Tensor, avg_pool2d, (const Tensor& x, const Pool2dParams& p), {
  check_float(op, "input", x);
  check_pool(op, x, p);
  return backend_for(x.device()).avg_pool2d(x.contiguous(), p);
})

HG_OP(Tensor, avg_pool2d_backward, (const Tensor& dy, const Tensor& x, const Pool2dParams& p), {
  check_pool(op, x, p);
  return backend_for(x.device()).avg_pool2d_backward(dy.contiguous(), x, p);
})

// [N,H,W,C] -> [N,C]
HG_OP(Tensor, global_avg_pool, (const Tensor& x), {
  check_float(op, "input", x);
  check_dim(op, "input [N,H,W,C]", x, 4);
  return backend_for(x.device()).global_avg_pool(x.contiguous());
})

HG_OP(Tensor, global_avg_pool_backward, (const Tensor& dy, const Tensor& x), {
  HG_CHECK(dy.dim() == 2 && dy.size(0) == x.size(0) && dy.size(1) == x.size(3),
           "{}: grad {} does not match input {}", op, dy.describe(), x.describe());
  return backend_for(x.device()).global_avg_pool_backward(dy.contiguous(), x);
})

// ---- linear: y = x w^T + bias, x [N,in], w [out,in] ----

HG_OP(Tensor, linear, (const Tensor& x, const Tensor& w, const Tensor& bias), {
  check_float(op, "input", x);
  check_float(op, "weight", w);
  check_dim(op, "input [N,in]", x, 2);
  check_dim(op, "weight [out,in]", w, 2);
  check_same_device(op, x, w);
  check_same_dtype(op, x, w);
  HG_CHECK(x.size(1) == w.size(1), "{}: input {} has {} features, weight {} expects {}", op,
           x.describe(), x.size(1), w.describe(), w.size(1));
  if (bias.defined()) {
    check_vector(op, "bias", bias, w.size(0));
    check_same_device(op, x, bias);
  }
  HG_OP_COST(linear_cost(x, w, bias));
  return backend_for(x.device()).linear(x.contiguous(), w.contiguous(), contig(bias));
})

HG_OP(ops::LinearGrads, linear_backward, (const Tensor& dy, const Tensor& x, const Tensor& w,
                                          bool has_bias, InputGrad input_grad), {
  HG_CHECK(dy.dim() == 2 && dy.size(0) == x.size(0) && dy.size(1) == w.size(0),
           "{}: grad {} does not match input {} and weight {}", op, dy.describe(),
           x.describe(), w.describe());
  HG_OP_COST(linear_backward_cost(dy, x, w, has_bias, input_grad));
  return backend_for(x.device())
      .linear_backward(dy.contiguous(), x.contiguous(), w.contiguous(), has_bias, input_grad);
})

// ---- elementwise (same shapes; f32 or f64 on the cpu, f32, bf16 or f16 on GPUs) ----
// The per-element formulas of the out-of-place ones are functors shared by the CPU and GPU
// kernels (backend/elementwise_functors.h).

HG_OP(Tensor, add, (const Tensor& a, const Tensor& b), {
  check_binary(op, a, b);
  HG_OP_COST(elementwise_cost(a, 2, 1));
  return backend_for(a.device()).add(a.contiguous(), b.contiguous());
})

HG_OP(Tensor, sub, (const Tensor& a, const Tensor& b), {
  check_binary(op, a, b);
  HG_OP_COST(elementwise_cost(a, 2, 1));
  return backend_for(a.device()).sub(a.contiguous(), b.contiguous());
})

HG_OP(Tensor, mul, (const Tensor& a, const Tensor& b), {
  check_binary(op, a, b);
  HG_OP_COST(elementwise_cost(a, 2, 1));
  return backend_for(a.device()).mul(a.contiguous(), b.contiguous());
})

HG_OP(Tensor, add_scalar, (const Tensor& a, double s), {
  check_float(op, "input", a);
  HG_OP_COST(elementwise_cost(a, 1, 1));
  return backend_for(a.device()).add_scalar(a.contiguous(), s);
})

HG_OP(Tensor, mul_scalar, (const Tensor& a, double s), {
  check_float(op, "input", a);
  HG_OP_COST(elementwise_cost(a, 1, 1));
  return backend_for(a.device()).mul_scalar(a.contiguous(), s);
})

// dst += alpha * src, in place (gradient accumulation).
HG_OP(void, add_, (Tensor& dst, const Tensor& src, double alpha HG_OP_DEFAULT(1.0)), {
  check_binary(op, dst, src);
  HG_CHECK(dst.is_contiguous(), "{}: destination {} must be contiguous", op, dst.describe());
  HG_OP_COST(elementwise_cost(dst, 2, 1));
  backend_for(dst.device()).add_(dst, src.contiguous(), alpha);
})

// dsts[i] += srcs[i] for every i, each source converted to its destination's dtype (exact for
// a wider one: bf16 or f16 into f32) and added with one rounding, as add_(dsts[i],
// srcs[i].to(dsts[i].dtype())) would: the gradients one backward pass accumulates into many
// parameters, in one launch where the backend can. Destinations are contiguous, on one device
// with the sources, and distinct.
HG_OP(void, accumulate_, (const std::vector<Tensor>& dsts, const std::vector<Tensor>& srcs), {
  HG_CHECK(dsts.size() == srcs.size(), "{}: {} destinations but {} sources", op, dsts.size(),
           srcs.size());
  double bytes = 0;
  for (size_t i = 0; i < dsts.size(); ++i) {
    check_float(op, "destination", dsts[i]);
    check_float(op, "source", srcs[i]);
    check_same_shape(op, dsts[i], srcs[i]);
    check_same_device(op, dsts[0], dsts[i]);
    check_same_device(op, dsts[i], srcs[i]);
    HG_CHECK(dsts[i].is_contiguous(), "{}: destination {} must be contiguous", op,
             dsts[i].describe());
    for (size_t j = 0; j < i; ++j)
      HG_CHECK(dsts[j].numel() == 0 || dsts[i].data_ptr() != dsts[j].data_ptr(),
               "{}: destinations {} and {} are the same tensor", op, j, i);
    bytes += double(dsts[i].nbytes()) * 2 + double(srcs[i].nbytes());
  }
  HG_OP_COST(OpCost{0, bytes});
  if (dsts.empty()) return;
  std::vector<Tensor> contiguous;
  contiguous.reserve(srcs.size());
  for (const Tensor& s : srcs) contiguous.push_back(s.contiguous());
  backend_for(dsts[0].device()).accumulate_(dsts, contiguous);
})

HG_OP(void, mul_scalar_, (Tensor& dst, double s), {
  check_float(op, "destination", dst);
  HG_CHECK(dst.is_contiguous(), "{}: destination {} must be contiguous", op, dst.describe());
  HG_OP_COST(elementwise_cost(dst, 1, 1));
  backend_for(dst.device()).mul_scalar_(dst, s);
})

HG_OP(Tensor, relu, (const Tensor& x), {
  check_float(op, "input", x);
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).relu(x.contiguous());
})

// dy where y > 0, else 0.
HG_OP(Tensor, relu_backward, (const Tensor& dy, const Tensor& y), {
  check_binary(op, dy, y);
  HG_OP_COST(elementwise_cost(y, 2, 1));
  return backend_for(y.device()).relu_backward(dy.contiguous(), y.contiguous());
})

// Square root; a negative element gives NaN (as std::sqrt), which later comparisons flag.
HG_OP(Tensor, sqrt, (const Tensor& x), {
  check_float(op, "input", x);
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).sqrt(x.contiguous());
})

// dy / (2 y) with y = sqrt(x): sqrt's gradient from its output (inf where y is 0).
HG_OP(Tensor, sqrt_backward, (const Tensor& dy, const Tensor& y), {
  check_binary(op, dy, y);
  return backend_for(y.device()).sqrt_backward(dy.contiguous(), y.contiguous());
})

// Hyperbolic tangent (a policy network's activation).
HG_OP(Tensor, tanh, (const Tensor& x), {
  check_float(op, "input", x);
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).tanh(x.contiguous());
})

// dy (1 - y^2) with y = tanh(x): tanh's gradient from its output.
HG_OP(Tensor, tanh_backward, (const Tensor& dy, const Tensor& y), {
  check_binary(op, dy, y);
  HG_OP_COST(elementwise_cost(y, 2, 1));
  return backend_for(y.device()).tanh_backward(dy.contiguous(), y.contiguous());
})

// e^x (inf above the dtype's range; a probability ratio from log-probabilities). Its gradient
// is dy * y: ops::mul.
HG_OP(Tensor, exp, (const Tensor& x), {
  check_float(op, "input", x);
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).exp(x.contiguous());
})

// ---- reductions (to a scalar f32 tensor on the input's device) ----

HG_OP(Tensor, sum, (const Tensor& x), {
  check_float(op, "input", x);
  return backend_for(x.device()).sum(x.contiguous());
})

HG_COMPOSITE_OP(Tensor, mean, (const Tensor& x), {
  check_float(op, "input", x);
  HG_CHECK(x.numel() > 0, "{} of empty tensor {}", op, x.describe());
  Backend& backend = backend_for(x.device());
  return backend.mul_scalar(backend.sum(x.contiguous()), 1.0 / double(x.numel()));
})

HG_OP(Tensor, sum_squares, (const Tensor& x), {
  check_float(op, "input", x);
  return backend_for(x.device()).sum_squares(x.contiguous());
})

// The largest |x| as a one-element f32 tensor (0 for an empty tensor; NaN when an element is
// NaN): an activation's range for INT8 calibration.
HG_OP(Tensor, amax, (const Tensor& x), {
  check_float(op, "input", x);
  return backend_for(x.device()).amax(x.contiguous());
})

// ---- global-norm gradient clipping, decided on the device ----

// torch.nn.utils.clip_grad_norm_ (L2) over a flat f32 gradient tensor, given its sum of squares
// (a one-element f32 tensor on the same device, e.g. from sum_squares): with
// norm = sqrt(sum_squares) and coef = max_norm / (norm + 1e-6), computed in double,
// grads *= float(coef) when coef < 1. A non-finite norm leaves the gradients untouched (the
// loss scaler's skip handles that step). Returns the norm as a scalar f32 tensor on the device;
// nothing is read back to the host.
HG_OP(Tensor, clip_grads_, (Tensor& grads, const Tensor& sum_squares, double max_norm), {
  HG_CHECK(grads.defined(), "{}: gradients are undefined", op);
  check_dtype(op, "gradients", grads, DType::F32);
  HG_CHECK(grads.is_contiguous(), "{}: gradients {} must be contiguous", op, grads.describe());
  HG_CHECK(sum_squares.defined() && sum_squares.numel() == 1,
           "{}: sum_squares must have one element (ops::sum_squares(grads)), got {}", op,
           sum_squares.describe());
  check_dtype(op, "sum_squares", sum_squares, DType::F32);
  check_same_device(op, grads, sum_squares);
  HG_CHECK(std::isfinite(max_norm) && max_norm > 0,
           "{}: max_norm must be positive and finite, got {}", op, max_norm);
  return backend_for(grads.device()).clip_grads_(grads, sum_squares, max_norm);
})

// ---- softmax cross-entropy: logits [N,C] f32, labels [N] i64 ----

// With label smoothing s the target is (1-s) one-hot + s/C uniform.
HG_OP(ops::CrossEntropyForward, cross_entropy, (const Tensor& logits, const Tensor& labels,
                                                double label_smoothing), {
  check_logits_labels(op, logits, labels);
  HG_CHECK(label_smoothing >= 0.0 && label_smoothing < 1.0,
           "{}: label_smoothing must be in [0, 1), got {}", op, label_smoothing);
  HG_CHECK(logits.size(0) > 0, "{}: empty batch", op);
  return backend_for(logits.device())
      .cross_entropy(logits.contiguous(), labels.contiguous(), label_smoothing);
})

// dloss is the scalar gradient of the loss.
HG_OP(Tensor, cross_entropy_backward, (const Tensor& dloss, const Tensor& probs,
                                       const Tensor& labels, double label_smoothing), {
  HG_CHECK(dloss.numel() == 1, "{}: grad of the loss must be a scalar, got {}", op,
           dloss.describe());
  return backend_for(probs.device())
      .cross_entropy_backward(dloss, probs, labels.contiguous(), label_smoothing);
})

// Number of rows whose label is among the k highest logits, as a scalar f32 (stays on the
// device): with k = 1, the rows whose arg-max is the label. A row's label ranks after every
// logit above its own and every equal one at a lower index (so with k = 1 the first maximum
// wins ties, as torch.argmax); a NaN logit ranks first at index 0 and last elsewhere.
HG_OP(Tensor, count_correct, (const Tensor& logits, const Tensor& labels,
                              int64_t k HG_OP_DEFAULT(1)), {
  check_logits_labels(op, logits, labels);
  HG_CHECK(k >= 1, "{}: k must be at least 1, got {}", op, k);
  return backend_for(logits.device())
      .count_correct(logits.contiguous(), labels.contiguous(), k);
})

// ---- per-row ops of a matrix [N,C] (a policy's action scores) ----

// log softmax of each row: y[r, j] = x[r, j] - log(sum_k exp(x[r, k])) (computed from the
// row's maximum, so large scores stay finite).
HG_OP(Tensor, log_softmax, (const Tensor& x), {
  check_float(op, "input", x);
  check_dim(op, "input [N,C]", x, 2);
  HG_CHECK(x.size(1) > 0 || x.size(0) == 0, "{}: input {} has rows of no columns", op,
           x.describe());
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).log_softmax(x.contiguous());
})

// log_softmax's gradient from its output y: dx[r, j] = dy[r, j] - exp(y[r, j]) sum_k dy[r, k].
HG_OP(Tensor, log_softmax_backward, (const Tensor& dy, const Tensor& y), {
  check_binary(op, dy, y);
  check_dim(op, "output [N,C]", y, 2);
  HG_OP_COST(elementwise_cost(y, 2, 1));
  return backend_for(y.device()).log_softmax_backward(dy.contiguous(), y.contiguous());
})

// One element of each row: out[r] = x[r, index[r]] (the log-probability of the action taken,
// the value of the action taken). index is i64 [N]; an index outside [0, C) is refused on the
// CPU and gives NaN on a GPU (checking it there would wait for the device).
HG_OP(Tensor, gather_columns, (const Tensor& x, const Tensor& index), {
  check_logits_labels(op, x, index);
  HG_OP_COST(elementwise_cost(index, 2, 1));
  return backend_for(x.device()).gather_columns(x.contiguous(), index.contiguous());
})

// gather_columns' gradient: dx [N, columns] zero but dx[r, index[r]] = dy[r] (NaN in a GPU row
// whose index is out of range).
HG_OP(Tensor, gather_columns_backward, (const Tensor& dy, const Tensor& index, int64_t columns), {
  check_float(op, "gradient", dy);
  check_dim(op, "gradient [N]", dy, 1);
  check_dtype(op, "index", index, DType::I64);
  HG_CHECK(index.dim() == 1 && index.size(0) == dy.size(0), "{}: index {} does not match {}", op,
           index.describe(), dy.describe());
  check_same_device(op, dy, index);
  HG_CHECK(columns > 0, "{}: columns must be positive, got {}", op, columns);
  HG_OP_COST(elementwise_cost(dy, 2, columns));
  return backend_for(dy.device())
      .gather_columns_backward(dy.contiguous(), index.contiguous(), columns);
})

// Each row scaled by its own factor: y[r, ...] = x[r, ...] * scale[r], computed in float and
// rounded once; x f32, bf16 or f16 with rows first, scale f32 [rows]. Stochastic depth
// (nn::DropPath) scales each sample's residual branch by 0 or 1 / (1 - p); the gradient is the
// same op on dy.
HG_OP(Tensor, scale_rows, (const Tensor& x, const Tensor& scale), {
  check_float(op, "input", x);
  HG_CHECK(x.dim() >= 1, "{}: input {} has no rows", op, x.describe());
  check_dtype(op, "scale", scale, DType::F32);
  HG_CHECK(scale.dim() == 1 && scale.size(0) == x.size(0),
           "{}: scale must be [{}] (one factor per row of {}), got {}", op, x.size(0),
           x.describe(), scale.describe());
  check_same_device(op, x, scale);
  HG_OP_COST(elementwise_cost(x, 1, 1));
  return backend_for(x.device()).scale_rows(x.contiguous(), scale.contiguous());
})

// ---- dropout: element i is kept with probability 1-p, decided by Philox(seed, offset + i) ----

HG_OP(ops::DropoutForward, dropout, (const Tensor& x, double p, uint64_t seed,
                                     uint64_t offset), {
  check_float(op, "input", x);
  HG_CHECK(p >= 0.0 && p < 1.0, "{}: p must be in [0, 1), got {}", op, p);
  return backend_for(x.device()).dropout(x.contiguous(), p, seed, offset);
})

HG_OP(Tensor, dropout_backward, (const Tensor& dy, const Tensor& mask, double p), {
  HG_CHECK(dy.shape() == mask.shape(), "{}: grad {} does not match mask {}", op,
           dy.describe(), mask.describe());
  return backend_for(dy.device()).dropout_backward(dy.contiguous(), mask, p);
})

// ---- data: a training batch gathered from a dataset held on the device it trains on ----

// images u8 [N,H,W,C] and labels u8 [N] (the dataset), indices i64 [B] (the batch's samples,
// each in [0, N): the CPU refuses others, the GPU writes zeros and label -1 for them), augment
// i32 [B,7] (per sample shift_y, shift_x, flip as data::Augmentation, then its cutout box y0,
// x0, y1, x1 as data::CutoutBox) or undefined (none), table f32 [C,256] (channel c's value of
// each pixel value: the normalisation) or undefined (the pixel values themselves: images u8
// [B,H,W,C] out, padding and the box 0) -> images f32 [B,H,W,C], labels i64 [B] where, for
// sample i = indices[b] with shifts (dy, dx) and cx = flip ? W-1-x : x, out(b,y,x,c) =
// table(c, images(i, y+dy, cx+dx, c)), and table(c, 0) (a zero pixel) where (y+dy, cx+dx)
// falls outside the image or y0 <= y < y1 and x0 <= x < x1 (the cutout, in output
// coordinates): data::ImageTransform::apply for a whole batch, bit for bit.
// Undefined indices take every image in order (B = N, i = b); undefined labels give undefined
// labels. So gather_batch(batch, {}, {}, {}, table) normalises a uint8 batch through the table
// (DataLoader::model_images: a loader's uint8 batches, normalised where the model runs).
HG_OP(ops::GatheredBatch, gather_batch, (const Tensor& images, const Tensor& labels,
                                         const Tensor& indices, const Tensor& augment,
                                         const Tensor& table), {
  check_dtype(op, "images", images, DType::U8);
  check_dim(op, "images", images, 4);
  if (labels.defined()) {
    check_dtype(op, "labels", labels, DType::U8);
    check_dim(op, "labels", labels, 1);
    HG_CHECK(labels.size(0) == images.size(0), "{}: {} labels for {} images", op, labels.size(0),
             images.size(0));
    check_same_device(op, images, labels);
  }
  const int64_t batch = indices.defined() ? indices.size(0) : images.size(0);
  if (indices.defined()) {
    check_dtype(op, "indices", indices, DType::I64);
    check_dim(op, "indices", indices, 1);
    check_same_device(op, images, indices);
  }
  if (augment.defined()) {
    check_dtype(op, "augment", augment, DType::I32);
    HG_CHECK(augment.dim() == 2 && augment.size(0) == batch && augment.size(1) == 7,
             "{}: augment must be [{},7] (shift_y, shift_x, flip and the cutout box y0, x0, y1, "
             "x1 per sample), got {}",
             op, batch, augment.describe());
    check_same_device(op, images, augment);
  }
  if (table.defined()) {
    check_dtype(op, "table", table, DType::F32);
    HG_CHECK(table.dim() == 2 && table.size(0) == images.size(3) && table.size(1) == 256,
             "{}: table must be [{},256] (a value per channel and pixel value), got {}", op,
             images.size(3), table.describe());
    check_same_device(op, images, table);
  }
  auto contiguous = [](const Tensor& t) { return t.defined() ? t.contiguous() : t; };
  return backend_for(images.device())
      .gather_batch(images.contiguous(), contiguous(labels), contiguous(indices),
                    contiguous(augment), contiguous(table));
})

// images u8 [B,H,W,C] (C 1 or 3), program f32 [B,K,kImageOpWidth] on the images' device: row
// (b, k) is the k-th op of image b's program (ImageOpKind and its parameters, ops/params.h),
// applied in order -> u8 [B,H,W,C]: each op as torchvision's tensor function of its name
// (torchvision.transforms.functional 0.14) on the image's uint8 pixels, the photometric ops bit
// for bit; resampling picks the nearest pixel, as torchvision's grid does up to its rounding
// ties. Rows of kind None, and kinds the image's channels lack (saturation and hue on one
// channel), change nothing. The augmentations of data::TransformOptions::auto_augment and
// color_jitter (data/image_augment.h builds the programs).
HG_OP(Tensor, augment_images, (const Tensor& images, const Tensor& program), {
  check_dtype(op, "images", images, DType::U8);
  check_dim(op, "images", images, 4);
  HG_CHECK(images.size(3) == 1 || images.size(3) == 3,
           "{}: images must have 1 or 3 channels (grayscale or RGB), got {}", op,
           images.describe());
  check_dtype(op, "program", program, DType::F32);
  HG_CHECK(program.dim() == 3 && program.size(0) == images.size(0) &&
               program.size(2) == kImageOpWidth,
           "{}: program must be [{},K,{}] (K ops of {} floats per image), got {}", op,
           images.size(0), kImageOpWidth, kImageOpWidth, program.describe());
  check_same_device(op, images, program);
  HG_OP_COST(elementwise_cost(images, 1, 1));
  return backend_for(images.device()).augment_images(images.contiguous(), program.contiguous());
})

// images f32 [N,H,W,C] (a training batch), labels i64 [N], params f32 [6] on the images'
// device: (weight outside the box, weight inside it, box y0, x0, y1, x1) -> images f32
// [N,H,W,C], labels i64 [N]: row b mixed with its partner q = N-1-b (the batch reversed, as
// timm's Mixup pairs rows): out(b,y,x,c) = fma(t, x(b,y,x,c), (1-t) * x(q,y,x,c)) with t the
// inside weight where y0 <= y < y1 and x0 <= x < x1 and the outside weight elsewhere, and the
// labels out are the partners' labels, labels(q). Mixup is one weight (an empty box), cutmix
// weights 1 outside and 0 inside; weights 1 and an empty box give the batch unchanged. The
// parameters are read on the device, so a step captured as a graph takes each replay's draw
// (train/step/batch_mixing.h) from them.
HG_OP(ops::GatheredBatch, mix_batch, (const Tensor& images, const Tensor& labels,
                                      const Tensor& params), {
  check_dtype(op, "images", images, DType::F32);
  check_dim(op, "images", images, 4);
  check_dtype(op, "labels", labels, DType::I64);
  check_dim(op, "labels", labels, 1);
  HG_CHECK(labels.size(0) == images.size(0), "{}: {} labels for {} images", op, labels.size(0),
           images.size(0));
  check_dtype(op, "params", params, DType::F32);
  HG_CHECK(params.dim() == 1 && params.size(0) == 6,
           "{}: params must be [6] (the weights outside and inside the box, then the box y0, x0, "
           "y1, x1), got {}", op, params.describe());
  check_same_device(op, images, labels);
  check_same_device(op, images, params);
  HG_OP_COST(elementwise_cost(images, 2, 1));
  return backend_for(images.device())
      .mix_batch(images.contiguous(), labels.contiguous(), params.contiguous());
})

// ---- optimizer updates over flat f32 tensors of equal shape ----
// `skip`, when defined, is a one-element f32 tensor on the parameters' device; the update does
// nothing when it is nonzero (the loss scaler's found-inf flag). The decision is taken on the
// device: the host never waits for it. `lr`, when defined, is a one-element f64 tensor on the
// parameters' device holding the learning rate, read on the device in place of `o.lr` (and in
// AdamW's decoupled decay): a step captured as a graph then takes each replay's rate from it.

HG_OP(void, sgd_step, (Tensor& params, const Tensor& grads, Tensor& momentum,
                       const SgdOptions& o, bool first_step,
                       const Tensor& skip HG_OP_DEFAULT(Tensor()),
                       const Tensor& lr HG_OP_DEFAULT(Tensor())), {
  check_skip(op, params, skip);
  check_lr(op, params, lr);
  if (o.momentum != 0.0)
    check_flat(op, params, {&grads, &momentum});
  else
    check_flat(op, params, {&grads});
  HG_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
           "{}: nesterov needs momentum > 0 and dampening 0", op);
  backend_for(params.device()).sgd_step(params, grads, momentum, o, first_step, skip, lr);
})

// x f32 [n], offsets i64 [S+1] on x's device (0 = offsets[0] <= offsets[1] <= ... <=
// offsets[S] = n; the CPU refuses others) -> f32 [S]: the sum of the squares of x over each
// segment [offsets[s], offsets[s+1]), accumulated in a fixed order (the same bits on every call;
// the CPU in double).
HG_OP(Tensor, segment_sum_squares, (const Tensor& x, const Tensor& offsets), {
  check_dtype(op, "x", x, DType::F32);
  check_dim(op, "x", x, 1);
  check_dtype(op, "offsets", offsets, DType::I64);
  HG_CHECK(offsets.dim() == 1 && offsets.size(0) >= 1,
           "{}: offsets must be [S+1] (each segment's start, then the end), got {}", op,
           offsets.describe());
  check_same_device(op, x, offsets);
  HG_OP_COST(elementwise_cost(x, 1, 0));
  return backend_for(x.device()).segment_sum_squares(x.contiguous(), offsets.contiguous());
})

// The layer-wise trust ratio of LARS and LAMB, in place (LarsOptions): over each segment s of
// `offsets` (as segment_sum_squares takes them), with |w| = sqrt(params_sq[s]) and |g| =
// sqrt(grads_sq[s]) (segment_sum_squares of the parameters and of `grads`), grads =
// fma(weight_decay, params, grads) * trust_s, trust_s computed in double and rounded to f32.
// `lr`, a one-element f64 tensor on the parameters' device, is read only with o.trust_clip, as
// the divisor of the clip min(trust / lr, 1): LARS passes the rate its update reads (LARC), LAMB
// (grads = its direction, weight_decay 0, trust_coeff 1, eps 0) a tensor holding 1 (LAMBC).
HG_OP(void, lars_adapt_grads_, (Tensor& grads, const Tensor& params, const Tensor& offsets,
                                const Tensor& params_sq, const Tensor& grads_sq,
                                double weight_decay, const LarsOptions& o, const Tensor& lr), {
  check_flat(op, params, {&grads});
  check_dtype(op, "offsets", offsets, DType::I64);
  HG_CHECK(offsets.dim() == 1 && offsets.size(0) >= 1 && offsets.is_contiguous(),
           "{}: offsets must be a contiguous [S+1], got {}", op, offsets.describe());
  check_same_device(op, params, offsets);
  const int64_t segments = offsets.size(0) - 1;
  for (const Tensor* t : {&params_sq, &grads_sq}) {
    check_dtype(op, "sums of squares", *t, DType::F32);
    HG_CHECK(t->dim() == 1 && t->size(0) == segments && t->is_contiguous(),
             "{}: sums of squares must be a contiguous [{}] (one per segment), got {}", op,
             segments, t->describe());
    check_same_device(op, params, *t);
  }
  HG_CHECK(weight_decay >= 0 && o.trust_coeff > 0 && o.eps >= 0,
           "{}: needs weight_decay >= 0, trust_coeff > 0 and eps >= 0, got {}, {}, {}", op,
           weight_decay, o.trust_coeff, o.eps);
  HG_CHECK(!o.trust_clip || lr.defined(), "{}: trust_clip needs the learning rate tensor", op);
  check_lr(op, params, lr);
  HG_OP_COST(elementwise_cost(params, 2, 1));
  backend_for(params.device())
      .lars_adapt_grads_(grads, params, offsets, params_sq, grads_sq, weight_decay, o, lr);
})

// LAMB's direction (You et al. 2019; timm's Lamb), over flat f32 tensors of equal shape: unless
// `skip` is defined and nonzero, m = b1 m + (1-b1) g and v = b2 v + (1-b2) g^2 in place, and
// out = fma(weight_decay, params, (m * (1 / bc1)) / (sqrt(v) * (1 / sqrt(bc2)) + eps)), with
// bc = 1 - beta^t for the update number t = *step (as adamw_step takes it), the corrections in
// double rounded to f32 once; with the skip flag set nothing is written. o.lr is not read.
HG_OP(void, lamb_direction, (Tensor& out, const Tensor& params, const Tensor& grads,
                             Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& o,
                             const Tensor& step, const Tensor& skip HG_OP_DEFAULT(Tensor())), {
  check_flat(op, params, {&out, &grads, &exp_avg, &exp_avg_sq});
  check_skip(op, params, skip);
  check_step(op, params, step);
  HG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps >= 0 &&
               o.weight_decay >= 0,
           "{}: needs betas in [0, 1) and non-negative eps and weight decay", op);
  HG_OP_COST(elementwise_cost(params, 4, 3));
  backend_for(params.device())
      .lamb_direction(out, params, grads, exp_avg, exp_avg_sq, o, step, skip);
})

// `step` is a one-element f32 tensor on the parameters' device holding the number of this
// update (1 for the first; the bias corrections use it), read on the device. It must be >= 1
// when the update is applied: the CPU throws otherwise, a GPU gives non-finite parameters.
HG_OP(void, adamw_step, (Tensor& params, const Tensor& grads, Tensor& exp_avg,
                         Tensor& exp_avg_sq, const AdamWOptions& o, const Tensor& step,
                         const Tensor& skip HG_OP_DEFAULT(Tensor()),
                         const Tensor& lr HG_OP_DEFAULT(Tensor())), {
  check_flat(op, params, {&grads, &exp_avg, &exp_avg_sq});
  check_skip(op, params, skip);
  check_step(op, params, step);
  check_lr(op, params, lr);
  backend_for(params.device()).adamw_step(params, grads, exp_avg, exp_avg_sq, o, step, skip, lr);
})

// step += 1 on the device, unless `skip` is defined and nonzero: the count of applied updates
// an optimizer keeps next to its state (call it before the update it counts). `step` is a
// one-element f32 tensor (integers are exact in f32 up to 2^24 steps; past that the count
// stops growing, where Adam's bias corrections are 1 in f32 anyway).
HG_OP(void, advance_step_, (Tensor& step, const Tensor& skip HG_OP_DEFAULT(Tensor())), {
  check_step(op, step, step);
  HG_CHECK(step.is_contiguous(), "{}: step {} must be contiguous", op, step.describe());
  check_skip(op, step, skip);
  backend_for(step.device()).advance_step_(step, skip);
})

// ---- dynamic loss scaling, on the device ----
// The scaler's state is an f32 tensor [kLossScaleState] on the gradients' device:
// {scale, found_inf (0 or 1), good_steps (steps since the scale last changed)}.

// grads *= 1/scale in place, over a flat f32 tensor; sets found_inf to 1 when any gradient is
// inf or NaN (never clears it, so several calls accumulate).
HG_OP(void, unscale_grads_, (Tensor& grads, Tensor& state), {
  check_scaler_state(op, state);
  check_dtype(op, "gradients", grads, DType::F32);
  HG_CHECK(grads.is_contiguous(), "{}: gradients {} must be contiguous", op, grads.describe());
  check_same_device(op, grads, state);
  backend_for(grads.device()).unscale_grads_(grads, state);
})

// After an optimizer step: with found_inf, scale *= backoff and good_steps = 0; otherwise
// good_steps += 1 and, when it reaches growth_interval, scale *= growth and good_steps = 0.
// Clears found_inf.
HG_OP(void, update_loss_scale_, (Tensor& state, double growth, double backoff,
                                 int64_t growth_interval), {
  check_scaler_state(op, state);
  HG_CHECK(growth >= 1.0 && backoff > 0.0 && backoff <= 1.0 && growth_interval >= 1,
           "{}: needs growth >= 1, 0 < backoff <= 1 and growth_interval >= 1, got {}, {}, {}",
           op, growth, backoff, growth_interval);
  backend_for(state.device()).update_loss_scale_(state, growth, backoff, growth_interval);
})

// clang-format on

#undef HG_OP
#undef HG_COMPOSITE_OP
#undef HG_OP_DEFAULT
