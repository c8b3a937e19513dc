// A reader of TensorBoard event files written for the tests from the format's description
// alone (TFRecord framing, tensorflow/core/util/event.proto), sharing no code with
// obs/tensorboard.cpp: a writer bug is not repeated here to cancel itself out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hg::test {

// CRC-32C computed bit by bit (no table).
uint32_t crc32c_bitwise(const void* data, size_t size);

struct TfEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;                            // "" unless set
  std::vector<std::pair<std::string, float>> scalars;  // Summary.Value (tag, simple_value)
  int64_t session_status = -1;                         // SessionLog.status; -1: no session_log
};

// Every record of `path`, in order. Throws std::runtime_error naming the record's offset for a
// bad length or data CRC, a record cut short, or protobuf bytes that do not parse.
std::vector<TfEvent> read_tfevents(const std::string& path);

// The event files (names holding "tfevents") in `dir`, sorted by name.
std::vector<std::string> tfevents_files(const std::string& dir);

}  // namespace hg::test
