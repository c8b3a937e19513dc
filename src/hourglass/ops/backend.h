// The interface every backend implements: one pure virtual method per HG_OP of the list
// (op_list.h), with the op's parameters, called by the op's body in ops.cpp after its checks.
// Methods may assume what the body checked (shapes, a common device, contiguous inputs).
// backend/ provides the implementations and backend_for().
#pragma once

#include "hourglass/ops/ops.h"

namespace hg {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Makes ready now what the first op on `device` would otherwise set up (on a GPU: the
  // runtime's context and stream, the dnn and blas libraries' handles), so that a caller can
  // overlap that start-up with other work on another thread. Thread-safe; idempotent.
  virtual void prepare(Device device) { (void)device; }
  // Why a model cannot compute in `dtype` (autocast's bf16 or f16) on this backend's devices,
  // naming what is missing; empty when it can.
  virtual std::string compute_dtype_problem(DType dtype) const {
    (void)dtype;
    return {};
  }

  // One method per HG_OP of the list (op_list.h).
#define HG_OP(ret, name, params, ...) virtual ret name params = 0;
#include "hourglass/ops/op_list.h"
};

// The backend that runs ops on `device`; throws InvalidInput when none is built for it.
Backend& backend_for(Device device);

}  // namespace hg
