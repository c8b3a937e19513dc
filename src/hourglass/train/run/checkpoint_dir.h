// The checkpoints folder of a run directory:
//
//   <run_dir>/.lock                         held (flock) by the one process training the run
//   <run_dir>/checkpoints/step-<step>.safetensors   one per checkpoint, <step> the global
//                                           optimizer step zero-padded to 9 digits
//   <run_dir>/checkpoints/last              text: the file name of the newest checkpoint
//   <run_dir>/checkpoints/best              text: the file name of the epoch-end checkpoint
//                                           with the best accuracy so far (validation
//                                           when the run holds it out, else test)
//   <run_dir>/checkpoints/discarded/        checkpoints newer than the one a run resumed from
//                                           (invalid ones, or ones a --resume PATH went back
//                                           past), moved out of the rotation for inspection;
//                                           one whose name is taken there (a step discarded
//                                           before) becomes step-<step>.<k>.safetensors
//
// Checkpoint files and markers are written atomically (temporary file, fsync, rename,
// directory fsync), so a crash leaves either the old or the new version; temporary files of
// interrupted writes are removed when the folder is opened. The markers are for people and
// tools; resuming scans the step-*.safetensors files themselves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hg::train {

class CheckpointDir {
 public:
  struct Entry {
    int64_t step = 0;
    std::string name;  // file name, "step-000000120.safetensors"
  };

  // Creates <run_dir>/checkpoints, takes the run directory's lock (InvalidInput naming the
  // directory when another process holds it) and removes temporary files left by
  // interrupted writes (in checkpoints/, and of metrics.jsonl, config.toml and
  // final.safetensors).
  CheckpointDir(const std::string& run_dir, int64_t keep_last);
  ~CheckpointDir();  // releases the lock
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  static std::string file_name(int64_t step);
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

  // The checkpoint files, oldest (lowest step) first.
  std::vector<Entry> list() const;
  // The same for any checkpoint folder (<run_dir>/checkpoints), without taking its lock;
  // nothing when the folder does not exist.
  static std::vector<Entry> list_folder(const std::string& folder);
  // The file name a marker ("last" or "best") holds, or "" when it is absent.
  std::string read_marker(const std::string& marker) const;

  // After checkpoint `name` was written: points `last` at it and `best` at `best_name` (when
  // not empty), then deletes checkpoints beyond the newest keep_last, never the best one.
  void commit(const std::string& name, const std::string& best_name);
  // Moves the checkpoints of steps after `step` to discarded/, never over a file there; returns
  // the names they have there.
  std::vector<std::string> discard_after(int64_t step);

 private:
  void write_marker(const std::string& marker, const std::string& name);

  std::string run_dir_, dir_;
  int64_t keep_last_;
  int lock_fd_ = -1;
};

}  // namespace hg::train
