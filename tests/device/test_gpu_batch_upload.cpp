// BatchUploader (tensor/gpu/batch_upload.h): batches uploaded on the copy stream arrive intact
// for the work issued after upload(), also when the compute stream lags far behind the host (a
// slot is rewritten only after the work on its previous batch has run), from pinned pool
// tensors and from ordinary host tensors; the pinned pool reuses its blocks.
#include <gtest/gtest.h>

#include <vector>

#include "hourglass/ops/ops.h"
#include "hourglass/tensor/tensor.h"
#include "support/gpu.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/tensor/gpu/batch_upload.h"
#endif

namespace hg {
namespace {

#ifdef HOURGLASS_HAS_GPU
TEST(GpuBatchUpload, BatchesArriveIntactWhileTheDeviceLagsBehind) {
  HG_REQUIRE_GPU();
  const Device gpu = Device::gpu(0);
  gpu::BatchUploader up(0, /*slots=*/3);
  // Long device work before each batch's reader keeps the compute stream behind the host, so
  // a slot rewritten too early would be read after its next copy.
  const Tensor a = Tensor::full({2048, 2048}, 0.001, DType::F32, gpu);
  constexpr int kBatches = 24;
  constexpr int64_t kRows = 256, kCols = 1024;
  std::vector<Tensor> sums;
  std::vector<double> want;
  for (int i = 0; i < kBatches; ++i) {
    // Odd batches from the pinned pool, even ones from ordinary memory (staged by the slot).
    Tensor host = i % 2 ? up.pinned_empty({kRows, kCols}, DType::F32)
                        : Tensor::empty({kRows, kCols}, DType::F32);
    float* p = host.data<float>();
    double total = 0;
    for (int64_t k = 0; k < kRows * kCols; ++k) {
      p[k] = float((k % 7) + i);
      total += p[k];
    }
    want.push_back(total);
    const Tensor device = up.upload(host);
    ASSERT_EQ(device.device(), gpu);
    ASSERT_EQ(device.shape(), host.shape());
    host = Tensor();  // the uploader keeps a pinned source alive until its copy is done
    Tensor busy = a;
    for (int k = 0; k < 8; ++k) busy = ops::linear(busy, a, Tensor());
    sums.push_back(ops::add(ops::sum(device), ops::mul_scalar(ops::sum(busy), 0.0)));
  }
  for (int i = 0; i < kBatches; ++i) EXPECT_EQ(sums[size_t(i)].item(), want[size_t(i)]) << i;
  // Twelve pinned batches of 1 MiB went through the pool; at most a few blocks were ever held.
  EXPECT_LE(up.pinned_bytes(), size_t(8) << 20);
}

TEST(GpuBatchUpload, RefusesADeviceOrStridedSource) {
  HG_REQUIRE_GPU();
  gpu::BatchUploader up(0);
  EXPECT_THROW(up.upload(Tensor::zeros({4}, DType::F32, Device::gpu(0))), Error);
  const Tensor t = Tensor::zeros({4, 4});
  EXPECT_THROW(up.upload(t.permute({1, 0})), Error);
}
#endif

}  // namespace
}  // namespace hg
