// Batch normalisation on the GPU: argument checks, outputs and workspace from the caching
// allocator, and the launches of batch_norm_kernels.cu (which describes the kernels). Same
// semantics as the CPU backend (backend/cpu/batch_norm.cpp, batch_norm_fusion.cpp) for f32,
// bf16 and f16 inputs; parameters, statistics and parameter gradients are f32. With a ReLU
// (ops::BatchNormFusion) the same kernels run with the residual add, ReLU and ReLU mask folded
// into their passes; with a shortcut batch norm, batch_norm_pair_kernels.cu's.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "hourglass/backend/gpu/batch_norm_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/device/device.h"

namespace hg {
namespace {

void check_device_index(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu batch_norm: device index {} out of range",
            device);
}

// Multiprocessors of `device` (the kernels size their grids by it); asked once per device.
int sm_count(int device) {
  static std::array<std::atomic<int>, kMaxDevices> counts{};
  check_device_index(device);
  int n = counts[size_t(device)].load(std::memory_order_relaxed);
  if (n == 0) {
    gpuDeviceProp prop{};
    HG_GPU_CHECK(gpuGetDeviceProperties(&prop, device));
    n = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    counts[size_t(device)].store(n, std::memory_order_relaxed);
  }
  return n;
}

// The reductions' last-block counters of `device`: at least `slots` zeros, which every kernel
// leaves zero again. One buffer per device for the life of the process (kernels on a device
// run in order on its one stream, so they never share it concurrently); grown when a plan
// needs more columns, the old one going back to the stream-ordered allocator.
unsigned* column_counters(int device, int64_t slots, gpuStream_t stream) {
  struct Counters {
    std::mutex mutex;
    Tensor* tensor = nullptr;  // never deleted: it must outlive every kernel, exit included
    int64_t slots = 0;
  };
  static std::array<Counters, kMaxDevices> all;
  check_device_index(device);
  Counters& c = all[size_t(device)];
  std::lock_guard lock(c.mutex);
  if (c.slots < slots) {
    const int64_t n = std::max<int64_t>(slots, 1024);
    auto fresh = std::make_unique<Tensor>(Tensor::empty({n}, DType::I32, Device::gpu(device)));
    HG_GPU_CHECK(gpuMemsetAsync(fresh->data_ptr(), 0, fresh->nbytes(), stream));
    delete c.tensor;
    c.tensor = fresh.release();
    c.slots = n;
  }
  return static_cast<unsigned*>(c.tensor->data_ptr());
}

// x is float (f32/bf16/f16) and contiguous on a GPU.
void check_input(const char* op, const Tensor& x) {
  gpu::check_float(op, x);
  HG_CHECK(x.device().is_gpu(), "gpu {}: input {} is not on a gpu", op, x.describe());
  HG_CHECK(x.dim() == 4 || x.dim() == 2, "{}: input must be [N,H,W,C] or [N,C], got {}", op,
           x.describe());
  HG_ASSERT(x.is_contiguous(), "gpu {}: input {} must arrive contiguous", op, x.describe());
}

// An f32 [c] parameter or statistic on x's device; returned contiguous.
Tensor channel_vector(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  const int64_t c = x.size(-1);
  HG_CHECK(t.dtype() == DType::F32 && t.dim() == 1 && t.size(0) == c,
           "{}: {} must be f32 of shape [{}], got {}", op, what, c, t.describe());
  HG_CHECK(t.device() == x.device(), "{}: {} {} is not on the input's device {}", op, what,
           t.describe(), x.device().str());
  return t.contiguous();
}

const float* fptr(const Tensor& t) { return static_cast<const float*>(t.data_ptr()); }
float* fptr_mut(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

// The OR of the tensors' addresses; undefined ones (an absent residual) count as aligned.
uint64_t address_bits(std::initializer_list<const Tensor*> tensors) {
  uint64_t bits = 0;
  for (const Tensor* t : tensors)
    if (t->defined()) bits |= uint64_t(reinterpret_cast<uintptr_t>(t->data_ptr()));
  return bits;
}

// An operand of x's shape, dtype and device (grad output, residual, fused output), arriving
// contiguous.
void check_like_input(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  HG_CHECK(t.dtype() == x.dtype() && t.device() == x.device() && t.shape() == x.shape(),
           "{}: {} {} must match input {} in shape, dtype and device", op, what, t.describe(),
           x.describe());
  HG_ASSERT(t.is_contiguous(), "gpu {}: {} {} must arrive contiguous", op, what, t.describe());
}

// A training forward's parameters and running statistics (`which`: "" or "second "): f32 [C]
// on x's device, the running statistics contiguous. Returns the weight and bias contiguous.
std::pair<Tensor, Tensor> train_parameters(const char* op, const std::string& which,
                                           const Tensor& x, const Tensor& weight,
                                           const Tensor& bias, const Tensor& running_mean,
                                           const Tensor& running_var) {
  Tensor w = channel_vector(op, (which + "weight").c_str(), weight, x);
  Tensor b = channel_vector(op, (which + "bias").c_str(), bias, x);
  channel_vector(op, (which + "running_mean").c_str(), running_mean, x);
  channel_vector(op, (which + "running_var").c_str(), running_var, x);
  HG_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(),
           "{}: running statistics must be contiguous (they are updated in place)", op);
  return {std::move(w), std::move(b)};
}

// The training forward, plain (fused false) or with a ReLU (fused true, which adds `residual`
// when it is defined and applies the ReLU in the normalising pass, storing y's mask).
ops::BatchNormForward train_forward(const char* op, bool fused, const Tensor& x,
                                    const Tensor& residual, const Tensor& weight,
                                    const Tensor& bias, Tensor& running_mean, Tensor& running_var,
                                    double momentum, double eps) {
  check_input(op, x);
  if (residual.defined()) check_like_input(op, "residual", residual, x);
  const auto [w, b] = train_parameters(op, "", x, weight, bias, running_mean, running_var);
  const int64_t c = x.size(-1), rows = c > 0 ? x.numel() / c : 0;
  const int device = x.device().index;
  gpuStream_t stream = gpu::stream_for(x);

  ops::BatchNormForward out;
  out.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  out.mean = Tensor::empty({c}, DType::F32, x.device());
  out.invstd = Tensor::empty({c}, DType::F32, x.device());
  if (fused) out.mask = Tensor::empty({rows, ops::relu_mask_bytes(c)}, DType::U8, x.device());
  if (x.numel() == 0) return out;
  const gpu::BatchNormPlan plan = gpu::batch_norm_plan(
      rows, c, x.dtype(), address_bits({&x, &out.y, &residual}), sm_count(device));
  // Everything is allocated before the first launch: a failed allocation leaves no kernel
  // half-run.
  const Tensor workspace =
      Tensor::empty({gpu::batch_norm_workspace_floats(plan, c)}, DType::F32, x.device());
  if (fused)
    gpu::batch_norm_relu_train_launch(
        plan, x.dtype(), x.data_ptr(), residual.defined() ? residual.data_ptr() : nullptr,
        out.y.data_ptr(), static_cast<uint8_t*>(out.mask.data_ptr()), rows, c, fptr(w), fptr(b),
        fptr_mut(running_mean), fptr_mut(running_var), momentum, eps, fptr_mut(out.mean),
        fptr_mut(out.invstd), fptr_mut(workspace), stream);
  else
    gpu::batch_norm_train_launch(plan, x.dtype(), x.data_ptr(), out.y.data_ptr(), rows, c, fptr(w),
                                 fptr(b), fptr_mut(running_mean), fptr_mut(running_var), momentum,
                                 eps, fptr_mut(out.mean), fptr_mut(out.invstd), fptr_mut(workspace),
                                 stream);
  return out;
}

// The backward, plain (`y` undefined) or of a fused ReLU (dy masked by the fused output y > 0,
// given as y or as its ReLU mask; dresidual computed when `with_residual`). `dy2` (only with `y`
// and `with_residual`; else undefined): the output's gradient is dy + dy2.
ops::BatchNormGrads backward(const char* op, const Tensor& dy, const Tensor& dy2, const Tensor& y,
                             const Tensor& x, const Tensor& weight, const Tensor& mean,
                             const Tensor& invstd, bool with_residual) {
  check_input(op, x);
  check_like_input(op, "grad output", dy, x);
  if (dy2.defined()) check_like_input(op, "second grad output", dy2, x);
  const Tensor w = channel_vector(op, "weight", weight, x);
  const Tensor mu = channel_vector(op, "saved mean", mean, x);
  const Tensor is = channel_vector(op, "saved invstd", invstd, x);
  const int64_t c = x.size(-1), rows = c > 0 ? x.numel() / c : 0;
  const int device = x.device().index;
  gpuStream_t stream = gpu::stream_for(x);
  // The kernels read the ReLU mask; given y, the mask is taken from it first.
  Tensor mask;
  if (y.defined() && y.dtype() == DType::U8) {
    HG_CHECK((y.device() == x.device() && y.is_contiguous() &&
              y.shape() == Shape{rows, ops::relu_mask_bytes(c)}),
             "{}: ReLU mask {} must be a contiguous u8 [{}, {}] on {}", op, y.describe(), rows,
             ops::relu_mask_bytes(c), x.device().str());
    mask = y;
  } else if (y.defined()) {
    check_like_input(op, "fused output", y, x);
    mask = Tensor::empty({rows, ops::relu_mask_bytes(c)}, DType::U8, x.device());
    gpu::relu_mask_launch(x.dtype(), y.data_ptr(), static_cast<uint8_t*>(mask.data_ptr()), rows, c,
                          stream);
  }

  ops::BatchNormGrads grads;
  grads.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  grads.dweight = Tensor::empty({c}, DType::F32, x.device());
  grads.dbias = Tensor::empty({c}, DType::F32, x.device());
  if (with_residual) grads.dresidual = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (c == 0) return grads;
  // With no rows the reduction still runs and writes dweight = dbias = 0.
  const gpu::BatchNormPlan plan = gpu::batch_norm_plan(
      rows, c, x.dtype(), address_bits({&dy, &dy2, &x, &grads.dx, &grads.dresidual}),
      sm_count(device));
  const Tensor workspace =
      Tensor::empty({gpu::batch_norm_workspace_floats(plan, c)}, DType::F32, x.device());
  unsigned* counters = column_counters(device, plan.columns, stream);
  if (mask.defined())
    gpu::batch_norm_relu_backward_launch(
        plan, x.dtype(), dy.data_ptr(), dy2.defined() ? dy2.data_ptr() : nullptr,
        static_cast<const uint8_t*>(mask.data_ptr()), x.data_ptr(), grads.dx.data_ptr(),
        with_residual ? grads.dresidual.data_ptr() : nullptr, rows, c, fptr(w), fptr(mu), fptr(is),
        fptr_mut(grads.dweight), fptr_mut(grads.dbias), fptr_mut(workspace), counters, stream);
  else
    gpu::batch_norm_backward_launch(plan, x.dtype(), dy.data_ptr(), x.data_ptr(),
                                    grads.dx.data_ptr(), rows, c, fptr(w), fptr(mu), fptr(is),
                                    fptr_mut(grads.dweight), fptr_mut(grads.dbias),
                                    fptr_mut(workspace), counters, stream);
  return grads;
}

// The pair: y = relu(bn(x) + bn2(x2)), the shortcut's normalised output never stored.
ops::BatchNormForward pair_train_forward(const char* op, const Tensor& x, const Tensor& weight,
                                         const Tensor& bias, Tensor& running_mean,
                                         Tensor& running_var, const ops::BatchNormShortcut& s,
                                         double momentum, double eps) {
  const Tensor& x2 = s.x;
  Tensor running_mean2 = s.running_mean, running_var2 = s.running_var;
  check_input(op, x);
  check_like_input(op, "shortcut input", x2, x);
  const auto [w, b] = train_parameters(op, "", x, weight, bias, running_mean, running_var);
  const auto [w2, b2] =
      train_parameters(op, "shortcut ", x, s.weight, s.bias, running_mean2, running_var2);
  const int64_t c = x.size(-1), rows = c > 0 ? x.numel() / c : 0;
  const int device = x.device().index;
  gpuStream_t stream = gpu::stream_for(x);

  ops::BatchNormForward out;
  out.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  out.mask = Tensor::empty({rows, ops::relu_mask_bytes(c)}, DType::U8, x.device());
  for (Tensor* t : {&out.mean, &out.invstd, &out.mean2, &out.invstd2})
    *t = Tensor::empty({c}, DType::F32, x.device());
  if (x.numel() == 0) return out;
  const gpu::BatchNormPlan plan =
      gpu::batch_norm_plan(rows, c, x.dtype(), address_bits({&x, &x2, &out.y}), sm_count(device));
  const Tensor workspace =
      Tensor::empty({gpu::batch_norm_workspace_floats(plan, c)}, DType::F32, x.device());
  const gpu::BatchNormTrainPointers first{fptr(w),
                                          fptr(b),
                                          fptr_mut(running_mean),
                                          fptr_mut(running_var),
                                          fptr_mut(out.mean),
                                          fptr_mut(out.invstd)};
  const gpu::BatchNormTrainPointers second{fptr(w2),
                                           fptr(b2),
                                           fptr_mut(running_mean2),
                                           fptr_mut(running_var2),
                                           fptr_mut(out.mean2),
                                           fptr_mut(out.invstd2)};
  gpu::batch_norm_pair_relu_train_launch(plan, x.dtype(), x.data_ptr(), x2.data_ptr(),
                                         out.y.data_ptr(),
                                         static_cast<uint8_t*>(out.mask.data_ptr()), rows, c, first,
                                         second, momentum, eps, fptr_mut(workspace), stream);
  return out;
}

// The pair's backward: dz = (dy [+ dy2]) where the mask is set, then both batch norms' gradients.
ops::BatchNormGrads pair_backward(const char* op, const Tensor& dy, const Tensor& dy2,
                                  const Tensor& mask, const Tensor& x, const Tensor& weight,
                                  const Tensor& mean, const Tensor& invstd,
                                  const ops::BatchNormBackwardFusion::Shortcut& s) {
  const Tensor& x2 = s.x;
  check_input(op, x);
  check_like_input(op, "shortcut input", x2, x);
  check_like_input(op, "grad output", dy, x);
  if (dy2.defined()) check_like_input(op, "second grad output", dy2, x);
  const int64_t c = x.size(-1), rows = c > 0 ? x.numel() / c : 0;
  HG_CHECK((mask.dtype() == DType::U8 && mask.device() == x.device() && mask.is_contiguous() &&
            mask.shape() == Shape{rows, ops::relu_mask_bytes(c)}),
           "{}: ReLU mask {} must be a contiguous u8 [{}, {}] on {}", op, mask.describe(), rows,
           ops::relu_mask_bytes(c), x.device().str());
  const Tensor w = channel_vector(op, "weight", weight, x);
  const Tensor mu = channel_vector(op, "saved mean", mean, x);
  const Tensor is = channel_vector(op, "saved invstd", invstd, x);
  const Tensor w2 = channel_vector(op, "shortcut weight", s.weight, x);
  const Tensor mu2 = channel_vector(op, "shortcut saved mean", s.mean, x);
  const Tensor is2 = channel_vector(op, "shortcut saved invstd", s.invstd, x);
  const int device = x.device().index;
  gpuStream_t stream = gpu::stream_for(x);

  ops::BatchNormGrads grads;
  grads.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  grads.dx2 = Tensor::empty(x.shape(), x.dtype(), x.device());
  for (Tensor* t : {&grads.dweight, &grads.dbias, &grads.dweight2, &grads.dbias2})
    *t = Tensor::empty({c}, DType::F32, x.device());
  if (c == 0) return grads;
  // The masked gradient, stored by the sums pass for the dx pass.
  const Tensor dz = Tensor::empty(x.shape(), x.dtype(), x.device());
  const gpu::BatchNormPlan plan = gpu::batch_norm_plan(
      rows, c, x.dtype(), address_bits({&dy, &dy2, &x, &x2, &dz, &grads.dx, &grads.dx2}),
      sm_count(device));
  const Tensor workspace =
      Tensor::empty({gpu::batch_norm_pair_workspace_floats(plan, c)}, DType::F32, x.device());
  unsigned* counters = column_counters(device, gpu::batch_norm_pair_counters(plan), stream);
  const gpu::BatchNormGradPointers first{fptr(w), fptr(mu), fptr(is), fptr_mut(grads.dweight),
                                         fptr_mut(grads.dbias)};
  const gpu::BatchNormGradPointers second{fptr(w2), fptr(mu2), fptr(is2), fptr_mut(grads.dweight2),
                                          fptr_mut(grads.dbias2)};
  gpu::batch_norm_pair_relu_backward_launch(
      plan, x.dtype(), dy.data_ptr(), dy2.defined() ? dy2.data_ptr() : nullptr,
      static_cast<const uint8_t*>(mask.data_ptr()), x.data_ptr(), x2.data_ptr(), dz.data_ptr(),
      grads.dx.data_ptr(), grads.dx2.data_ptr(), rows, c, first, second, fptr_mut(workspace),
      counters, stream);
  return grads;
}

}  // namespace

Tensor GpuBackend::batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   double eps) {
  const char* op = "batch_norm";
  check_input(op, x);
  const Tensor w = channel_vector(op, "weight", weight, x);
  const Tensor b = channel_vector(op, "bias", bias, x);
  const Tensor rm = channel_vector(op, "running_mean", running_mean, x);
  const Tensor rv = channel_vector(op, "running_var", running_var, x);
  const int64_t c = x.size(-1), rows = c > 0 ? x.numel() / c : 0;
  gpuStream_t stream = gpu::stream_for(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return y;
  const gpu::BatchNormPlan plan =
      gpu::batch_norm_plan(rows, c, x.dtype(), address_bits({&x, &y}), sm_count(x.device().index));
  gpu::batch_norm_eval_launch(plan, x.dtype(), x.data_ptr(), y.data_ptr(), rows, c, fptr(w),
                              fptr(b), fptr(rm), fptr(rv), eps, stream);
  return y;
}

ops::BatchNormForward GpuBackend::batch_norm_train(const Tensor& x, const Tensor& weight,
                                                   const Tensor& bias, Tensor& running_mean,
                                                   Tensor& running_var, double momentum, double eps,
                                                   const ops::BatchNormFusion& fusion) {
  const char* op = "batch_norm_train";
  if (fusion.shortcut.x.defined())
    return pair_train_forward(op, x, weight, bias, running_mean, running_var, fusion.shortcut,
                              momentum, eps);
  return train_forward(op, fusion.relu, x, fusion.residual, weight, bias, running_mean, running_var,
                       momentum, eps);
}

ops::BatchNormGrads GpuBackend::batch_norm_backward(const Tensor& dy, const Tensor& x,
                                                    const Tensor& weight, const Tensor& mean,
                                                    const Tensor& invstd,
                                                    const ops::BatchNormBackwardFusion& fusion) {
  const char* op = "batch_norm_backward";
  const Tensor& y = fusion.relu_output;
  if (fusion.shortcut.x.defined())
    return pair_backward(op, dy, fusion.dy2, y, x, weight, mean, invstd, fusion.shortcut);
  const bool with_residual = fusion.residual_grad == ResidualGrad::Compute;
  // The kernels sum the two parts where they store dz for the residual; without one, the sum
  // is an add of its own first.
  if (fusion.dy2.defined() && !with_residual)
    return backward(op, add(dy, fusion.dy2), Tensor(), y, x, weight, mean, invstd, false);
  return backward(op, dy, fusion.dy2, y, x, weight, mean, invstd, with_residual);
}

}  // namespace hg
