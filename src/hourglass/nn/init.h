// Parameter initialisation, deterministic for a seed: each parameter draws from its own
// Philox stream keyed by (seed, parameter index), so initial weights do not depend on the
// order modules are built in beyond that index.
#pragma once

#include <cstdint>

#include "hourglass/base/rng.h"
#include "hourglass/tensor/tensor.h"

namespace hg::nn {

// Normal(0, gain / sqrt(fan)) (Kaiming He et al. 2015 with gain sqrt(2) for ReLU).
void kaiming_normal_(Tensor& t, int64_t fan, double gain, RandomStream& rng);
// Uniform(-bound, bound).
void uniform_(Tensor& t, double bound, RandomStream& rng);
// A (semi-)orthogonal matrix times `gain` (Saxe et al. 2014), as torch.nn.init.orthogonal_: t
// viewed as [rows = size(0), cols = the rest]; a normal matrix of the larger side by the smaller
// made orthonormal by Gram-Schmidt in double (each column's sign that of R's diagonal, as a QR
// factorisation gives), transposed when rows < cols. Its rows (or columns) are orthonormal.
void orthogonal_(Tensor& t, double gain, RandomStream& rng);

}  // namespace hg::nn
