// `hourglass train --print-config`'s output, for every kind of run: the config as config.toml
// will hold it (`shown`, the [engine] table with every key resolved) and the resolved settings
// that decide the trajectory, with their hash; as TOML with the resolved settings as comments,
// or with --json as one object.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "hourglass/base/config.h"
#include "hourglass/train/config/run_config.h"

namespace hg::cli {

inline void print_config(const Config& shown, const std::string& resolved, bool json) {
  if (json) {
    const nlohmann::json out = {{"config", shown.to_toml()},
                                {"resolved", resolved},
                                {"config_hash", train::config_hash(resolved)}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  // Still TOML: the resolved settings are comments.
  std::printf("%s\n# Resolved (defaults filled in; what decides the trajectory, hash %s):\n",
              shown.to_toml().c_str(), train::config_hash(resolved).c_str());
  size_t start = 0;
  while (start < resolved.size()) {
    const size_t end = resolved.find('\n', start);
    std::printf("# %s\n", resolved.substr(start, end - start).c_str());
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace hg::cli
