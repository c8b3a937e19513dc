#include "hourglass/obs/metric_sinks.h"

namespace hg::obs {

void TensorBoardSink::write(int64_t step, const MetricValues& values) {
  MetricValues scalars;
  scalars.reserve(values.size());
  for (const auto& [name, value] : values)
    if (!skip_.contains(name)) scalars.emplace_back(prefix_ + name, value);
  writer_->scalars(step, scalars);
}

}  // namespace hg::obs
