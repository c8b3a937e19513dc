// Gradients an op may return before the device has written them. A GPU convolution's backward
// can issue its weight gradient on a side stream (backend/gpu/side_stream.h) and return at once,
// so that the device computes it beside the rest of backward; the tensor is then "deferred":
// nothing on the device's main stream may read it until the main stream has waited for the side
// stream's work (a join). Ops defer only while a DeferredGradientsScope is open on the calling
// thread: its opener (the tape's backward) promises to call wait_for_gradient() on every
// gradient before an op reads it, and the scope joins everything when it closes. The state is the
// calling thread's.
#pragma once

#include "hourglass/tensor/tensor.h"

namespace hg::ops {

class DeferredGradientsScope {
 public:
  DeferredGradientsScope();
  // Joins every deferred gradient (an error here is logged, not thrown).
  ~DeferredGradientsScope();
  DeferredGradientsScope(const DeferredGradientsScope&) = delete;
  DeferredGradientsScope& operator=(const DeferredGradientsScope&) = delete;
};

// Whether a DeferredGradientsScope is open on the calling thread.
bool deferred_gradients_allowed();

// Backends: `t`, about to be returned, is written by work the main stream has not waited for.
void note_deferred_gradient(const Tensor& t);

// Whether `t` may still be being written: a tensor starting where `t` starts was noted and not
// joined since.
bool is_deferred_gradient(const Tensor& t);

// Makes every device's main stream wait for the deferred work issued from this thread.
void join_deferred_gradients();

// join_deferred_gradients() if `t` is deferred: call before an op reads `t`.
void wait_for_gradient(const Tensor& t);

}  // namespace hg::ops
