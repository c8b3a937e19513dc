// Which blocks a training step recomputes (activation recomputation, autograd/recompute.h):
// train.recompute = "none" | "auto" | ["layer3.0", "layer4.1", ...], and the "auto" choice.
//
// "auto" with a memory limit on the step's allocator probes a training step as the micro-batch
// search does (oom_policy.h): when a step without recomputation fits, nothing is recomputed;
// otherwise each block's saved activations are measured (the bytes a recorded forward pass
// holds, without and with that block recomputed) and the blocks are taken largest saving
// first, the smallest prefix of that order with which a probe step fits (bisected). When even
// recomputing every block does not fit, every block is recomputed and the out-of-memory retry
// splits the micro-batch as before. Without a limit "auto" recomputes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/device/allocator.h"
#include "hourglass/tensor/tensor.h"

namespace hg::train {

class TrainStep;

enum class RecomputeMode : uint8_t { None, Auto, Modules };

struct RecomputeConfig {
  RecomputeMode mode = RecomputeMode::None;
  std::vector<std::string> modules;  // RecomputeMode::Modules: the blocks' names
  std::string origin;                // where the key came from, for messages
};

// Parses train.recompute ("none", "auto" or a non-empty list of module names; names are
// checked against the model later, by TrainStep). Errors are InvalidInput naming the key.
RecomputeConfig parse_recompute(const Config& config);
// The same from a command-line flag's text: "none", "auto" or names separated by commas.
RecomputeConfig parse_recompute_text(const std::string& text, const std::string& what);

// A block's measured saving: the bytes of saved activations a recorded forward pass of
// `rows` rows holds less when it is recomputed.
struct BlockSaving {
  std::string name;
  int64_t bytes = 0;
};

// Measures every recompute candidate's saving at micro-batch `rows` (scaled from a smaller
// micro-batch when a forward pass of `rows` does not fit), largest first. Leaves the model's
// recompute marks, gradients and buffers as they were.
std::vector<BlockSaving> measure_recompute_savings(TrainStep& step, const Shape& sample_shape,
                                                   int64_t rows, Allocator& allocator);

// The "auto" choice for `step` at its current micro-batch (see the top of this file), for
// batches of `batch_size` rows with samples of `sample_shape` (H, W, C). Marks the chosen
// blocks on the step's model, logs the choice and returns the names (in model order).
std::vector<std::string> choose_recompute(TrainStep& step, const Shape& sample_shape,
                                          int64_t batch_size, Allocator& allocator);

}  // namespace hg::train
