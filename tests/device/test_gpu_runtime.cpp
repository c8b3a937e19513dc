// The GPU runtime layer: the caching allocator (statistics, reuse, limit and out-of-memory
// errors, empty_cache, poison), copies between host and device with every dtype conversion and
// strided views on either side (checked bit for bit against the CPU's conversions), fills,
// item(), pinned buffers and asynchronous scalar reads (ScalarRead too), and device discovery. GPU
// tests skip without a GPU; the NoGpu tests check what a machine without one reports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "hourglass/device/allocator.h"
#include "hourglass/tensor/scalar_read.h"
#include "hourglass/tensor/tensor.h"
#include "support/compare.h"
#include "support/gpu.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/device_info.h"
#include "hourglass/device/gpu/gpu_allocator.h"
#include "hourglass/tensor/gpu/pinned.h"
#endif

namespace hg {
namespace {

constexpr DType kAllDtypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                DType::I8,  DType::I32, DType::I64, DType::U8};

const Device kGpu = Device::gpu(0);

// A CPU tensor of `dtype` holding values uniform in [lo, hi) (converted by the CPU).
Tensor random_cpu(const Shape& shape, DType dtype, uint64_t seed, double lo, double hi) {
  const std::vector<double> v = test::random_values(shape_numel(shape), seed, lo, hi);
  Tensor t = Tensor::from_vector(v, shape);
  return t.to(dtype);
}

// Both tensors copied to the CPU, made contiguous, compared byte for byte.
::testing::AssertionResult same_bytes(const Tensor& got, const Tensor& expected) {
  if (got.shape() != expected.shape() || got.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << got.describe() << " vs " << expected.describe();
  const Tensor g = got.to(Device::cpu()).contiguous(), e = expected.to(Device::cpu()).contiguous();
  const size_t item = g.itemsize();
  const auto* gp = static_cast<const uint8_t*>(g.data_ptr());
  const auto* ep = static_cast<const uint8_t*>(e.data_ptr());
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (std::memcmp(gp + size_t(i) * item, ep + size_t(i) * item, item) != 0) {
      const std::vector<double> gv = g.to_vector<double>(), ev = e.to_vector<double>();
      return ::testing::AssertionFailure() << dtype_name(g.dtype()) << " element " << i << ": got "
                                           << gv[size_t(i)] << ", expected " << ev[size_t(i)];
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- without a GPU

TEST(NoGpu, GpuTensorsAreRefusedWithAReason) {
  if (test::gpu_available()) GTEST_SKIP() << "a GPU is available";
  try {
    Tensor::empty({4}, DType::F32, kGpu);
    FAIL() << "creating a tensor on gpu:0 without a GPU did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << e.one_line();
    EXPECT_NE(e.one_line().find("gpu"), std::string::npos) << e.one_line();
  }
}

#ifdef HOURGLASS_HAS_GPU
TEST(NoGpu, DiscoveryReportsNoDevicesAndWhy) {
  if (test::gpu_available()) GTEST_SKIP() << "a GPU is available";
  EXPECT_TRUE(gpu::list_devices().empty());
  EXPECT_FALSE(test::gpu_unavailable_reason().empty());
  const gpu::GpuRuntimeInfo rt = gpu::runtime_info();  // never throws
  EXPECT_TRUE(rt.backend == "cuda" || rt.backend == "hip") << rt.backend;
  EXPECT_FALSE(rt.runtime.empty());
  // Either no driver, or the runtime said why it sees no device.
  EXPECT_TRUE(rt.driver_version == 0 || !rt.device_query_error.empty())
      << "driver " << rt.driver << ", error '" << rt.device_query_error << "'";
}
#endif

// ---------------------------------------------------------------- allocator

TEST(GpuAllocator, StatisticsFollowAllocationsAndFreedBlocksAreReused) {
  HG_REQUIRE_GPU();
  Allocator& a = allocator_for(kGpu);
  EXPECT_EQ(a.device(), kGpu);
  a.empty_cache();
  const AllocatorStats s0 = a.stats();
  EXPECT_EQ(s0.reserved, s0.in_use);  // nothing cached after empty_cache

  void* p = a.allocate(1000);  // rounded to 1024
  const AllocatorStats s1 = a.stats();
  EXPECT_EQ(s1.in_use, s0.in_use + 1024);
  EXPECT_EQ(s1.reserved, s0.reserved + 1024);
  EXPECT_EQ(s1.allocations, s0.allocations + 1);
  EXPECT_GE(s1.peak_in_use, s1.in_use);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);

  a.deallocate(p, 1000);
  const AllocatorStats s2 = a.stats();
  EXPECT_EQ(s2.in_use, s0.in_use);
  EXPECT_EQ(s2.reserved, s1.reserved);  // cached, not returned

  void* q = a.allocate(600);  // the same 1024-byte size class
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().reserved, s1.reserved);  // reused: nothing new reserved
  a.deallocate(q, 600);

  void* one = a.allocate(1);
  EXPECT_EQ(a.stats().in_use, s0.in_use + 512);
  a.deallocate(one, 1);

  // A repeated pattern of tensors reserves nothing new after the first round.
  for (int round = 0; round < 3; ++round) {
    Tensor x = Tensor::empty({1000, 3}, DType::F32, kGpu);
    Tensor y = Tensor::empty({77}, DType::BF16, kGpu);
    if (round == 0) continue;
    EXPECT_EQ(a.stats().reserved, s1.reserved + 12288 + 512) << "round " << round;
  }

  a.reset_peak();
  EXPECT_EQ(a.stats().peak_in_use, a.stats().in_use);
  {
    Tensor big = Tensor::empty({1 << 20}, DType::F32, kGpu);
    EXPECT_GE(a.stats().peak_in_use, s0.in_use + (4u << 20));
  }
  EXPECT_GE(a.stats().peak_in_use, s0.in_use + (4u << 20));
  EXPECT_EQ(a.stats().in_use, s0.in_use);
}

TEST(GpuAllocator, LimitThrowsOutOfMemoryNamingTheMemoryAndStaysUsable) {
  HG_REQUIRE_GPU();
  Allocator& a = allocator_for(kGpu);
  const AllocatorStats before = a.stats();
  a.set_limit(before.in_use + (1u << 20));
  EXPECT_EQ(a.limit(), before.in_use + (1u << 20));
  try {
    a.allocate(2u << 20);
    a.set_limit(0);
    FAIL() << "allocating past the limit did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    for (const char* part : {"gpu:0", "out of memory", "asked for", "2097152 bytes", "limit",
                             "in use", "reserved", "cached", "free", "total"})
      EXPECT_NE(e.message().find(part), std::string::npos) << part << " not in: " << e.message();
    for (const char* part :
         {"train.micro_batch = \"auto\"", "train.batch_size", "bf16", "other processes"})
      EXPECT_NE(e.remedy().find(part), std::string::npos) << part << " not in: " << e.remedy();
  }
  EXPECT_EQ(a.stats().failures, before.failures + 1);
  EXPECT_EQ(a.stats().in_use, before.in_use);
  // Through tensors, as the out-of-memory policy sees it.
  EXPECT_THROW(Tensor::empty({1 << 20}, DType::F32, kGpu), Error);
  // Under the limit still works.
  {
    Tensor small = Tensor::full({1000}, 2.0, DType::F32, kGpu);
    EXPECT_EQ(small.to_vector<float>()[999], 2.0f);
  }
  a.set_limit(0);
  EXPECT_EQ(a.limit(), 0u);
  Tensor t = Tensor::full({1 << 20}, 1.5, DType::F32, kGpu);
  EXPECT_EQ(t.to_vector<float>()[12345], 1.5f);
}

TEST(GpuAllocator, ARequestTheDeviceCannotHoldThrowsOutOfMemoryAndStaysUsable) {
  HG_REQUIRE_GPU();
  Allocator& a = allocator_for(kGpu);
  const AllocatorStats before = a.stats();
  const size_t huge = size_t(1) << 50;  // 1 PiB
  try {
    a.allocate(huge);
    FAIL() << "allocating 1 PiB did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << e.one_line();
    for (const char* part :
         {"gpu:0", "asked for", "refused", "in use", "reserved", "free of", "total"})
      EXPECT_NE(e.message().find(part), std::string::npos) << part << " not in: " << e.message();
    EXPECT_NE(e.remedy().find("bf16"), std::string::npos) << e.remedy();
  }
  EXPECT_EQ(a.stats().failures, before.failures + 1);
  Tensor t = Tensor::full({4096}, -3.0, DType::F32, kGpu);
  EXPECT_EQ(t.to_vector<float>()[4095], -3.0f);
}

TEST(GpuAllocator, EmptyCacheReturnsCachedBlocks) {
  HG_REQUIRE_GPU();
  Allocator& a = allocator_for(kGpu);
  {
    std::vector<Tensor> held;
    for (int i = 1; i <= 8; ++i) held.push_back(Tensor::empty({i * 100000}, DType::F32, kGpu));
  }
  const AllocatorStats cached = a.stats();
  EXPECT_GT(cached.reserved, cached.in_use);
  a.empty_cache();
  const AllocatorStats after = a.stats();
  EXPECT_LT(after.reserved, cached.reserved);
  EXPECT_EQ(after.reserved, after.in_use);
}

#ifdef HOURGLASS_HAS_GPU
TEST(GpuAllocator, PoisonFillsNewBlocksWithOnes) {
  HG_REQUIRE_GPU();
  gpu::set_poison(true);
  struct Off {
    ~Off() { gpu::set_poison(false); }
  } off;
  EXPECT_TRUE(gpu::poison());
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::U8}) {
    {
      Tensor warm = Tensor::empty({999}, dt, kGpu);
      warm.zero_();  // the block goes back to the cache holding zeros
    }
    Tensor t = Tensor::empty({999}, dt, kGpu);  // the same block, poisoned again
    const Tensor host = t.to(Device::cpu());
    const auto* bytes = static_cast<const uint8_t*>(host.data_ptr());
    for (size_t i = 0; i < host.nbytes(); ++i)
      ASSERT_EQ(bytes[i], 0xFF) << dtype_name(dt) << " byte " << i;
    if (is_floating(dt)) EXPECT_TRUE(std::isnan(host.to_vector<double>()[0]));
  }
}

TEST(GpuAllocator, OneAllocatorPerDevice) {
  HG_REQUIRE_GPU();
  EXPECT_EQ(&gpu::allocator(0), &allocator_for(kGpu));
  try {
    gpu::allocator(1000);
    FAIL() << "gpu:1000 did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("gpu:1000"), std::string::npos) << e.message();
  }
}
#endif

// ---------------------------------------------------------------- copies

// Every conversion three ways (host -> device, on the device, device -> host) against the CPU.
void check_conversion(DType from, DType to, double lo, double hi, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
  const Shape shape = {3, 517};
  const Tensor src = random_cpu(shape, from, seed, lo, hi);
  const Tensor expected = src.to(to);  // the CPU's conversion
  Tensor uploaded = Tensor::empty(shape, to, kGpu);
  uploaded.copy_(src);
  EXPECT_TRUE(same_bytes(uploaded, expected)) << "host -> device";
  const Tensor on_device = src.to(kGpu);
  EXPECT_TRUE(same_bytes(on_device, src)) << "same dtype round trip";
  EXPECT_TRUE(same_bytes(on_device.to(to), expected)) << "device -> device";
  Tensor downloaded = Tensor::empty(shape, to, Device::cpu());
  downloaded.copy_(on_device);
  EXPECT_TRUE(same_bytes(downloaded, expected)) << "device -> host";
}

TEST(GpuCopy, EveryDtypePairConvertsLikeTheCpu) {
  HG_REQUIRE_GPU();
  // Values every dtype holds (u8 and i8 included), with fractions to truncate and round.
  uint64_t seed = 1;
  for (DType from : kAllDtypes)
    for (DType to : kAllDtypes) check_conversion(from, to, 0.0, 100.0, seed++);
}

TEST(GpuCopy, WideRangeConversionsOfTheDtypesThatMatter) {
  HG_REQUIRE_GPU();
  for (DType other : {DType::BF16, DType::F16, DType::F64, DType::I64, DType::I32}) {
    check_conversion(DType::F32, other, -30000.0, 30000.0, 100);
    check_conversion(other, DType::F32, -30000.0, 30000.0, 101);
  }
  // Small magnitudes: f16 subnormals, bf16 rounding of tiny values.
  check_conversion(DType::F32, DType::F16, -1e-5, 1e-5, 102);
  check_conversion(DType::F32, DType::BF16, -1e-30, 1e-30, 103);
  check_conversion(DType::F64, DType::BF16, -1e10, 1e10, 104);
  check_conversion(DType::U8, DType::F32, 0.0, 256.0, 105);
  check_conversion(DType::F32, DType::U8, 0.0, 256.0, 106);
  check_conversion(DType::I8, DType::BF16, -128.0, 128.0, 107);
  check_conversion(DType::I64, DType::F64, -1e15, 1e15, 108);
}

TEST(GpuCopy, StridedViewsOnEitherSide) {
  HG_REQUIRE_GPU();
  const Tensor base = random_cpu({4, 5, 6}, DType::F32, 7, -1, 1);
  const Tensor view = base.permute({2, 0, 1}).narrow(1, 1, 2);  // [6, 2, 5], strided
  ASSERT_FALSE(view.is_contiguous());

  // host strided -> device (span upload), same dtype and converting
  EXPECT_TRUE(same_bytes(view.to(kGpu), view.contiguous()));
  Tensor as_bf16 = Tensor::empty(view.shape(), DType::BF16, kGpu);
  as_bf16.copy_(view);
  EXPECT_TRUE(same_bytes(as_bf16, view.to(DType::BF16)));

  // host view spread thinly over a large buffer -> device (packed on the host first)
  const Tensor wide = random_cpu({1000, 64}, DType::F32, 8, -1, 1);
  const Tensor column = wide.narrow(1, 3, 1);
  EXPECT_TRUE(same_bytes(column.to(kGpu), column.contiguous()));

  // device strided -> device contiguous (a gather kernel), same dtype and converting
  const Tensor g = base.to(kGpu);
  const Tensor gview = g.permute({2, 0, 1}).narrow(1, 1, 2);
  EXPECT_TRUE(same_bytes(gview.contiguous(), view.contiguous()));
  EXPECT_TRUE(same_bytes(gview.to(DType::F16), view.to(DType::F16)));

  // device strided -> host (packed on the device)
  EXPECT_TRUE(same_bytes(gview.to(Device::cpu()), view.contiguous()));

  // device -> host strided destination, and host -> device strided destination
  Tensor host_big = Tensor::zeros({6, 10, 5}, DType::F32);
  Tensor host_dst = host_big.narrow(1, 2, 2);
  host_dst.copy_(gview);
  EXPECT_TRUE(same_bytes(host_dst, view.contiguous()));
  EXPECT_EQ(host_big.narrow(1, 0, 2).to_vector<float>(), std::vector<float>(60, 0.0f));

  Tensor dev_big = Tensor::zeros({5, 4, 6}, DType::BF16, kGpu);
  Tensor dev_dst = dev_big.permute({2, 1, 0}).narrow(1, 1, 2).permute({0, 2, 1});  // [6,5,2]
  const Tensor src = random_cpu({6, 5, 2}, DType::F32, 9, -1, 1);
  dev_dst.copy_(src);
  Tensor cpu_big = Tensor::zeros({5, 4, 6}, DType::BF16);
  Tensor cpu_dst = cpu_big.permute({2, 1, 0}).narrow(1, 1, 2).permute({0, 2, 1});
  cpu_dst.copy_(src);
  EXPECT_TRUE(same_bytes(dev_big, cpu_big));

  // device strided -> device strided
  Tensor dev_big2 = Tensor::zeros({5, 4, 6}, DType::F32, kGpu);
  Tensor d2 = dev_big2.permute({2, 1, 0}).narrow(1, 1, 2).permute({0, 2, 1});
  d2.copy_(dev_dst);
  Tensor cpu_big2 = Tensor::zeros({5, 4, 6}, DType::F32);
  Tensor c2 = cpu_big2.permute({2, 1, 0}).narrow(1, 1, 2).permute({0, 2, 1});
  c2.copy_(cpu_dst);
  EXPECT_TRUE(same_bytes(dev_big2, cpu_big2));
}

TEST(GpuCopy, EightDimensionsThatCannotMerge) {
  HG_REQUIRE_GPU();
  const Tensor base = random_cpu({2, 3, 2, 3, 2, 3, 2, 3}, DType::F32, 10, -1, 1);
  const Tensor reversed = base.permute({7, 6, 5, 4, 3, 2, 1, 0});
  EXPECT_TRUE(same_bytes(base.to(kGpu).permute({7, 6, 5, 4, 3, 2, 1, 0}).contiguous(),
                         reversed.contiguous()));
  EXPECT_TRUE(same_bytes(reversed.to(kGpu), reversed.contiguous()));
}

TEST(GpuCopy, OffsetsBeyondThirtyTwoBits) {
  HG_REQUIRE_GPU();
  // 3 GiB of u8: views at its end have element offsets above 2^31 (the 64-bit index kernels).
  const int64_t n = int64_t(1) << 30;
  Tensor big = Tensor::empty({3, n}, DType::U8, kGpu);
  big.fill_(7);
  Tensor tail = big.narrow(1, n - 4, 4);  // [3, 4], strides [n, 1]
  tail.fill_(9);
  EXPECT_EQ(tail.permute({1, 0}).contiguous().to_vector<int64_t>(), std::vector<int64_t>(12, 9));
  EXPECT_EQ(big.narrow(1, n - 5, 1).to_vector<int64_t>(), std::vector<int64_t>(3, 7));
  EXPECT_EQ(tail.to(DType::F32).to_vector<float>(), std::vector<float>(12, 9.0f));
}

TEST(GpuCopy, ContiguousSameDtypeAndBetweenDevices) {
  HG_REQUIRE_GPU();
  const Tensor src = random_cpu({12345}, DType::F32, 11, -5, 5);
  const Tensor g = src.to(kGpu);
  EXPECT_TRUE(same_bytes(g.clone(), src));  // device -> device memcpy
  EXPECT_TRUE(same_bytes(g, src));
#ifdef HOURGLASS_HAS_GPU
  if (gpu::list_devices().size() >= 2) {
    const Tensor other = g.to(Device::gpu(1));  // through the host
    EXPECT_EQ(other.device(), Device::gpu(1));
    EXPECT_TRUE(same_bytes(other, src));
    Tensor back = Tensor::empty({12345}, DType::BF16, kGpu);
    back.copy_(other);
    EXPECT_TRUE(same_bytes(back, src.to(DType::BF16)));
  }
#endif
}

// ---------------------------------------------------------------- fills

TEST(GpuFill, EveryDtypeContiguousStridedAndUnaligned) {
  HG_REQUIRE_GPU();
  for (DType dt : kAllDtypes) {
    // -1 (all bytes 0xFF in the integer dtypes: the memset path) is out of range for u8.
    const double minus_one = dt == DType::U8 ? 255.0 : -1.0;
    for (double value : {0.0, minus_one, 2.75, 100.0}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " fill " + std::to_string(value));
      const Shape shape = {37, 11};
      Tensor g = Tensor::full(shape, 5.0, dt, kGpu);
      Tensor c = Tensor::full(shape, 5.0, dt);
      EXPECT_TRUE(same_bytes(g, c));
      // strided view
      g.permute({1, 0}).narrow(0, 2, 5).fill_(value);
      c.permute({1, 0}).narrow(0, 2, 5).fill_(value);
      EXPECT_TRUE(same_bytes(g, c)) << "strided";
      // contiguous, starting and ending off a 16-byte boundary
      g.view({-1}).narrow(0, 3, 390).fill_(value);
      c.view({-1}).narrow(0, 3, 390).fill_(value);
      EXPECT_TRUE(same_bytes(g, c)) << "unaligned";
      // whole tensor
      g.fill_(value);
      c.fill_(value);
      EXPECT_TRUE(same_bytes(g, c)) << "whole";
    }
  }
}

TEST(GpuFill, ZeroAndItem) {
  HG_REQUIRE_GPU();
  Tensor g = random_cpu({64, 33}, DType::F32, 12, 1, 2).to(kGpu);
  g.narrow(1, 5, 7).zero_();
  const std::vector<float> v = g.to_vector<float>();
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t c = 0; c < 33; ++c) {
      const float x = v[size_t(r * 33 + c)];
      if (c >= 5 && c < 12)
        ASSERT_EQ(x, 0.0f) << r << "," << c;
      else
        ASSERT_GE(x, 1.0f) << r << "," << c;
    }
  g.zero_();
  EXPECT_EQ(g.to_vector<float>(), std::vector<float>(64 * 33, 0.0f));
  EXPECT_EQ(Tensor::zeros({3, 3}, DType::BF16, kGpu).to_vector<float>(),
            std::vector<float>(9, 0.0f));

  EXPECT_EQ(Tensor::scalar(3.5, DType::F32, kGpu).item(), 3.5);
  EXPECT_EQ(Tensor::scalar(-0.15625, DType::BF16, kGpu).item(), -0.15625);
  EXPECT_EQ(Tensor::scalar(123456789.0, DType::I64, kGpu).item(), 123456789.0);
  EXPECT_EQ(g.narrow(0, 7, 1).narrow(1, 2, 1).item(), 0.0);
}

// ---------------------------------------------------------------- pinned memory

#ifdef HOURGLASS_HAS_GPU
TEST(GpuPinned, BufferAndAsyncScalar) {
  HG_REQUIRE_GPU();
  gpu::PinnedBuffer buffer(1 << 20);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.bytes(), size_t(1) << 20);
  gpu::PinnedBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);

  gpu::AsyncScalar read;
  EXPECT_FALSE(read.started());
  EXPECT_FALSE(read.ready());
  {
    Tensor loss = Tensor::scalar(2.25, DType::F32, kGpu);
    read.start(loss);
  }  // the tensor may go away at once
  EXPECT_TRUE(read.started());
  EXPECT_EQ(read.value(), 2.25);
  EXPECT_TRUE(read.ready());
  read.start(Tensor::scalar(17, DType::I64, kGpu));
  EXPECT_EQ(read.value(), 17.0);
  read.start(Tensor::scalar(-0.5, DType::BF16, kGpu));
  EXPECT_EQ(read.value(), -0.5);
}

// The build-neutral read the trainer uses: the value at start(), whatever the tensor holds by
// the time it is taken; on the CPU the read is done by start().
TEST(GpuPinned, ScalarReadTakesTheValueTheDeviceHadReached) {
  ScalarRead cpu;
  EXPECT_FALSE(cpu.ready());
  Tensor h = Tensor::scalar(1.5, DType::F32, Device::cpu());
  cpu.start(h);
  h.fill_(9.0);
  EXPECT_TRUE(cpu.ready());
  EXPECT_EQ(cpu.value(), 1.5);
  HG_REQUIRE_GPU();
  ScalarRead read;
  Tensor sum = Tensor::scalar(3.0, DType::F32, kGpu);
  read.start(sum);
  sum.fill_(7.0);  // queued behind the read
  EXPECT_EQ(read.value(), 3.0);
  EXPECT_TRUE(read.ready());
  EXPECT_EQ(sum.item(), 7.0);
  read.start(sum);
  cpu.start(sum);  // a GPU tensor through the same read
  EXPECT_EQ(read.value(), 7.0);
  EXPECT_EQ(cpu.value(), 7.0);
}

TEST(GpuPinned, CopyFromPinnedMemoryReturnsOnceTheSourceWasRead) {
  HG_REQUIRE_GPU();
  constexpr int64_t n = 1 << 22;
  auto pinned = std::make_shared<gpu::PinnedBuffer>(size_t(n) * sizeof(float));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(pinned->data(), pinned->bytes(), Device::cpu(), pinned);
  impl->shape = {n};
  impl->strides = {1};
  Tensor host(impl);
  host.fill_(4.0);
  const Tensor g = host.to(kGpu);
  host.fill_(-1.0);  // after copy_ returned: must not reach the device copy
  const std::vector<float> v = g.to_vector<float>();
  EXPECT_EQ(v.front(), 4.0f);
  EXPECT_EQ(v.back(), 4.0f);
}

// ---------------------------------------------------------------- discovery

TEST(GpuDeviceInfo, ListsTheVisibleDevices) {
  HG_REQUIRE_GPU();
  const std::vector<gpu::GpuDeviceInfo> devices = gpu::list_devices();
  ASSERT_FALSE(devices.empty());
  for (size_t i = 0; i < devices.size(); ++i) {
    const gpu::GpuDeviceInfo& d = devices[i];
    EXPECT_EQ(d.index, int(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_TRUE(d.arch.rfind("sm_", 0) == 0 || d.arch.rfind("gfx", 0) == 0) << d.arch;
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.memory_total, size_t(1) << 30);
    EXPECT_GT(d.memory_free, 0u);
    EXPECT_LE(d.memory_free, d.memory_total);
    EXPECT_GT(d.l2_bytes, 0u);
    EXPECT_GT(d.clock_mhz, 100);
    EXPECT_GT(d.memory_bus_bits, 0);
    EXPECT_GT(d.compute_major, 0);
  }
  const gpu::GpuRuntimeInfo rt = gpu::runtime_info();
  EXPECT_GT(rt.driver_version, 0);
  EXPECT_GT(rt.runtime_version, 0);
  EXPECT_TRUE(rt.device_query_error.empty()) << rt.device_query_error;
  EXPECT_FALSE(rt.driver_too_old);
}
#endif

}  // namespace
}  // namespace hg
