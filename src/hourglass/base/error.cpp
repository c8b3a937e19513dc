#include "hourglass/base/error.h"

namespace hg {

void throw_internal(const char* expr, const char* file, int line, const std::string& msg) {
  std::string text = fmt::format("internal error: {} failed at {}:{}", expr, file, line);
  if (!msg.empty()) text += ": " + msg;
  throw Error(ErrorKind::Internal, text, "this is a bug in hourglass; please report it");
}

}  // namespace hg
