#include "hourglass/train/config/engine_config.h"

#include <array>

#include <fmt/format.h>

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::train {

namespace {

using S = ops::EngineSettings;
constexpr std::array<EngineKey, 9> kEngineKeys{{
    {"fused_batch_norm", &S::fused_batch_norm},
    {"fused_shortcut_batch_norm", &S::fused_shortcut_batch_norm},
    {"fused_gradient_sum", &S::fused_gradient_sum},
    {"batched_leaf_gradients", &S::batched_leaf_gradients},
    {"arena_weight_cast", &S::arena_weight_cast},
    {"conv_space_to_depth", &S::conv_space_to_depth},
    {"conv_stem_pixel_pairs", &S::conv_stem_pixel_pairs},
    {"relu_mask_bits", &S::relu_mask_bits},
    {"release_gradients", &S::release_gradients},
}};

const char* text(bool b) { return b ? "true" : "false"; }

}  // namespace

std::span<const EngineKey> engine_keys() { return kEngineKeys; }

ops::EngineSettings parse_engine_config(const Config& config) {
  // A key under [engine] that names no setting is refused here, listing the settings (a
  // misspelling would otherwise leave the default in force).
  for (const std::string& key : config.keys()) {
    if (key.rfind("engine.", 0) != 0) continue;
    const std::string name = key.substr(7);
    bool known = false;
    for (const EngineKey& k : kEngineKeys) known = known || name == k.name;
    if (known) continue;
    std::string names;
    for (const EngineKey& k : kEngineKeys)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", k.name);
    throw_invalid(fmt::format("config key '{}' {}: '{}' is not an engine setting", key,
                              config.origin(key), untrusted_excerpt(name)),
                  fmt::format("use one of: {}", names));
  }
  ops::EngineSettings e;
  for (const EngineKey& k : kEngineKeys)
    e.*k.field = config.get_bool(fmt::format("engine.{}", k.name), e.*k.field);
  return e;
}

std::string engine_summary(const ops::EngineSettings& engine) {
  std::string out;
  for (const EngineKey& k : kEngineKeys)
    out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", k.name, text(engine.*k.field));
  return out;
}

std::string describe_engine_difference(const ops::EngineSettings& a, const ops::EngineSettings& b,
                                       const std::string& b_name) {
  std::string out;
  for (const EngineKey& k : kEngineKeys)
    if (a.*k.field != b.*k.field)
      out += fmt::format("{}engine.{} = {} ({} says {})", out.empty() ? "" : "; ", k.name,
                         text(a.*k.field), b_name, text(b.*k.field));
  return out;
}

Config with_engine_keys(Config config, const ops::EngineSettings& engine) {
  for (const EngineKey& k : kEngineKeys)
    config.set_override(fmt::format("engine.{}={}", k.name, text(engine.*k.field)));
  return config;
}

}  // namespace hg::train
