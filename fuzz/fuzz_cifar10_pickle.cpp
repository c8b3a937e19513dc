// libFuzzer target: the CIFAR-10 python-version reader (pickle_reader.cpp and the batch checks
// of cifar10_batch.cpp). The input is test_batch, a pickled batch dict.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hg::fuzz::write_input("test_batch", std::string_view(reinterpret_cast<const char*>(data), size));
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::data::ImageDataset ds =
            hg::data::load_cifar10(hg::fuzz::scratch_dir().string(), hg::data::Split::Test);
        hg::fuzz::check(ds.height == 32 && ds.width == 32 && ds.channels == 3, "bad image shape");
        hg::fuzz::check(ds.pixels.size() == size_t(ds.size()) * 3072, "pixel count mismatch");
        // The pixels are part of the input: a pickle cannot hold more images than bytes / 3072
        // (unless the input is gzip-compressed, which the reader undoes).
        const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
        hg::fuzz::check(gzip || size_t(ds.size()) * 3072 <= size,
                        "more pixels than the input holds");
        for (uint8_t label : ds.labels) hg::fuzz::check(label < 10, "label out of range");
      },
      "test_batch");
  return 0;
}
