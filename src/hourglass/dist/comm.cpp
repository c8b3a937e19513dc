#include "hourglass/dist/comm.h"

#include <fmt/format.h>

#include <cstring>

#include "hourglass/base/error.h"

namespace hg {

namespace {
// Whether an all-reduce of these arguments has work to do; throws for bad ones.
bool check_all_reduce(const Communicator& c, const void* data, size_t count, DType dtype) {
  if (!c.supports_all_reduce(dtype)) {
    throw_invalid(fmt::format("all_reduce_sum: the {} communicator does not reduce {} buffers",
                              c.backend_name(), dtype_name(dtype)),
                  "reduce f32 or f64 (and bf16 where the backend has it), converting first");
  }
  if (count == 0) return false;
  HG_CHECK(data != nullptr, "all_reduce_sum: null buffer for {} elements of {}", count,
           dtype_name(dtype));
  return true;
}
}  // namespace

void Communicator::all_reduce_sum(void* data, size_t count, DType dtype) {
  if (check_all_reduce(*this, data, count, dtype)) all_reduce_sum_impl(data, count, dtype);
}

void Communicator::all_reduce_sum_start(void* data, size_t count, DType dtype) {
  if (check_all_reduce(*this, data, count, dtype)) all_reduce_start_impl(data, count, dtype);
}

void Communicator::all_reduce_wait() { all_reduce_wait_impl(); }

void Communicator::broadcast(void* data, size_t bytes, int root) {
  HG_CHECK(root >= 0 && root < size_,
           "broadcast: root {} is not a rank of this communicator (0..{})", root, size_ - 1);
  if (bytes == 0) return;
  HG_CHECK(data != nullptr, "broadcast: null buffer for {} bytes", bytes);
  broadcast_impl(data, bytes, root);
}

void Communicator::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  if (bytes_per_rank == 0) return;
  HG_CHECK(send != nullptr && recv != nullptr, "all_gather: null buffer ({} bytes per rank)",
           bytes_per_rank);
  const auto* s = static_cast<const char*>(send);
  const auto* r = static_cast<const char*>(recv);
  HG_CHECK(s + bytes_per_rank <= r || r + bytes_per_rank * size_t(size_) <= s,
           "all_gather: the send buffer overlaps the receive buffer");
  all_gather_impl(send, recv, bytes_per_rank);
}

void Communicator::barrier() { barrier_impl(); }

namespace {

class SingleProcessCommunicator final : public Communicator {
 public:
  SingleProcessCommunicator() : Communicator(0, 1) {}
  const char* backend_name() const override { return "single process"; }
  bool supports_all_reduce(DType dtype) const override {
    return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16;
  }

 protected:
  void all_reduce_sum_impl(void*, size_t, DType) override {}
  void broadcast_impl(void*, size_t, int) override {}
  void all_gather_impl(const void* send, void* recv, size_t bytes_per_rank) override {
    std::memcpy(recv, send, bytes_per_rank);
  }
  void barrier_impl() override {}
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

#ifndef HOURGLASS_HAS_NCCL
// Builds without NCCL or RCCL (CPU builds, GPU builds whose toolkit lacks it); the real ones
// are in gpu/comm_nccl.cpp.
bool nccl_available() { return false; }
std::string nccl_library_version() { return ""; }

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv&, int,
                                                     std::chrono::milliseconds) {
  throw_invalid("this hourglass was built without NCCL: the GPU communicator is not available",
                "build with -DHOURGLASS_GPU=cuda where the CUDA toolkit has nccl.h and libnccl "
                "(NVIDIA's libnccl-dev, or the NCCL of the toolkit), or with -DHOURGLASS_GPU=hip "
                "where ROCm has RCCL (its rccl CMake package), or use the MPI communicator on "
                "CPUs");
}
#endif

}  // namespace hg
