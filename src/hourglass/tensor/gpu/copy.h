// Copies and fills of tensors in GPU memory, used by Tensor::copy_ / fill_ / to() in GPU builds.
#pragma once

namespace hg {
class Tensor;
}

namespace hg::gpu {

// dst = src (same shape) where either or both live on a GPU: any strides, any pair of dtypes
// (converted on the device). Host -> device returns once the source has been read; device ->
// host returns once the data has arrived; device -> device is ordered on the stream.
void copy(Tensor& dst, const Tensor& src);
// Every element of t (on a GPU, any strides) set to value, converted to t's dtype.
void fill(Tensor& t, double value);

}  // namespace hg::gpu
