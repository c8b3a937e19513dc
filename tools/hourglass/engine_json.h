// The [engine] settings as commands print them in --json output: one object, a boolean per
// key in engine_keys()'s order ({"fused_batch_norm": true, ...}).
#pragma once

#include <nlohmann/json.hpp>

#include "hourglass/train/config/engine_config.h"

namespace hg::cli {

inline nlohmann::ordered_json engine_json(const ops::EngineSettings& engine) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const train::EngineKey& k : train::engine_keys()) out[k.name] = engine.*k.field;
  return out;
}

}  // namespace hg::cli
