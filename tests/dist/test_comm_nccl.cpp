// The NCCL communicator: one rank on one GPU (the code path multi-GPU runs take, without a
// rendezvous), every collective checked exactly on device buffers. Skips without a GPU; in
// builds without NCCL, asking for it is an InvalidInput naming what to install.
#include <gtest/gtest.h>

#include <vector>

#include "hourglass/device/device.h"
#include "hourglass/dist/comm.h"
#include "hourglass/tensor/tensor.h"
#include "support/expect_error.h"
#include "support/gpu.h"

namespace hg {
namespace {

TEST(NcclCommunicator, MissingNcclSaysWhatToInstall) {
  if (nccl_available()) GTEST_SKIP() << "this build has NCCL";
  test::expect_invalid([] { make_nccl_communicator(LaunchEnv{}, 0); },
                       {"without NCCL", "nccl.h", "libnccl"});
}

TEST(NcclCommunicator, OneRankOnOneGpu) {
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL";
  HG_REQUIRE_GPU();
  const LaunchEnv env;  // rank 0 of 1
  auto comm = make_nccl_communicator(env, 0);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_STREQ(comm->backend_name(), "nccl");
  const Device gpu = Device::gpu(0);
  // All-reduce over one rank leaves the values: f32, f64 and bf16 (small integers, exact).
  std::vector<float> values(1003);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 97) - 40.0f;
  const Tensor host = Tensor::from_vector(values, {int64_t(values.size())});
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    Tensor t = host.to(dtype).to(gpu);
    comm->all_reduce_sum(t.data_ptr(), size_t(t.numel()), dtype);
    EXPECT_EQ(t.to(Device::cpu()).to(DType::F32).to_vector<float>(), values) << dtype_name(dtype);
  }
  Tensor b = host.to(gpu);
  comm->broadcast(b.data_ptr(), values.size() * sizeof(float), 0);
  EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), values);
  Tensor gathered = Tensor::zeros({int64_t(values.size())}, DType::F32, gpu);
  comm->all_gather(b.data_ptr(), gathered.data_ptr(), values.size() * sizeof(float));
  comm->barrier();
  EXPECT_EQ(gathered.to(Device::cpu()).to_vector<float>(), values);
  test::expect_invalid([&] { make_nccl_communicator(env, gpu_device_count()); },
                       {"asks for GPU " + std::to_string(gpu_device_count())});
}

}  // namespace
}  // namespace hg
