// Batch norm fused with a residual add and a ReLU, on the CPU: the composition of this
// backend's own batch_norm_train, add, relu (forward) and relu_backward, batch_norm_backward
// (backward); the pair of batch norms (batch_norm_pair_relu_*) likewise, the second batch
// norm's output being the residual. The CPU gains nothing
// from fusing these passes that matters next to its convolutions, and composing the same kernels
// keeps the fused and unfused paths bit-identical (tests/train/test_fused_batch_norm.cpp trains a
// ResNet both ways and compares the bits).
#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/base/parallel.h"

#include <algorithm>
#include <type_traits>
#include <vector>

namespace hg {
namespace {

// Rows per parallel chunk of the mask loops: about 32K elements.
int64_t mask_grain(int64_t c) { return std::max<int64_t>(1, (int64_t(1) << 15) / c); }

// The unsigned integer as wide as a storage type, for bitwise selects.
template <typename T>
using bits_of = std::conditional_t<sizeof(T) == 2, uint16_t,
                                   std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;

// y's ReLU mask ([rows, relu_mask_bytes(C)] u8, bit c % 8 of byte c / 8 set where y > 0). Each
// row is compared into one byte per element first (a loop that vectorises), then packed.
Tensor relu_mask_of(const Tensor& y) {
  const int64_t c = y.size(-1), rows = c > 0 ? y.numel() / c : 0, stride = ops::relu_mask_bytes(c);
  Tensor mask = Tensor::zeros({rows, stride}, DType::U8);
  uint8_t* m = static_cast<uint8_t*>(mask.data_ptr());
  cpu::dispatch_storage("relu_mask", y, [&]<typename T>() {
    const T* p = static_cast<const T*>(y.data_ptr());
    parallel_for_inline(rows, mask_grain(c), [&](int64_t r0, int64_t r1) {
      std::vector<uint8_t> positive(static_cast<size_t>(stride * 8), 0);
      uint8_t* pos = positive.data();
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = p + r * c;
        for (int64_t j = 0; j < c; ++j) pos[j] = cpu::widen(row[j]) > 0 ? 1 : 0;  // NaN: 0
        uint8_t* out = m + r * stride;
        for (int64_t k = 0; k < stride; ++k) {
          const uint8_t* q = pos + 8 * k;
          out[k] = uint8_t(q[0] | q[1] << 1 | q[2] << 2 | q[3] << 3 | q[4] << 4 | q[5] << 5 |
                           q[6] << 6 | q[7] << 7);
        }
      }
    });
  });
  return mask;
}

// dy where the mask's bit is set, else 0 (relu_backward from the mask instead of y): the bits
// are unpacked a row at a time into a byte per element, then select dy's bits or zero.
Tensor masked_by(const Tensor& dy, const Tensor& mask) {
  const int64_t c = dy.size(-1), rows = c > 0 ? dy.numel() / c : 0,
                stride = ops::relu_mask_bytes(c);
  Tensor dz = Tensor::empty(dy.shape(), dy.dtype());
  const uint8_t* m = static_cast<const uint8_t*>(mask.data_ptr());
  cpu::dispatch_storage("batch_norm_relu_backward", dy, [&]<typename T>() {
    using U = bits_of<T>;
    static_assert(sizeof(U) == sizeof(T));
    const U* g = static_cast<const U*>(dy.data_ptr());
    U* out = static_cast<U*>(dz.data_ptr());
    parallel_for_inline(rows, mask_grain(c), [&](int64_t r0, int64_t r1) {
      std::vector<U> keep(static_cast<size_t>(stride * 8));
      U* kp = keep.data();
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row_mask = m + r * stride;
        for (int64_t k = 0; k < stride; ++k)
          for (int b = 0; b < 8; ++b) kp[8 * k + b] = U(0) - U((row_mask[k] >> b) & 1u);
        const U* gr = g + r * c;
        U* o = out + r * c;
        for (int64_t j = 0; j < c; ++j) o[j] = gr[j] & kp[j];
      }
    });
  });
  return dz;
}

}  // namespace

ops::BatchNormForward CpuBackend::batch_norm_relu_train(const Tensor& x, const Tensor& residual,
                                                        const Tensor& weight, const Tensor& bias,
                                                        Tensor& running_mean, Tensor& running_var,
                                                        double momentum, double eps) {
  ops::BatchNormForward out =
      batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps);
  out.y = relu(residual.defined() ? add(out.y, residual) : out.y);
  out.mask = relu_mask_of(out.y);
  return out;
}

ops::BatchNormReluGrads CpuBackend::batch_norm_relu_backward(
    const Tensor& dy, const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& mean,
    const Tensor& invstd, ResidualGrad residual_grad, const Tensor& dy2) {
  const Tensor g = dy2.defined() ? add(dy, dy2) : dy;
  const Tensor dz = y.dtype() == DType::U8 ? masked_by(g, y) : relu_backward(g, y);
  const ops::BatchNormGrads bn = batch_norm_backward(dz, x, weight, mean, invstd);
  ops::BatchNormReluGrads grads{bn.dx, bn.dweight, bn.dbias, Tensor()};
  if (residual_grad == ResidualGrad::Compute) grads.dresidual = dz;
  return grads;
}

ops::BatchNormPairForward CpuBackend::batch_norm_pair_relu_train(
    const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
    Tensor& running_var, const Tensor& x2, const Tensor& weight2, const Tensor& bias2,
    Tensor& running_mean2, Tensor& running_var2, double momentum, double eps) {
  const ops::BatchNormForward second =
      batch_norm_train(x2, weight2, bias2, running_mean2, running_var2, momentum, eps);
  ops::BatchNormForward first =
      batch_norm_relu_train(x, second.y, weight, bias, running_mean, running_var, momentum, eps);
  return ops::BatchNormPairForward{std::move(first.y),    std::move(first.mask),
                                   std::move(first.mean), std::move(first.invstd),
                                   second.mean,           second.invstd};
}

ops::BatchNormPairGrads CpuBackend::batch_norm_pair_relu_backward(
    const Tensor& dy, const Tensor& mask, const Tensor& x, const Tensor& weight, const Tensor& mean,
    const Tensor& invstd, const Tensor& x2, const Tensor& weight2, const Tensor& mean2,
    const Tensor& invstd2, const Tensor& dy2) {
  ops::BatchNormReluGrads first =
      batch_norm_relu_backward(dy, mask, x, weight, mean, invstd, ResidualGrad::Compute, dy2);
  ops::BatchNormGrads second = batch_norm_backward(first.dresidual, x2, weight2, mean2, invstd2);
  return ops::BatchNormPairGrads{std::move(first.dx),       std::move(first.dweight),
                                 std::move(first.dbias),    std::move(second.dx),
                                 std::move(second.dweight), std::move(second.dbias)};
}

}  // namespace hg
