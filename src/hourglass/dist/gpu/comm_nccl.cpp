// The NCCL communicator for GPU ranks: NCCL in CUDA builds, RCCL (the same API, <rccl/rccl.h>)
// in HIP builds, wherever CMake finds the library (cmake/gpu_communicator.cmake defines
// HOURGLASS_HAS_NCCL). Collectives run on the device's stream, except the started all-reduces
// (all_reduce_sum_start), which run on a stream of the communicator's own, joined to the device's
// by events; the unique id that joins the ranks comes from rank 0 through MPI or the TCP
// rendezvous (comm.h).
#ifdef HOURGLASS_HAS_NCCL

#ifdef HOURGLASS_GPU_HIP
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

#include <cstring>

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/dist/comm.h"
#include "hourglass/dist/rendezvous.h"

namespace hg {

namespace {

#ifdef HOURGLASS_GPU_HIP
constexpr const char* kLibrary = "RCCL";
constexpr const char* kVisibleDevices = "HIP_VISIBLE_DEVICES";
#else
constexpr const char* kLibrary = "NCCL";
constexpr const char* kVisibleDevices = "CUDA_VISIBLE_DEVICES";
#endif

[[noreturn]] void throw_nccl(ncclResult_t result, const char* call) {
  throw_runtime(fmt::format("{} failed: {} ({} error {}; NCCL_DEBUG=INFO says more)", call,
                            ncclGetErrorString(result), kLibrary, int(result)),
                "check that every rank runs the same collectives in the same order, that each "
                "rank has its own GPU, and that the ranks can reach each other");
}

#define HG_NCCL_CHECK(call)                      \
  do {                                           \
    const ncclResult_t hg_nccl_rc_ = (call);     \
    if (hg_nccl_rc_ != ncclSuccess) [[unlikely]] \
      throw_nccl(hg_nccl_rc_, #call);            \
  } while (0)

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device)
      : Communicator(rank, size), comm_(comm), device_(device) {
    gpu::set_device(device_);
    if (const gpuError_t err = gpuMalloc(&scratch_, sizeof(float)); err != gpuSuccess) {
      ncclCommDestroy(comm_);
      gpu::throw_gpu_error(err, "gpuMalloc(&scratch_, sizeof(float))", __FILE__, __LINE__);
    }
    gpuError_t err = gpuStreamCreateWithFlags(&side_, gpuStreamNonBlocking);
    if (err == gpuSuccess) err = gpuEventCreateWithFlags(&issued_, gpuEventDisableTiming);
    if (err == gpuSuccess) err = gpuEventCreateWithFlags(&reduced_, gpuEventDisableTiming);
    if (err != gpuSuccess) {
      release();
      gpu::throw_gpu_error(err, "creating the NCCL communicator's stream and events", __FILE__,
                           __LINE__);
    }
  }
  ~NcclCommunicator() override { release(); }
  void release() {
    // Destructors log instead of throwing.
    if (reduced_ != nullptr && gpuEventDestroy(reduced_) != gpuSuccess)
      HG_LOG_WARN("NCCL communicator: destroying an event failed");
    if (issued_ != nullptr && gpuEventDestroy(issued_) != gpuSuccess)
      HG_LOG_WARN("NCCL communicator: destroying an event failed");
    if (side_ != nullptr && gpuStreamDestroy(side_) != gpuSuccess)
      HG_LOG_WARN("NCCL communicator: destroying its stream failed");
    reduced_ = issued_ = nullptr;
    side_ = nullptr;
    if (gpuFree(scratch_) != gpuSuccess) HG_LOG_WARN("NCCL communicator: freeing scratch failed");
    if (const ncclResult_t r = ncclCommDestroy(comm_); r != ncclSuccess)
      HG_LOG_WARN("ncclCommDestroy failed: {}", ncclGetErrorString(r));
  }
  const char* backend_name() const override { return "nccl"; }
  bool takes_device_buffers() const override { return true; }
  bool supports_all_reduce(DType dtype) const override {
    return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16;
  }

 protected:
  void all_reduce_sum_impl(void* data, size_t count, DType dtype) override {
    gpu::set_device(device_);
    HG_NCCL_CHECK(
        ncclAllReduce(data, data, count, nccl_type(dtype), ncclSum, comm_, gpu::stream(device_)));
  }
  void all_reduce_start_impl(void* data, size_t count, DType dtype) override {
    gpu::set_device(device_);
    HG_GPU_CHECK(gpuEventRecord(issued_, gpu::stream(device_)));
    HG_GPU_CHECK(gpuStreamWaitEvent(side_, issued_, 0));
    HG_NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(dtype), ncclSum, comm_, side_));
    pending_ = true;
  }
  void all_reduce_wait_impl() override {
    if (!pending_) return;
    gpu::set_device(device_);
    HG_GPU_CHECK(gpuEventRecord(reduced_, side_));
    HG_GPU_CHECK(gpuStreamWaitEvent(gpu::stream(device_), reduced_, 0));
    pending_ = false;
  }
  void broadcast_impl(void* data, size_t bytes, int root) override {
    gpu::set_device(device_);
    HG_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, gpu::stream(device_)));
  }
  void all_gather_impl(const void* send, void* recv, size_t bytes_per_rank) override {
    gpu::set_device(device_);
    HG_NCCL_CHECK(
        ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm_, gpu::stream(device_)));
  }
  // NCCL has no barrier: an all-reduce of one float, then a wait for the stream.
  void barrier_impl() override {
    gpu::set_device(device_);
    HG_NCCL_CHECK(
        ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, gpu::stream(device_)));
    gpu::synchronize(device_);
  }

 private:
  static ncclDataType_t nccl_type(DType dtype) {
    if (dtype == DType::F64) return ncclFloat64;
    if (dtype == DType::BF16) return ncclBfloat16;
    return ncclFloat32;
  }

  ncclComm_t comm_;
  int device_;
  void* scratch_ = nullptr;
  gpuStream_t side_ = nullptr;    // started all-reduces
  gpuEvent_t issued_ = nullptr;   // the device's stream up to a started all-reduce
  gpuEvent_t reduced_ = nullptr;  // the side stream up to all_reduce_wait
  bool pending_ = false;          // started all-reduces not yet waited for
};

}  // namespace

bool nccl_available() { return true; }

std::string nccl_library_version() {
  int version = 0;
  HG_NCCL_CHECK(ncclGetVersion(&version));
  // Since 2.9 the code is major * 10000 + minor * 100 + patch (2.28.9: 22809).
  return fmt::format("{} {}.{}.{}", kLibrary, version / 10000, (version / 100) % 100,
                     version % 100);
}

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv& env, int device,
                                                     std::chrono::milliseconds rendezvous_timeout) {
  const int count = gpu::device_count();
  if (device < 0 || device >= count) {
    throw_invalid(fmt::format("NCCL communicator: rank {} asks for GPU {}, and this process sees "
                              "{} GPU{}",
                              env.rank, device, count, count == 1 ? "" : "s"),
                  count == 0 ? gpu::no_device_reason()
                             : fmt::format("give each rank a GPU it sees (usually its local "
                                           "rank; check {})",
                                           kVisibleDevices));
  }
  gpu::set_device(device);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (env.rank == 0) HG_NCCL_CHECK(ncclGetUniqueId(&id));
  if (env.world_size > 1) {
    if (env.source == LaunchSource::OpenMpi && mpi_available()) {
      make_mpi_communicator()->broadcast(&id, sizeof(id), 0);
    } else {
      RendezvousOptions options;
      options.master_addr = env.master_addr;
      options.master_port = env.master_port;
      options.rank = env.rank;
      options.world_size = env.world_size;
      options.timeout = rendezvous_timeout;
      std::vector<uint8_t> mine;
      if (env.rank == 0) {
        const auto* p = reinterpret_cast<const uint8_t*>(&id);
        mine.assign(p, p + sizeof(id));
      }
      const std::vector<uint8_t> got = rendezvous_broadcast(options, mine);
      if (got.size() != sizeof(id)) {
        throw_runtime(fmt::format("NCCL communicator: rank 0 sent a unique id of {} bytes, this "
                                  "rank expects {}",
                                  got.size(), sizeof(id)),
                      "run the same hourglass build (and NCCL) on every rank");
      }
      std::memcpy(&id, got.data(), sizeof(id));
    }
  }
  ncclComm_t comm = nullptr;
  HG_NCCL_CHECK(ncclCommInitRank(&comm, env.world_size, id, env.rank));
  return std::make_unique<NcclCommunicator>(comm, env.rank, env.world_size, device);
}

}  // namespace hg

#endif  // HOURGLASS_HAS_NCCL
