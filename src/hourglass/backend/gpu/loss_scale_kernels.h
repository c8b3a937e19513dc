// Launchers of the dynamic loss-scaling kernels (loss_scale_kernels.cu), called by
// loss_scale.cpp. `state` is the scaler's f32 [3] on the device: {scale, found_inf, good_steps}.
// Both run entirely on the device: nothing is read back.
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// grads[i] *= 1 / state[0] (the reciprocal taken in f32, as the CPU); any thread that produces
// a non-finite value stores 1 to state[1] (never clears it). Nothing is launched for n = 0.
void launch_unscale_grads(float* grads, int64_t n, float* state, gpuStream_t stream);

// One thread applies the CPU backend's rule (backend/cpu/loss_scale.cpp) with the same double
// arithmetic, so the state after each call equals the CPU's bit for bit.
void launch_update_loss_scale(float* state, double growth, double backoff, int64_t growth_interval,
                              gpuStream_t stream);

}  // namespace hg::gpu
