// The cuDNN side of the tuning cache (ops/tuning_cache.h): what a key and a choice are for
// dnn_cudnn.cpp's engine search, and how a cached choice becomes an engine configuration
// again. CUDA builds only (the file names end in _cudnn).
//
// A key names everything the search's result depends on: the pass, dtype, math mode (TF32),
// determinism, the pointer alignment, the layouts searched and the
// convolution's sizes and parameters. A choice is "<layout>:<engine>:<knobs>", e.g.
// "nhwc:12:3=1,13=0": the layout cuDNN saw, the engine's global index and its knob choices
// (knob type = value) — what describes an engine configuration of cuDNN's graph API
// completely. The identity the file is keyed by names the GPU (name, architecture, SMs), the
// driver, the CUDA runtime, cuDNN and cuBLASLt.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hourglass/backend/gpu/dnn.h"

namespace hg::gpu::cudnn_tuning {

struct EngineChoice {
  int layout = 0;  // 0: NHWC (the call's own buffers), 1: NCHW copies (conv_plan_cudnn.h's Layout)
  int64_t engine = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // (cudnnBackendKnobType_t, value), as read
  bool operator==(const EngineChoice&) const = default;
};

// At most this many knobs in a choice (cuDNN 9's engines have fewer than 10).
inline constexpr size_t kMaxKnobs = 24;

std::string encode_choice(const EngineChoice& choice);
// The choice `text` spells, or nullopt when it does not parse (any malformed field, a layout
// other than nhwc/nchw, more than kMaxKnobs knobs).
std::optional<EngineChoice> parse_choice(std::string_view text);

// The key of one pass's search (see the top of the file). `pass` is "forward", "backward
// data" or "backward filter"; nhwc/nchw: the layouts the search tries.
std::string conv_key(const char* pass, const dnn::ConvGeometry& g, DType dtype, MathMode math,
                     dnn::Determinism det, int64_t alignment, bool nhwc, bool nchw);

// Device `device`'s identity for the tuning cache (computed once per device). cuBLASLt's
// entries (blas_cublaslt.cpp) are kept under it too: it names cuBLASLt's version.
const std::string& identity(int device);

// An engine and an engine configuration of `graph` for `choice` (its engine with its knobs
// set), finalized, and the knob choices it was given: all owned by the caller, who keeps them
// alive as long as the configuration (as cudnn-frontend does). On failure returns cuDNN's
// status and leaves all empty (what was created is destroyed).
cudnnStatus_t make_engine_config(cudnnBackendDescriptor_t graph, const EngineChoice& choice,
                                 cudnnBackendDescriptor_t* engine, cudnnBackendDescriptor_t* config,
                                 std::vector<cudnnBackendDescriptor_t>* knob_choices);

}  // namespace hg::gpu::cudnn_tuning
