#include "hourglass/ops/deferred_gradients.h"

#include <unordered_set>
#include <vector>

#include "hourglass/base/log.h"
#include "hourglass/ops/backend.h"

namespace hg::ops {

namespace {
struct DeferredState {
  int scopes = 0;
  std::unordered_set<const void*> pointers;  // data pointers of the deferred gradients
  std::vector<Device> devices;               // devices with deferred work, each once
};
thread_local DeferredState t_deferred;
}  // namespace

DeferredGradientsScope::DeferredGradientsScope() { ++t_deferred.scopes; }

DeferredGradientsScope::~DeferredGradientsScope() {
  try {
    join_deferred_gradients();
  } catch (const std::exception& e) {
    HG_LOG_ERROR("joining the backward's side-stream work failed: {}", e.what());
  }
  --t_deferred.scopes;
}

bool deferred_gradients_allowed() { return t_deferred.scopes > 0; }

void note_deferred_gradient(const Tensor& t) {
  HG_ASSERT(t_deferred.scopes > 0, "a gradient was deferred outside a DeferredGradientsScope");
  if (t.numel() == 0) return;
  t_deferred.pointers.insert(t.data_ptr());
  for (const Device& d : t_deferred.devices)
    if (d == t.device()) return;
  t_deferred.devices.push_back(t.device());
}

bool is_deferred_gradient(const Tensor& t) {
  return !t_deferred.pointers.empty() && t.defined() && t.numel() > 0 &&
         t_deferred.pointers.count(t.data_ptr()) > 0;
}

void join_deferred_gradients() {
  // Cleared first: a failed join leaves nothing that a later one would retry forever.
  std::vector<Device> devices;
  devices.swap(t_deferred.devices);
  t_deferred.pointers.clear();
  for (const Device& d : devices) backend_for(d).join_side_work(d);
}

void wait_for_gradient(const Tensor& t) {
  if (is_deferred_gradient(t)) join_deferred_gradients();
}

}  // namespace hg::ops
