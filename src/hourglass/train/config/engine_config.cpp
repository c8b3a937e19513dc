#include "hourglass/train/config/engine_config.h"

#include <array>

#include <fmt/format.h>

#include "hourglass/base/error.h"

namespace hg::train {

namespace {

using S = ops::EngineSettings;
constexpr std::array<EngineKey, 8> kEngineKeys{{
    {"fused_batch_norm", &S::fused_batch_norm},
    {"fused_shortcut_batch_norm", &S::fused_shortcut_batch_norm},
    {"fused_gradient_sum", &S::fused_gradient_sum},
    {"batched_leaf_gradients", &S::batched_leaf_gradients},
    {"arena_weight_cast", &S::arena_weight_cast},
    {"conv_space_to_depth", &S::conv_space_to_depth},
    {"conv_stem_pixel_pairs", &S::conv_stem_pixel_pairs},
    {"relu_mask_bits", &S::relu_mask_bits},
}};

const char* text(bool b) { return b ? "true" : "false"; }

}  // namespace

std::span<const EngineKey> engine_keys() { return kEngineKeys; }

ops::EngineSettings parse_engine_config(const Config& config) {
  ops::EngineSettings e;
  for (const EngineKey& k : kEngineKeys)
    e.*k.field = config.get_bool(fmt::format("engine.{}", k.name), e.*k.field);
  return e;
}

void apply_engine_assignment(ops::EngineSettings& engine, const std::string& assignment,
                             const std::string& flag) {
  std::string names;
  for (const EngineKey& k : kEngineKeys)
    names += fmt::format("{}{}", names.empty() ? "" : ", ", k.name);
  const size_t eq = assignment.find('=');
  const std::string name = assignment.substr(0, eq);
  const std::string value = eq == std::string::npos ? "" : assignment.substr(eq + 1);
  for (const EngineKey& k : kEngineKeys) {
    if (name != k.name) continue;
    if (value != "true" && value != "false")
      throw_invalid(fmt::format("{} {}: the value must be true or false", flag, assignment),
                    fmt::format("write {} {}=false (or =true)", flag, k.name));
    engine.*k.field = value == "true";
    return;
  }
  throw_invalid(fmt::format("{} {}: '{}' is not an engine setting", flag, assignment, name),
                fmt::format("write {} NAME=true|false with NAME one of: {}", flag, names));
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
