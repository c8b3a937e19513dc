// TensorBoard event files, written without TensorFlow or protobuf: the `tensorboard` program
// (and TensorFlow's readers) read them as they are written.
//
// An event file is a sequence of TFRecords:
//   uint64 length (little-endian), uint32 masked CRC32C of those 8 bytes,
//   `length` bytes of data, uint32 masked CRC32C of the data,
// where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is a
// serialized tensorflow.Event (tensorflow/core/util/event.proto), encoded here by hand in the
// protobuf wire format: the first record says file_version "brain.Event:2", the others carry
// scalar summaries (tag, simple_value) at a step, or a SessionLog START.
//
// Every record reaches the kernel with one write() as it is written, so a crash loses at most
// the record being written (readers stop at a record cut short). Several threads may write to
// one writer (the step loop and the device monitor): records are written one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace hg::obs {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing uses it:
// crc32c("123456789") == 0xE3069283. `crc` continues an earlier call's result.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// TFRecord's masked form of a CRC, so that a CRC of bytes that hold CRCs stays well mixed.
uint32_t mask_crc32c(uint32_t crc);

// Seconds since the Unix epoch, with the sub-second part: the wall_time of an event.
double unix_time_now();

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and in it a new file events.out.tfevents.<unix time>.<host>.<pid>
  // (TensorBoard reads every file whose name holds "tfevents"), starting with the file_version
  // event. Throws Runtime naming the path and the system error.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event at `step` with a scalar summary per (tag, value) pair. Non-finite values are
  // written as they are (TensorBoard shows NaN). Throws Runtime naming the path on a write
  // failure.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
               double wall_time = unix_time_now());
  // A SessionLog START event at `step`: TensorBoard then drops the events of this run with a
  // step at or after it that it read before (the steps a resumed run trains again).
  void session_start(int64_t step, double wall_time = unix_time_now());

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  int fd_ = -1;
  std::mutex mutex_;  // one record at a time
};

}  // namespace hg::obs
