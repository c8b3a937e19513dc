#include "hourglass/base/log.h"

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off")
    throw_invalid(fmt::format("unknown log level '{}'", untrusted_excerpt(level)),
                  "use one of debug, info, warn, error, off");
  spdlog::set_level(parsed);
}

}  // namespace hg
