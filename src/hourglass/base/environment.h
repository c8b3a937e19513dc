// The one place the library reads environment variables. Only settings that leave a run's
// numbers and memory alone are read from the environment: log verbosity (HOURGLASS_CUDNN_LOG,
// HOURGLASS_CUBLASLT_LOG, NO_COLOR), paths (HOURGLASS_CACHE_DIR, XDG_CACHE_HOME, HOME,
// HOURGLASS_CUPTI_LIBRARY, the machine readings' override files HOURGLASS_NVML_LIBRARY,
// HOURGLASS_AMD_SMI_LIBRARY and HOURGLASS_ROCM_SMI_LIBRARY), start-up work
// (HOURGLASS_WARM_LIBRARIES, HOURGLASS_PREFETCH_LIBRARIES) and the launch protocol of
// `hourglass launch` (dist/launch_env.h). Everything that changes what a run computes is a
// config key (the [engine] table, train/config/engine_config.h). CTest's no_hidden_switches checks
// that nothing else in src/ calls getenv.
#pragma once

namespace hg::env {

// The variable's value, or nullptr when it is unset.
const char* get(const char* name);

// The variable as a whole number (a log level): `fallback` when unset, empty or not a number.
int level(const char* name, int fallback);

// False only when the variable is "0" (a start-up step someone turns off); true when unset.
bool on_unless_zero(const char* name);

}  // namespace hg::env
