#include "hourglass/base/dtype.h"

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I8: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  HG_ASSERT(false, "bad dtype {}", int(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I8: return "i8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
  }
  HG_ASSERT(false, "bad dtype {}", int(dtype));
}

DType dtype_from_name(std::string_view name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I32,
                  DType::I64, DType::U8})
    if (dtype_name(d) == name) return d;
  throw_invalid(fmt::format("unknown dtype '{}'", untrusted_excerpt(name)),
                "use one of f32, f64, f16, bf16, i8, i32, i64, u8");
}

bool is_floating(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

}  // namespace hg
