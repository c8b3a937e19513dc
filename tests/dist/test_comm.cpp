// The communicators: the single-process one, and MPI's with as many ranks as this binary was
// started with (CTest runs it alone and under mpiexec with 2 and 4 ranks: tests/CMakeLists.txt).
// Every collective's result is checked exactly: sums of rank-dependent small integers, which
// f32, f64 and bf16 represent without rounding.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/base/half.h"
#include "hourglass/dist/comm.h"
#include "hourglass/dist/launch_env.h"
#include "support/expect_error.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

// One MPI communicator for the whole test binary (MPI is initialised once per process).
Communicator& world() {
  static std::unique_ptr<Communicator> comm = make_mpi_communicator();
  return *comm;
}

#define SKIP_WITHOUT_MPI() \
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (openmpi-bin libopenmpi-dev)"

TEST(SingleProcessCommunicator, EveryCollective) {
  auto comm = make_single_process_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  std::vector<float> data = {1.5f, -2.0f};
  comm->all_reduce_sum(data.data(), data.size(), DType::F32);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  comm->broadcast(data.data(), sizeof(float) * data.size(), 0);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  std::vector<float> gathered(2);
  comm->all_gather(data.data(), gathered.data(), sizeof(float) * 2);
  EXPECT_EQ(gathered, data);
  comm->barrier();
  test::expect_invalid([&] { comm->broadcast(data.data(), 4, 1); }, {"root 1", "0..0"});
  test::expect_invalid([&] { comm->all_reduce_sum(data.data(), 1, DType::I32); },
                       {"single process", "does not reduce i32"});
}

TEST(MpiCommunicator, MissingMpiSaysWhatToInstall) {
  if (mpi_available()) GTEST_SKIP() << "this build has MPI";
  test::expect_invalid([] { make_mpi_communicator(); }, {"without MPI", "openmpi-bin"});
}

// The ranks MPI reports are the ones the launch environment reads.
TEST(MpiCommunicator, RankAndSizeMatchTheLaunchEnvironment) {
  SKIP_WITHOUT_MPI();
  const LaunchEnv env = read_launch_env();
  EXPECT_EQ(world().size(), env.world_size) << env.str();
  EXPECT_EQ(world().rank(), env.rank) << env.str();
  EXPECT_STREQ(world().backend_name(), "mpi");
}

// Element i of rank r holds (r + 1) * (i % 50 + 1); the sum over n ranks is
// (i % 50 + 1) * n (n + 1) / 2, at most 50 * 10 for 4 ranks: exact in bf16 (8 bits of
// mantissa hold every integer up to 256, and even ones up to 512).
template <typename T>
void check_all_reduce(DType dtype, size_t count, T (*from_float)(float), float (*to_float)(T)) {
  Communicator& comm = world();
  const int n = comm.size();
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = from_float(float((comm.rank() + 1) * (i % 50 + 1)));
  comm.all_reduce_sum(data.data(), count, dtype);
  for (size_t i = 0; i < count; ++i) {
    const float expected = float((i % 50 + 1) * n * (n + 1) / 2);
    ASSERT_EQ(to_float(data[i]), expected) << dtype_name(dtype) << " element " << i;
  }
}

TEST(MpiCommunicator, AllReduceSum) {
  SKIP_WITHOUT_MPI();
  for (size_t count : {size_t(1), size_t(7), size_t(100003)}) {
    check_all_reduce<float>(
        DType::F32, count, [](float v) { return v; }, [](float v) { return v; });
    check_all_reduce<double>(
        DType::F64, count, [](float v) { return double(v); }, [](double v) { return float(v); });
  }
  // bf16 sums up to 10 * 20: even integers up to 512 are exact.
  Communicator& comm = world();
  std::vector<uint16_t> data(33);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = float_to_bf16(float((comm.rank() + 1) * (i % 20 + 1)));
  comm.all_reduce_sum(data.data(), data.size(), DType::BF16);
  const int n = comm.size();
  for (size_t i = 0; i < data.size(); ++i)
    ASSERT_EQ(bf16_to_float(data[i]), float((i % 20 + 1) * n * (n + 1) / 2)) << i;
  // Nothing to reduce is allowed and touches nothing.
  comm.all_reduce_sum(nullptr, 0, DType::F32);
  test::expect_invalid([&] { comm.all_reduce_sum(data.data(), 1, DType::I64); },
                       {"mpi", "does not reduce i64"});
}

TEST(MpiCommunicator, BroadcastFromEveryRoot) {
  SKIP_WITHOUT_MPI();
  Communicator& comm = world();
  for (int root = 0; root < comm.size(); ++root) {
    std::vector<int32_t> data(1001, -1);
    if (comm.rank() == root)
      for (size_t i = 0; i < data.size(); ++i) data[i] = int32_t(root * 100000 + i);
    comm.broadcast(data.data(), data.size() * sizeof(int32_t), root);
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_EQ(data[i], int32_t(root * 100000 + i)) << "root " << root << " element " << i;
  }
  std::vector<char> one(1);
  test::expect_invalid([&] { comm.broadcast(one.data(), 1, comm.size()); },
                       {"root " + std::to_string(comm.size()), "not a rank"});
}

TEST(MpiCommunicator, AllGather) {
  SKIP_WITHOUT_MPI();
  Communicator& comm = world();
  const size_t bytes = 13;  // odd on purpose
  std::vector<uint8_t> send(bytes);
  for (size_t j = 0; j < bytes; ++j) send[j] = uint8_t(comm.rank() * 31 + j);
  std::vector<uint8_t> recv(bytes * comm.size(), 0xEE);
  comm.all_gather(send.data(), recv.data(), bytes);
  for (int r = 0; r < comm.size(); ++r)
    for (size_t j = 0; j < bytes; ++j)
      ASSERT_EQ(recv[r * bytes + j], uint8_t(r * 31 + j)) << "rank " << r << " byte " << j;
  test::expect_invalid([&] { comm.all_gather(recv.data(), recv.data(), bytes); }, {"overlaps"});
}

// Each rank writes its file, then the barrier; after it every rank sees every file.
TEST(MpiCommunicator, BarrierOrdersWhatRanksDid) {
  SKIP_WITHOUT_MPI();
  Communicator& comm = world();
  // Rank 0 names the folder (its process id) and tells the others.
  int64_t id = comm.rank() == 0 ? int64_t(::getpid()) : 0;
  comm.broadcast(&id, sizeof(id), 0);
  const fs::path dir = fs::temp_directory_path() / ("hg_comm_barrier_" + std::to_string(id));
  if (comm.rank() == 0) fs::create_directories(dir);
  comm.barrier();
  std::ofstream(dir / ("rank-" + std::to_string(comm.rank()))) << comm.rank();
  comm.barrier();
  for (int r = 0; r < comm.size(); ++r)
    EXPECT_TRUE(fs::exists(dir / ("rank-" + std::to_string(r)))) << "rank " << r;
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace hg
