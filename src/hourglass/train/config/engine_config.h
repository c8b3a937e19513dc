// A run's [engine] table: how the engine computes where it has more than one way
// (ops::EngineSettings, ops/math_settings.h). One boolean key per setting, each defaulting to
// the engine's default. The resolved values are written into the run's config.toml and, with
// it, into every checkpoint (its "hourglass.config" metadata); a resumed run takes the
// checkpoint's, `eval` reports and uses them.
#pragma once

#include <span>
#include <string>

#include "hourglass/base/config.h"
#include "hourglass/ops/math_settings.h"

namespace hg::train {

struct EngineKey {
  const char* name;  // the key under [engine]
  bool ops::EngineSettings::*field;
};
// Every [engine] key, in the order config.toml and reports list them.
std::span<const EngineKey> engine_keys();

// Reads the [engine] keys of `config` (engine.<name>, booleans; errors name the key and the
// config's source; a key naming no setting is refused with the list). Keys left out take the
// defaults.
ops::EngineSettings parse_engine_config(const Config& config);

// "fused_batch_norm = true, fused_shortcut_batch_norm = true, ...": every key, in order.
std::string engine_summary(const ops::EngineSettings& engine);

// The keys where `a` and `b` differ, as "engine.<name> = <a's> (<b_name> says <b's>)", joined
// by "; ", or "" when they agree.
std::string describe_engine_difference(const ops::EngineSettings& a, const ops::EngineSettings& b,
                                       const std::string& b_name);

// `config` with every [engine] key set to `engine`'s value (what config.toml and the
// checkpoints record).
Config with_engine_keys(Config config, const ops::EngineSettings& engine);

}  // namespace hg::train
