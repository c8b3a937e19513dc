#include "hourglass/data/image_size_ramp.h"

#include <algorithm>
#include <cmath>

namespace hg::data {

int64_t ImageSizeRamp::side_at(int64_t epoch) const {
  if (!enabled()) return end_size;
  if (epoch <= first_epoch) return start_size;
  if (epoch >= last_epoch) return end_size;
  // np.interp: slope * (x - x0) + y0; then np.round, halves to even (the default rounding mode).
  const double slope = double(end_size - start_size) / double(last_epoch - first_epoch);
  const double side = slope * double(epoch - first_epoch) + double(start_size);
  const int64_t rounded = int64_t(std::nearbyint(side / double(multiple))) * multiple;
  return std::clamp(rounded, std::min(start_size, end_size), std::max(start_size, end_size));
}

std::vector<int64_t> ImageSizeRamp::sides(int64_t epochs) const {
  std::vector<int64_t> out;
  for (int64_t e = 0; e < std::max<int64_t>(epochs, 1); ++e)
    if (std::find(out.begin(), out.end(), side_at(e)) == out.end()) out.push_back(side_at(e));
  return out;
}

}  // namespace hg::data
