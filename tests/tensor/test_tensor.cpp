#include <gtest/gtest.h>

#include <vector>

#include "hourglass/base/half.h"
#include "hourglass/tensor/tensor.h"
#include "support/compare.h"

namespace hg {
namespace {

TEST(Tensor, CreationAndProperties) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.describe(), "f32[2,3,4] cpu");
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor v = t.view({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  v.data<float>()[0] = 42;
  EXPECT_EQ(t.data<float>()[0], 42);
  Tensor col = t.narrow(1, 1, 2);
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  Tensor tr = t.permute({1, 0});
  EXPECT_EQ(tr.contiguous().to_vector<float>(), (std::vector<float>{42, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.flatten(0).shape(), (Shape{6}));
}

TEST(Tensor, DtypeConversionRoundTrips) {
  Tensor t = Tensor::from_vector<float>({1.5f, -2.25f, 3.0f, 65504.0f}, {4});
  for (DType dt : {DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    Tensor back = t.to(dt).to(DType::F32);
    auto v = back.to_vector<float>();
    EXPECT_EQ(v[0], dt == DType::I32 || dt == DType::I64 ? 1.0f : 1.5f) << dtype_name(dt);
  }
  EXPECT_EQ(f16_to_float(float_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(70000.0f))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);  // ties to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(f16_to_float(float_to_f16(5.96e-8f)), 5.9604645e-8f);  // smallest subnormal
}

TEST(Tensor, MismatchErrorsNameOperands) {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({3, 2});
  try {
    check_same_shape("add", a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("add"), std::string::npos);
    EXPECT_NE(e.message().find("f32[2,3]"), std::string::npos);
    EXPECT_NE(e.message().find("f32[3,2]"), std::string::npos);
  }
  EXPECT_THROW(a.view({4, -1}), Error);
  EXPECT_THROW(a.data<double>(), Error);
  EXPECT_THROW(Device::parse("tpu"), Error);
}

TEST(Tensor, AllocatorLimitRaisesOutOfMemory) {
  Allocator& cpu = allocator_for(Device::cpu());
  const size_t before = cpu.stats().in_use;
  cpu.set_limit(before + (1 << 20));
  try {
    Tensor big = Tensor::empty({1 << 20});  // 4 MiB > 1 MiB headroom
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(e.message().find("limit"), std::string::npos);
  }
  cpu.set_limit(0);
  {
    Tensor ok = Tensor::empty({1 << 20});
    EXPECT_GE(cpu.stats().in_use, before + (4u << 20));
  }
  EXPECT_EQ(cpu.stats().in_use, before);
}

// Optimizer::zero_grad's zero fill: the whole storage goes back to the allocator, the views keep
// their places, and the next access takes memory back, zeroed; a tensor that is only part of
// its storage is zeroed in place instead.
TEST(Tensor, AReleasedStorageHoldsNoMemoryAndReadsAsZeros) {
  Allocator& cpu = allocator_for(Device::cpu());
  Tensor t = Tensor::full({1000}, 3.0);
  const Tensor view = t.narrow(0, 10, 5);
  const size_t held = cpu.stats().in_use;
  t.zero_releasing_memory_();
  EXPECT_LE(cpu.stats().in_use + 4000, held);
  EXPECT_EQ(view.to_vector<float>(), std::vector<float>(5, 0.0f));  // taken back, zeroed
  EXPECT_EQ(cpu.stats().in_use, held);
  t.fill_(2.0);
  EXPECT_EQ(view.to_vector<float>(), std::vector<float>(5, 2.0f));
  Tensor part = t.narrow(0, 0, 10);
  part.zero_releasing_memory_();
  EXPECT_EQ(cpu.stats().in_use, held);
  EXPECT_EQ(t.to_vector<float>()[9], 0.0f);
  EXPECT_EQ(t.to_vector<float>()[10], 2.0f);
}

}  // namespace
}  // namespace hg
