// Names and versions of the vendor libraries behind the dnn and blas wrappers, for
// `hourglass info` and `hourglass doctor`.
#pragma once

#include <string>

namespace hg::gpu {

// "cuDNN 9.19.0" / "MIOpen 3.1.0": the library loaded at run time.
std::string dnn_library_version();
// "cuBLASLt 13.1.0" / "hipBLASLt 0.7.0".
std::string blas_library_version();

}  // namespace hg::gpu
