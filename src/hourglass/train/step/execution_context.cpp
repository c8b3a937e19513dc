#include "hourglass/train/step/execution_context.h"

#include "hourglass/train/config/run_config.h"

namespace hg::train {

ExecutionContext ExecutionContext::from_run(const RunConfig& run) {
  ExecutionContext c;
  c.device = run.device;
  c.precision = run.precision;
  c.deterministic = run.deterministic;
  c.seed = run.seed;
  c.engine = run.engine;
  c.validated();
  return c;
}

const ExecutionContext& ExecutionContext::validated() const {
  optim::require_device_for(precision, device);
  return *this;
}

}  // namespace hg::train
