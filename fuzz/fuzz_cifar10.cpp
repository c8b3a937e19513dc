// libFuzzer target: the CIFAR-10 binary reader. The input is test_batch.bin.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hg::fuzz::write_input(
      "test_batch.bin", std::string_view(reinterpret_cast<const char*>(data), size));
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::data::ImageDataset ds =
            hg::data::load_cifar10(hg::fuzz::scratch_dir().string(), hg::data::Split::Test);
        hg::fuzz::check(ds.height == 32 && ds.width == 32 && ds.channels == 3, "bad image shape");
        hg::fuzz::check(ds.pixels.size() == size_t(ds.size()) * 3072, "pixel count mismatch");
        hg::fuzz::check(size_t(ds.size()) * 3073 == size, "records do not tile the file");
        for (uint8_t label : ds.labels) hg::fuzz::check(label < 10, "label out of range");
      },
      "test_batch.bin");
  return 0;
}
