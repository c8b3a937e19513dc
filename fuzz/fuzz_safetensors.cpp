// libFuzzer target: the safetensors reader (checkpoints, weights). The first byte picks
// whether checksums are verified (odd) or skipped (even): skipping lets the fuzzer reach the
// header, dtype, shape and offset checks behind a checksum it cannot forge; the rest of the
// input is the file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const hg::ChecksumCheck check = data[0] & 1 ? hg::ChecksumCheck::Verify : hg::ChecksumCheck::Skip;
  const std::string_view file(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string path = hg::fuzz::write_input("input.safetensors", file);
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::SafetensorsFile loaded = hg::load_safetensors(path, check);
        // What loaded lies inside the file: the tensors' bytes cannot exceed it.
        size_t bytes = 0;
        for (const hg::NamedTensor& t : loaded.tensors) {
          hg::fuzz::check(!t.name.empty() && t.name != "__metadata__", "bad tensor name");
          bytes += t.tensor.nbytes();
        }
        hg::fuzz::check(bytes + 8 <= file.size(), "tensors larger than the file");
        if (check == hg::ChecksumCheck::Skip)
          hg::fuzz::check(loaded.integrity == hg::Integrity::None,
                          "skipped check claims integrity");
        // The metadata-only reader agrees with the full one on any file the full one accepts.
        hg::fuzz::check(hg::read_safetensors_metadata(path) == loaded.metadata,
                        "metadata reader disagrees");
      },
      path);
  return 0;
}
