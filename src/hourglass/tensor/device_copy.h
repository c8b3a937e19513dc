// Hook through which a GPU backend performs copies that involve device memory.
#pragma once

namespace hg {

class Tensor;
using DeviceCopyFn = void (*)(Tensor& dst, const Tensor& src);
void register_device_copy(DeviceCopyFn fn);

}  // namespace hg
