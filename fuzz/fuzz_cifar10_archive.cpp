// libFuzzer target: CIFAR-10 read in place from an archive given as the path (tar_gz_reader.cpp
// through libarchive, the member matching and size bounds of cifar10_reader.cpp, and the batch
// decoders behind them). The input is cifar10.tar: a tar file, plain or gzip-compressed (the
// seeds are mostly plain, so that mutations reach the tar headers and members).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hg::fuzz::write_input(
      "cifar10.tar", std::string_view(reinterpret_cast<const char*>(data), size));
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::data::ImageDataset ds = hg::data::load_cifar10(path, hg::data::Split::Test);
        hg::fuzz::check(ds.height == 32 && ds.width == 32 && ds.channels == 3, "bad image shape");
        hg::fuzz::check(ds.pixels.size() == size_t(ds.size()) * 3072, "pixel count mismatch");
        for (uint8_t label : ds.labels) hg::fuzz::check(label < 10, "label out of range");
      },
      "cifar10.tar");
  return 0;
}
