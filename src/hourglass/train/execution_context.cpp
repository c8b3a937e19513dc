#include "hourglass/train/execution_context.h"

#include "hourglass/train/run_config.h"

namespace hg::train {

ExecutionContext ExecutionContext::from_run(const RunConfig& run) {
  ExecutionContext c;
  c.device = run.device;
  c.precision = run.precision;
  c.deterministic = run.deterministic;
  c.seed = run.seed;
  c.validated();
  return c;
}

const ExecutionContext& ExecutionContext::validated() const {
  if (device.is_cpu() && precision != optim::Precision::FP32)
    throw_invalid(fmt::format("precision = \"{}\" needs a GPU, but the device is {}",
                              optim::precision_name(precision), device.str()),
                  "use precision = \"fp32\" on the cpu, or device = \"gpu:0\"");
  return *this;
}

}  // namespace hg::train
