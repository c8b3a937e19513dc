// Evaluation: loss and accuracy of a model over a whole loader, without recording a tape.
// Loss and correct counts accumulate on the device and are read once at the end.
#pragma once

#include <functional>

#include "hourglass/data/loader.h"
#include "hourglass/nn/module.h"
#include "hourglass/obs/progress.h"
#include "hourglass/tensor/batch_mover.h"
#include "hourglass/train/step/execution_context.h"

namespace hg::train {

struct EvalResult {
  double loss = 0;      // mean cross-entropy (no label smoothing)
  double accuracy = 0;  // fraction in [0, 1]
  // The fraction whose label is among the 5 highest logits; -1 for 5 classes or fewer (where
  // it would always be 1).
  double top5 = -1;
  int64_t samples = 0;
  double seconds = 0;
};

// Runs the model in eval mode over one epoch of `loader` (epoch 0) on the context's device,
// under its precision, and restores the model's previous train/eval mode. Batches that carry
// mirrored images (LoaderOptions::mirror) are scored on the mean of both views' logits.
// Host batches reach the device through `mover` when one is given (else a plain copy), and
// uint8 ones are normalised there (DataLoader::model_images). A `progress` bar, when given,
// is updated with the batches issued (of loader.batches_per_epoch()); it reads no value, so
// it makes no wait for the device.
EvalResult evaluate(nn::Module& model, data::DataLoader& loader, const ExecutionContext& context,
                    BatchMover* mover = nullptr, obs::ProgressBar* progress = nullptr);

// The same over any function from a batch's images (on `device`) to its logits there: an INT8
// network or a folded float graph (infer/), under the caller's settings.
EvalResult evaluate_logits(data::DataLoader& loader, Device device,
                           const std::function<Tensor(const Tensor&)>& logits_of,
                           BatchMover* mover = nullptr, obs::ProgressBar* progress = nullptr);

}  // namespace hg::train
