// Page-cache warm-up for the vendor libraries. cuDNN and cuBLASLt (MIOpen and hipBLASLt) are
// large, over a gigabyte together, and a process whose files are not in the page cache (the
// first after a boot, an install or a long pause) reads the parts it uses by page faults, a
// few pages at a time, as their kernels are first planned and launched. Read ahead in large
// sequential requests on a thread of their own while the run reads its data, those reads
// leave the training steps.
//
// prefetch_vendor_libraries() starts, once per process, one detached thread that finds the
// mapped files of the vendor libraries (/proc/self/maps; cuDNN's and MIOpen's front libraries
// are linked) and every file beside each whose name starts with one of the stems (cuDNN's
// engine, heuristics and ops libraries, which it opens itself at first use, and cuBLASLt, which
// blas_cublaslt.cpp opens at the first product), and hands each to readahead(2), largest first.
// Best effort: a file that cannot be read is skipped silently, and nothing waits for the thread.
// HOURGLASS_PREFETCH_LIBRARIES=0 turns it off (to measure it).
#pragma once

#include <string>
#include <vector>

namespace hg::gpu {

void prefetch_vendor_libraries();

// The files prefetch_vendor_libraries() reads, largest first: the paths in `maps_text` (the
// format of /proc/self/maps) whose file name starts with one of `stems`, and the regular files
// named "<stem>...so..." (any of the stems) in each one's folder; each file once (by its
// resolved path). For tests.
std::vector<std::string> vendor_library_files(const std::string& maps_text,
                                              const std::vector<std::string>& stems);

}  // namespace hg::gpu
