// The MPI communicator (Open MPI on Debian) for CPU runs: host buffers, MPI's collectives over a
// duplicate of MPI_COMM_WORLD whose errors return to the caller (MPI_ERRORS_RETURN) and become
// hg::Error. bf16 has no MPI type: it is summed by a user-defined operation over 16-bit words,
// each pairwise sum computed in float and rounded back to bf16.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "hourglass/base/error.h"
#include "hourglass/base/half.h"
#include "hourglass/dist/comm.h"

#ifdef HOURGLASS_HAS_MPI
// The C API only: without these, mpi.h also pulls in the deprecated C++ bindings (and their
// warnings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace hg {

#ifndef HOURGLASS_HAS_MPI

bool mpi_available() { return false; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw_invalid("this hourglass was built without MPI: the MPI communicator is not available",
                "install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev), then "
                "configure and build again (CMake finds it with find_package(MPI))");
}

#else

namespace {

[[noreturn]] void throw_mpi(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  throw_runtime(fmt::format("{} failed: {} (MPI error {})", call, std::string(text, length), code),
                "check that every rank runs the same collectives in the same order and that "
                "mpirun started all of them; Open MPI's --mca options can say more");
}

#define HG_MPI_CHECK(call)                      \
  do {                                          \
    const int hg_mpi_rc_ = (call);              \
    if (hg_mpi_rc_ != MPI_SUCCESS) [[unlikely]] \
      throw_mpi(hg_mpi_rc_, #call);             \
  } while (0)

// in_out[i] += in[i] over bf16 words, in float.
extern "C" void bf16_sum(void* in, void* in_out, int* count, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(in_out);
  for (int i = 0; i < *count; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

// MPI for the whole process: initialised on first use, finalised at exit (MPI cannot be
// initialised again after MPI_Finalize, so it is not tied to one communicator).
struct MpiProcess {
  MPI_Op bf16_sum_op = MPI_OP_NULL;
  bool initialised_here = false;

  MpiProcess() {
    int initialised = 0;
    HG_MPI_CHECK(MPI_Initialized(&initialised));
    if (!initialised) {
      int provided = 0;
      // Serialized: the trainer may issue collectives from a thread other than main, one at a
      // time.
      HG_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
      initialised_here = true;
    }
    HG_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_op));
  }
  ~MpiProcess() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised) return;
    if (bf16_sum_op != MPI_OP_NULL) MPI_Op_free(&bf16_sum_op);
    if (initialised_here) MPI_Finalize();
  }
};

MpiProcess& mpi_process() {
  static MpiProcess process;
  return process;
}

// The largest element count one MPI call takes (its counts are int).
constexpr size_t kMaxCount = size_t(INT_MAX);

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, MPI_Op bf16_op)
      : Communicator(rank, size), comm_(comm), bf16_op_(bf16_op) {}
  ~MpiCommunicator() override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised) MPI_Comm_free(&comm_);
  }
  const char* backend_name() const override { return "mpi"; }
  bool supports_all_reduce(DType dtype) const override {
    return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16;
  }

 protected:
  void all_reduce_sum_impl(void* data, size_t count, DType dtype) override {
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    if (dtype == DType::F64) type = MPI_DOUBLE;
    if (dtype == DType::BF16) {
      type = MPI_UINT16_T;
      op = bf16_op_;
    }
    auto* bytes = static_cast<char*>(data);
    const size_t element = dtype_size(dtype);
    for (size_t done = 0; done < count;) {
      const size_t n = std::min(count - done, kMaxCount);
      HG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes + done * element, int(n), type, op, comm_));
      done += n;
    }
  }
  void broadcast_impl(void* data, size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(bytes - done, kMaxCount);
      HG_MPI_CHECK(MPI_Bcast(p + done, int(n), MPI_BYTE, root, comm_));
      done += n;
    }
  }
  void all_gather_impl(const void* send, void* recv, size_t bytes_per_rank) override {
    HG_CHECK(bytes_per_rank <= kMaxCount,
             "all_gather: {} bytes per rank is more than MPI's {} in one call; gather in parts",
             bytes_per_rank, kMaxCount);
    HG_MPI_CHECK(MPI_Allgather(send, int(bytes_per_rank), MPI_BYTE, recv, int(bytes_per_rank),
                               MPI_BYTE, comm_));
  }
  void barrier_impl() override { HG_MPI_CHECK(MPI_Barrier(comm_)); }

 private:
  MPI_Comm comm_;
  MPI_Op bf16_op_;
};

}  // namespace

bool mpi_available() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  MpiProcess& process = mpi_process();
  MPI_Comm comm = MPI_COMM_NULL;
  HG_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  HG_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0;
  int size = 1;
  HG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HG_MPI_CHECK(MPI_Comm_size(comm, &size));
  return std::make_unique<MpiCommunicator>(comm, rank, size, process.bf16_sum_op);
}

#endif

}  // namespace hg
