// Logging through spdlog: one logger named "hourglass", level set from the CLI.
#pragma once

#include <spdlog/spdlog.h>

namespace hg {

// Sets the global level from "debug", "info", "warn", "error" or "off".
void set_log_level(const std::string& level);

}  // namespace hg

#define HG_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define HG_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define HG_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define HG_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
