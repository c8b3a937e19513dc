#include "hourglass/ops/math_settings.h"

namespace hg::ops {

namespace {
thread_local MathSettings t_settings;

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

}  // namespace hg::ops
