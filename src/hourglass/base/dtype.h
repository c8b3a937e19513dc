// Element types. A tensor's dtype is a runtime property; kernels switch on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hg {

enum class DType : uint8_t { F32, F64, F16, BF16, I8, I32, I64, U8 };

size_t dtype_size(DType dtype);
// "f32", "f64", "f16", "bf16", "i8", "i32", "i64", "u8".
std::string_view dtype_name(DType dtype);
// Accepts the names above; throws InvalidInput naming the text otherwise.
DType dtype_from_name(std::string_view name);
bool is_floating(DType dtype);

// C++ type <-> DType for the types that have a native C++ representation.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = DType::I8;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::U8;
};
struct Bf16;  // base/half.h
template <>
struct dtype_of<Bf16> {
  static constexpr DType value = DType::BF16;
};
template <typename T>
inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace hg
