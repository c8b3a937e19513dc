// libFuzzer target: the image pack's index reader (data/image_pack.h). The input is
// index.hgpack; a parsed index must print back to the same bytes and keep every record inside
// its shard and classes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/data/image_pack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string path = hg::fuzz::write_input("index.hgpack", bytes);
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::data::PackIndex index = hg::data::parse_pack_index(bytes, path);
        hg::fuzz::check(hg::data::serialize_pack_index(index) == bytes,
                        "the index does not print back to its bytes");
        hg::fuzz::check(!index.classes.empty() && !index.records.empty(), "empty index accepted");
        for (const hg::data::PackRecord& r : index.records) {
          hg::fuzz::check(r.shard < index.shard_sizes.size(), "record in a missing shard");
          hg::fuzz::check(r.offset + r.length <= index.shard_sizes[r.shard],
                          "record past its shard");
          hg::fuzz::check(r.label < index.classes.size(), "label outside the classes");
        }
      },
      "index.hgpack");
  return 0;
}
