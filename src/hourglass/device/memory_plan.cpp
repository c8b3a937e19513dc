#include "hourglass/device/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "hourglass/base/error.h"

namespace hg {

namespace {

// Places the requests in `order`, each into the smallest gap between the requests already
// placed that live beside it where it fits, else above them all.
MemoryPlan place(const std::vector<TracedRequest>& requests, const std::vector<size_t>& order) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> beside;  // [offset, end) of those living beside one
  for (size_t r : order) {
    const TracedRequest& q = requests[r];
    beside.clear();
    for (size_t p : placed)
      if (requests[p].live_together(q))
        beside.emplace_back(plan.offsets[p], plan.offsets[p] + requests[p].size);
    std::sort(beside.begin(), beside.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, top = 0;
    for (const auto& [begin, end] : beside) {
      if (begin > top && begin - top >= q.size && begin - top < best_gap) {
        best = top;
        best_gap = begin - top;
      }
      top = std::max(top, end);
    }
    plan.offsets[r] = best != SIZE_MAX ? best : top;
    plan.bytes = std::max(plan.bytes, plan.offsets[r] + q.size);
    placed.push_back(r);
  }
  return plan;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<TracedRequest>& requests, size_t alignment) {
  HG_ASSERT(alignment > 0, "plan_memory: alignment 0");
  for (const TracedRequest& q : requests)
    HG_ASSERT(q.size % alignment == 0, "plan_memory: size {} is not a multiple of {}", q.size,
              alignment);
  // Three orders, the smallest block kept: largest first; longest-lived first; as made.
  std::vector<size_t> by_size(requests.size());
  std::iota(by_size.begin(), by_size.end(), size_t(0));
  std::vector<size_t> by_life = by_size, as_made = by_size;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return requests[a].size > requests[b].size; });
  auto life = [&](size_t i) {
    return requests[i].freed == TracedRequest::kNeverFreed ? TracedRequest::kNeverFreed
                                                           : requests[i].freed - requests[i].made;
  };
  std::stable_sort(by_life.begin(), by_life.end(), [&](size_t a, size_t b) {
    return life(a) != life(b) ? life(a) > life(b) : requests[a].size > requests[b].size;
  });
  MemoryPlan plan = place(requests, by_size);
  for (const std::vector<size_t>* order : {&by_life, &as_made}) {
    MemoryPlan other = place(requests, *order);
    if (other.bytes < plan.bytes) plan = std::move(other);
  }
  plan.most_held = peak_of(requests).bytes;
  return plan;
}

MemoryPeak peak_of(const std::vector<TracedRequest>& requests) {
  // A sweep over the events in order (each event is one request or one free).
  std::vector<std::pair<int64_t, int64_t>> changes;  // event, +size or -size
  for (const TracedRequest& q : requests) {
    changes.emplace_back(q.made, int64_t(q.size));
    if (q.freed != TracedRequest::kNeverFreed) changes.emplace_back(q.freed, -int64_t(q.size));
  }
  std::sort(changes.begin(), changes.end());
  MemoryPeak peak;
  int64_t held = 0;
  for (const auto& [event, delta] : changes) {
    held += delta;
    if (size_t(held) > peak.bytes) {
      peak.bytes = size_t(held);
      peak.event = event;
    }
  }
  if (peak.bytes == 0) return peak;
  for (size_t k = 0; k < requests.size(); ++k)
    if (requests[k].made <= peak.event && peak.event < requests[k].freed) peak.live.push_back(k);
  return peak;
}

}  // namespace hg
