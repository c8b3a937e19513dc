// Dynamic loss scaling on the GPU (loss_scale_kernels.cu): the state tensor stays on the device
// and is only ever touched by kernels, so a training step with loss scaling never waits for
// the host.
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/loss_scale_kernels.h"

namespace hg {

void GpuBackend::unscale_grads_(Tensor& grads, Tensor& state) {
  gpu::launch_unscale_grads(static_cast<float*>(grads.data_ptr()), grads.numel(),
                            static_cast<float*>(state.data_ptr()), gpu::stream_for(grads));
}

void GpuBackend::update_loss_scale_(Tensor& state, double growth, double backoff,
                                    int64_t growth_interval) {
  gpu::launch_update_loss_scale(static_cast<float*>(state.data_ptr()), growth, backoff,
                                growth_interval, gpu::stream_for(state));
}

}  // namespace hg
