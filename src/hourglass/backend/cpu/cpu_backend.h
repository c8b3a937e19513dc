// The CPU backend: oneDNN for convolution, batch-norm, pooling and matrix products, plain
// loops on the OpenMP pool for the rest. Methods are defined one op per file in this folder.
#pragma once

#include "hourglass/ops/backend.h"

namespace hg {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  // bf16 needs the CPU's own bf16 instructions (AVX-512 BF16 or AMX, as oneDNN detects them);
  // the backend has no f16 kernels.
  std::string compute_dtype_problem(DType dtype) const override;

  // One override per HG_OP of the list (op_list.h).
#define HG_OP(ret, name, params, ...) ret name params override;
#include "hourglass/ops/op_list.h"

 private:
  // The training batch norm without fusions (batch_norm.cpp), which batch_norm_train and
  // batch_norm_backward compose with this backend's add and relu for the fused variants
  // (batch_norm_fusion.cpp).
  ops::BatchNormForward plain_batch_norm_train(const Tensor& x, const Tensor& weight,
                                               const Tensor& bias, Tensor& running_mean,
                                               Tensor& running_var, double momentum, double eps);
  ops::BatchNormGrads plain_batch_norm_backward(const Tensor& dy, const Tensor& x,
                                                const Tensor& weight, const Tensor& mean,
                                                const Tensor& invstd);
};

}  // namespace hg
