// libFuzzer target: the IDX reader (MNIST, Fashion-MNIST), plain or gzip. The input holds both
// files: a 2-byte little-endian length L, then L bytes of the label file (cut to what is
// there), then the image file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t label_bytes = std::min<size_t>(data[0] | (size_t(data[1]) << 8), rest.size());
  const std::string labels =
      hg::fuzz::write_input("labels-idx1-ubyte", rest.substr(0, label_bytes));
  const std::string images = hg::fuzz::write_input("images-idx3-ubyte", rest.substr(label_bytes));
  // Both files are named in any refusal's message, so the common part is the folder.
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::data::ImageDataset ds = hg::data::read_idx(images, labels, 10);
        hg::fuzz::check(ds.height > 0 && ds.width > 0 && ds.channels == 1, "bad image shape");
        hg::fuzz::check(ds.pixels.size() == size_t(ds.size() * ds.image_bytes()),
                        "pixel count does not match labels x image size");
        for (uint8_t label : ds.labels) hg::fuzz::check(label < 10, "label out of range");
      },
      hg::fuzz::scratch_dir().string());
  return 0;
}
