// The per-epoch metrics of a run and their file, metrics.jsonl, across interruptions.
//
// A run killed after its last checkpoint redoes the work since that checkpoint when resumed,
// so metrics.jsonl may hold lines of epochs that will run again, or a line cut short by the
// kill. reconcile_metrics_file() makes the file agree with the checkpoint a run resumes from,
// so that every epoch of a finished run has exactly one line however often it was resumed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hg::train {

struct EpochMetrics {
  int64_t epoch = 0;      // 1-based
  double train_loss = 0;  // mean over the epoch's samples (with label smoothing)
  double train_acc = 0;   // fraction
  // Whether the epoch was evaluated (train.eval_every); when not, the test and validation
  // fields are 0 and absent from its metrics line.
  bool evaluated = true;
  double test_loss = 0;
  double test_acc = 0;          // fraction
  double test_top5 = -1;        // top-5 fraction; -1 (absent) with 5 classes or fewer
  bool has_validation = false;  // the run holds out a validation set (data.val_fraction)
  double val_loss = 0;
  double val_acc = 0;    // fraction; what `best` is chosen on when has_validation
  double val_top5 = -1;  // as test_top5
  // train.ema_decay > 0: the moving average's test loss and accuracy (and validation accuracy,
  // with a validation set); -1 (absent) otherwise.
  double ema_test_loss = -1, ema_test_acc = -1, ema_val_acc = -1;
  double images_per_s = 0;  // training throughput (excludes evaluation)
  double epoch_seconds = 0;
  double lr = 0;                  // at the end of the epoch
  double checkpoint_seconds = 0;  // time the step loop waited for checkpoints this epoch
  // Time the step loop waited for the loader's batches this epoch (since the resume, for an
  // epoch resumed mid-way): the upper bound of the GPU's data stall.
  double data_wait_seconds = 0;
  // Host time this epoch spent choosing algorithms for shapes met for the first time in the
  // process (ops::algorithm_planning: convolution plans rebuilt from the tuning cache or
  // searched), training and evaluation both: most of what a first epoch takes over the later
  // ones. Absent in lines written before this field existed (read back as 0).
  double planning_seconds = 0;
  // The device allocator over the epoch's training steps (this process; rank 0's in a
  // data-parallel run): the high-water mark of bytes in use (reset at the epoch's start), the
  // bytes it holds from the system at the epoch's end (in use plus cached), and
  // 1 - peak / reserved, the share of reserved memory never in use at the epoch's peak (cache
  // and fragmentation overhead; 0 when nothing is reserved). Absent in lines written before
  // these fields existed (read back as 0).
  double peak_memory_mib = 0;
  double reserved_memory_mib = 0;
  double memory_fragmentation = 0;
};

// How many of the last epochs of `history` in a row did not raise the validation accuracy
// above the best of the epochs before them by more than `min_delta` (the first epoch always
// counts as an improvement); 0 without validation.
int64_t epochs_without_improvement(const std::vector<EpochMetrics>& history, double min_delta);

// The metrics as the name/value pairs of one metrics.jsonl line, in the documented order.
std::vector<std::pair<std::string, double>> epoch_record(const EpochMetrics& m);
// The same record as one line of JSON text (no newline), for storing in a checkpoint.
std::string epoch_record_json(const EpochMetrics& m);
// Any record (name, value pairs) as one line of JSON text, encoded as obs::MetricsJsonl writes
// it: what a checkpoint stores as its last metrics line.
std::string metrics_record_json(const std::vector<std::pair<std::string, double>>& values);

// Rewrites `path` (when it exists and something changes; atomically) so that it holds the
// lines of epochs 1..completed_epochs once each, in file order: lines of later epochs (work
// after the checkpoint being resumed, which runs again) are dropped, as are lines that are not
// valid JSON (cut short by a kill) and repeats of an epoch. Lines without an "epoch" field are
// kept. When the line of epoch `completed_epochs` is missing and `last_record` (a line from
// epoch_record_json) is not empty, it is appended. Returns the metrics of the kept epoch lines.
// Throws Runtime naming the file when it cannot be read or rewritten.
std::vector<EpochMetrics> reconcile_metrics_file(const std::string& path, int64_t completed_epochs,
                                                 const std::string& last_record);

}  // namespace hg::train
