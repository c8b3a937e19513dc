#include "hourglass/ops/math_settings.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hourglass/base/error.h"

namespace hg::ops {

namespace {
thread_local MathSettings t_settings;

// `name`=0 turns a fusion or rewrite off (to compare against what it replaces, or to debug);
// unset or anything else leaves it on.
bool on_unless_environment_says_0(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// `name`=1 turns on a fusion that is off by default (one measured slower than what it
// replaces, kept to be worked on).
bool on_if_environment_says_1(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

std::atomic<bool>& fused_batch_norm_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_FUSED_BN")};
  return flag;
}

std::atomic<bool>& fused_gradient_sum_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_FUSED_GRAD_SUM")};
  return flag;
}

std::atomic<bool>& fused_shortcut_batch_norm_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_FUSED_SHORTCUT_BN")};
  return flag;
}

std::atomic<bool>& batched_leaf_gradients_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_BATCHED_LEAF_GRADS")};
  return flag;
}

std::atomic<bool>& conv_space_to_depth_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_CONV_SPACE_TO_DEPTH")};
  return flag;
}

std::atomic<bool>& conv_stem_pixel_pairs_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_CONV_STEM_PAIRS")};
  return flag;
}

std::atomic<bool>& fused_stem_pool_flag() {
  static std::atomic<bool> flag{on_if_environment_says_1("HOURGLASS_FUSED_STEM_POOL")};
  return flag;
}

std::atomic<bool>& arena_weight_cast_flag() {
  static std::atomic<bool> flag{on_unless_environment_says_0("HOURGLASS_ARENA_CAST")};
  return flag;
}
std::atomic<int>& side_stream_depth_value() {
  static std::atomic<int> depth{side_stream_depth_from(std::getenv("HOURGLASS_WGRAD_SIDE_STREAM"))};
  return depth;
}

}  // namespace

const MathSettings& math_settings() { return t_settings; }

MathSettingsScope::MathSettingsScope(const MathSettings& settings) : previous_(t_settings) {
  t_settings = settings;
}

MathSettingsScope::~MathSettingsScope() { t_settings = previous_; }

void set_allow_tf32(bool allow) { t_settings.allow_tf32 = allow; }
bool allow_tf32() { return t_settings.allow_tf32; }
void set_deterministic(bool on) { t_settings.deterministic = on; }
bool deterministic() { return t_settings.deterministic; }

void set_fused_batch_norm(bool on) { fused_batch_norm_flag().store(on, std::memory_order_relaxed); }
bool fused_batch_norm() { return fused_batch_norm_flag().load(std::memory_order_relaxed); }

void set_fused_gradient_sum(bool on) {
  fused_gradient_sum_flag().store(on, std::memory_order_relaxed);
}
bool fused_gradient_sum() { return fused_gradient_sum_flag().load(std::memory_order_relaxed); }

void set_fused_shortcut_batch_norm(bool on) {
  fused_shortcut_batch_norm_flag().store(on, std::memory_order_relaxed);
}
bool fused_shortcut_batch_norm() {
  return fused_shortcut_batch_norm_flag().load(std::memory_order_relaxed);
}

void set_conv_space_to_depth(bool on) {
  conv_space_to_depth_flag().store(on, std::memory_order_relaxed);
}
bool conv_space_to_depth() { return conv_space_to_depth_flag().load(std::memory_order_relaxed); }

void set_conv_stem_pixel_pairs(bool on) {
  conv_stem_pixel_pairs_flag().store(on, std::memory_order_relaxed);
}
bool conv_stem_pixel_pairs() {
  return conv_stem_pixel_pairs_flag().load(std::memory_order_relaxed);
}

void set_fused_stem_pool(bool on) { fused_stem_pool_flag().store(on, std::memory_order_relaxed); }
bool fused_stem_pool() { return fused_stem_pool_flag().load(std::memory_order_relaxed); }

void set_arena_weight_cast(bool on) {
  arena_weight_cast_flag().store(on, std::memory_order_relaxed);
}
bool arena_weight_cast() { return arena_weight_cast_flag().load(std::memory_order_relaxed); }

void set_side_stream_depth(int depth) {
  HG_CHECK(depth >= 0 && depth <= kMaxSideStreamDepth,
           "side stream depth {} is out of range: 0 (off) to {}", depth, kMaxSideStreamDepth);
  side_stream_depth_value().store(depth, std::memory_order_relaxed);
}
int side_stream_depth() { return side_stream_depth_value().load(std::memory_order_relaxed); }

int side_stream_depth_from(const char* value) {
  if (value == nullptr) return kDefaultSideStreamDepth;
  const std::string s(value);
  const bool digit = s.size() == 1 && s[0] >= '0' && s[0] <= '0' + kMaxSideStreamDepth;
  HG_CHECK(digit,
           "HOURGLASS_WGRAD_SIDE_STREAM=\"{}\" is not a depth: set it to 0 (weight gradients on "
           "the main stream) up to {} (that many convolutions' weight gradients in flight on a "
           "side stream), or unset it for the default {}",
           s, kMaxSideStreamDepth, kDefaultSideStreamDepth);
  return s[0] - '0';
}

void set_batched_leaf_gradients(bool on) {
  batched_leaf_gradients_flag().store(on, std::memory_order_relaxed);
}
bool batched_leaf_gradients() {
  return batched_leaf_gradients_flag().load(std::memory_order_relaxed);
}

}  // namespace hg::ops
