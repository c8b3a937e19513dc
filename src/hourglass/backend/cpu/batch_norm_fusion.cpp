// The training batch norm's op family on the CPU (ops::batch_norm_train, batch_norm_backward with
// their fusions): the plain batch norm of batch_norm.cpp composed with this backend's add and
// relu (forward) and the masked gradient (backward); a shortcut batch norm's output is the
// residual. The CPU gains nothing from fusing these passes that matters next to its
// convolutions, and composing the same kernels keeps the fused and unfused paths bit-identical
// (tests/train/test_fused_batch_norm.cpp trains a ResNet both ways and compares the bits).
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
  cpu::dispatch_storage("batch_norm_backward", dy, [&]<typename T>() {
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

ops::BatchNormForward CpuBackend::batch_norm_train(const Tensor& x, const Tensor& weight,
                                                   const Tensor& bias, Tensor& running_mean,
                                                   Tensor& running_var, double momentum, double eps,
                                                   const ops::BatchNormFusion& fusion) {
  if (!fusion.relu)
    return plain_batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps);
  Tensor residual = fusion.residual;
  ops::BatchNormForward shortcut;
  if (fusion.shortcut.x.defined()) {
    const ops::BatchNormShortcut& s = fusion.shortcut;
    Tensor running_mean2 = s.running_mean, running_var2 = s.running_var;
    shortcut =
        plain_batch_norm_train(s.x, s.weight, s.bias, running_mean2, running_var2, momentum, eps);
    residual = shortcut.y;
  }
  ops::BatchNormForward out =
      plain_batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps);
  out.y = relu(residual.defined() ? add(out.y, residual) : out.y);
  out.mask = relu_mask_of(out.y);
  out.mean2 = std::move(shortcut.mean);
  out.invstd2 = std::move(shortcut.invstd);
  return out;
}

ops::BatchNormGrads CpuBackend::batch_norm_backward(const Tensor& dy, const Tensor& x,
                                                    const Tensor& weight, const Tensor& mean,
                                                    const Tensor& invstd,
                                                    const ops::BatchNormBackwardFusion& fusion) {
  const Tensor& y = fusion.relu_output;
  if (!y.defined()) return plain_batch_norm_backward(dy, x, weight, mean, invstd);
  const Tensor g = fusion.dy2.defined() ? add(dy, fusion.dy2) : dy;
  Tensor dz = y.dtype() == DType::U8 ? masked_by(g, y) : relu_backward(g, y);
  ops::BatchNormGrads grads = plain_batch_norm_backward(dz, x, weight, mean, invstd);
  if (fusion.shortcut.x.defined()) {
    const ops::BatchNormBackwardFusion::Shortcut& s = fusion.shortcut;
    ops::BatchNormGrads second = plain_batch_norm_backward(dz, s.x, s.weight, s.mean, s.invstd);
    grads.dx2 = std::move(second.dx);
    grads.dweight2 = std::move(second.dweight);
    grads.dbias2 = std::move(second.dbias);
  } else if (fusion.residual_grad == ResidualGrad::Compute) {
    grads.dresidual = std::move(dz);
  }
  return grads;
}

}  // namespace hg
