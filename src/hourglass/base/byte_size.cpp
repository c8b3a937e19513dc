#include "hourglass/base/byte_size.h"

#include <cmath>
#include <cstdlib>

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

size_t parse_byte_size(const std::string& text, const std::string& what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "KiB")
    scale = 1024.0;
  else if (unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB" || unit == "kB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "TB")
    scale = 1e12;
  if (end == begin || scale == 0 || !std::isfinite(value) || value < 0)
    throw_invalid(fmt::format("{}: '{}' is not a size", what, untrusted_excerpt(text)),
                  "write a number with a unit, e.g. 4GiB, 512MiB or 2GB");
  return size_t(std::llround(value * scale));
}

std::string format_mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", double(bytes) / double(size_t(1) << 20));
}

}  // namespace hg
