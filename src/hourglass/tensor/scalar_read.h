// Reads the value of a one-element tensor without draining the device's queue: start() queues
// the read behind the work issued so far (on a GPU a copy into pinned memory and an event,
// gpu::AsyncScalar), and the value is taken later, once the device has got there, while the
// host goes on issuing work. On the CPU, whose ops have run when they return, start() reads
// the value at once. Build-neutral: the trainer uses it without knowing the GPU runtime.
#pragma once

#include <memory>

#include "hourglass/tensor/tensor.h"

namespace hg {

namespace gpu {
class AsyncScalar;
}

class ScalarRead {
 public:
  ScalarRead();
  ~ScalarRead();
  ScalarRead(const ScalarRead&) = delete;
  ScalarRead& operator=(const ScalarRead&) = delete;

  // Starts reading `scalar` (one element, any dtype and device); replaces an earlier read.
  void start(const Tensor& scalar);
  // A read has been started.
  bool started() const { return started_; }
  // The started read has finished (never waits; false when none was started).
  bool ready() const;
  // The started read's value as a double; waits for it when it has not finished.
  double value() const;

 private:
  bool started_ = false;
  double host_value_ = 0;                  // a CPU tensor's value, read by start()
  std::unique_ptr<gpu::AsyncScalar> gpu_;  // a GPU tensor's read in flight
};

}  // namespace hg
