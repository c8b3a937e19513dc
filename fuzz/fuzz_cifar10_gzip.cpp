// libFuzzer target: gzip-compressed CIFAR-10 binary batches (byte_source.cpp's inflate path, then
// cifar10_reader.cpp's size bound and cifar10_batch.cpp's records). fuzz_cifar10 reaches the
// compressed path only when a mutation happens to make a gzip stream; here every input makes one.
// The first byte picks how:
//   even: the rest is the gzip stream itself (its first two bytes forced to the gzip magic).
//         When zlib's inflate reads it as one whole member, the batch must load exactly when the
//         inflated bytes load as a plain batch, with the same records; a stream that ends early
//         must be refused.
//   odd:  the rest is a plain batch that this target compresses itself (deflate's level,
//         strategy and memory level, the gzip header's name, comment, extra field and header CRC
//         taken from the second and third bytes), at times as two members, cut short, with
//         trailing bytes after the stream (refused), or behind a member of up to 10,001 zero
//         records (the reader's cap is 10,000: one published batch). Whole streams must read
//         exactly as the plain file does (both refused, or the same records); cut ones must be
//         refused.
// Every outcome: at most 10,000 records, memory bounded by libFuzzer's -rss_limit_mb, and only
// InvalidInput naming the file.
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "hourglass/data/cifar10_batch.h"
#include "hourglass/data/dataset.h"

namespace {

namespace fs = std::filesystem;
using hg::data::cifar10::kMaxBinaryBatchBytes;
using hg::data::cifar10::kRecordBytes;

struct Outcome {
  std::optional<hg::data::ImageDataset> loaded;  // nothing: refused
};

// Writes `bytes` as <scratch>/<folder>/test_batch.bin and loads the test split from there.
Outcome load(const std::string& folder, std::string_view bytes) {
  const fs::path dir = hg::fuzz::scratch_dir() / folder;
  fs::create_directories(dir);
  const std::string name = folder + "/test_batch.bin";
  const std::string path = hg::fuzz::write_input(name, bytes);
  Outcome out;
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        hg::data::ImageDataset ds = hg::data::load_cifar10(dir.string(), hg::data::Split::Test);
        hg::fuzz::check(ds.size() <= hg::data::cifar10::kBatchImages, "more than one batch read");
        hg::fuzz::check(ds.pixels.size() == size_t(ds.size()) * 3072, "pixel count mismatch");
        for (uint8_t label : ds.labels) hg::fuzz::check(label < 10, "label out of range");
        out.loaded = std::move(ds);
      },
      path);
  return out;
}

void expect_same(const Outcome& gz, const Outcome& plain, const char* what) {
  hg::fuzz::check(gz.loaded.has_value() == plain.loaded.has_value(), what,
                  gz.loaded ? "the gzip file loaded, the plain one was refused"
                            : "the gzip file was refused, the plain one loaded");
  if (gz.loaded)
    hg::fuzz::check(
        gz.loaded->labels == plain.loaded->labels && gz.loaded->pixels == plain.loaded->pixels,
        what, "the records differ");
}

// The gzip stream of `plain`, as deflate writes it with `options` (level, strategy, memory level
// and header fields from its bits).
std::string gzip(std::string_view plain, uint8_t options, uint8_t header_bits) {
  z_stream z{};
  static constexpr int kStrategies[] = {Z_DEFAULT_STRATEGY, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE,
                                        Z_FIXED};
  const int level = options % 10;
  const int strategy = kStrategies[options / 10 % 5];
  const int mem_level = 1 + options / 50 % 9;
  if (deflateInit2(&z, level, Z_DEFLATED, 16 + 15, mem_level, strategy) != Z_OK) std::abort();
  gz_header header{};
  std::string extra(
      "HG\x04\x00"
      "abcd",
      8),
      name = "test_batch.bin", comment = "fuzz";
  if (header_bits & 1) header.extra = reinterpret_cast<Bytef*>(extra.data()), header.extra_len = 8;
  if (header_bits & 2) header.name = reinterpret_cast<Bytef*>(name.data());
  if (header_bits & 4) header.comment = reinterpret_cast<Bytef*>(comment.data());
  header.hcrc = (header_bits & 8) ? 1 : 0;
  header.os = header_bits >> 4;
  if (header_bits & 15) deflateSetHeader(&z, &header);
  std::string out(deflateBound(&z, uLong(plain.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = uInt(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A gzip member of `records` zero records, made once per count.
const std::string& zero_member(int64_t records) {
  static std::string members[3];
  const int64_t first = hg::data::cifar10::kBatchImages - 1;
  std::string& m = members[records - first];
  if (m.empty()) m = gzip(std::string(size_t(records * kRecordBytes), '\0'), 9, 0);
  return m;
}

// What zlib's inflate makes of `stream` read as one gzip member: the inflated bytes when the
// member ends exactly at the end of `stream` (at most `cap` + 1 of them), else nothing; `cut`
// says whether the stream just ended early (no error, no end).
std::optional<std::string> inflate_whole(std::string_view stream, size_t cap, bool& cut) {
  cut = false;
  z_stream z{};
  if (inflateInit2(&z, 16 + 15) != Z_OK) std::abort();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(stream.data()));
  z.avail_in = uInt(stream.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK && out.size() <= cap) {
    char buf[1 << 14];
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) cut = true;
  }
  const bool whole = rc == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  if (!whole) return std::nullopt;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t mode = data[0];
  if (mode % 2 == 0) {
    std::string stream(reinterpret_cast<const char*>(data) + 1, size - 1);
    stream[0] = '\x1f', stream[1] = '\x8b';
    const Outcome gz = load("gz", stream);
    bool cut = false;
    const std::optional<std::string> plain = inflate_whole(stream, kMaxBinaryBatchBytes, cut);
    if (cut) hg::fuzz::check(!gz.loaded, "a gzip stream that ends early was read");
    // A stream inflating to a plain batch that starts with the gzip magic would be inflated
    // again by the plain reader: compare only the others.
    if (plain && !(plain->size() >= 2 && (*plain)[0] == '\x1f' && (*plain)[1] == '\x8b'))
      expect_same(gz, load("plain", *plain), "a whole gzip member reads unlike its bytes");
    return 0;
  }
  const uint8_t options = data[1], shape = data[2];
  std::string plain(reinterpret_cast<const char*>(data) + 3, size - 3);
  // The plain reader would take a batch starting with the gzip magic for a compressed file.
  if (plain.size() >= 2 && plain[0] == '\x1f' && plain[1] == '\x8b') plain[0] = 0;
  std::string stream;
  if (shape % 8 == 7) {  // behind 9,999, 10,000 or 10,001 zero records
    const int64_t zeros = hg::data::cifar10::kBatchImages - 1 + shape / 8 % 3;
    const Outcome gz = load("gz", zero_member(zeros) + gzip(plain, options, shape));
    const size_t zero_bytes = size_t(zeros * kRecordBytes);
    // Compared with the plain reader on the records after the zeros (30 MB of zeros written
    // and read again would cost each run a tenth of a second).
    if (zero_bytes + plain.size() > kMaxBinaryBatchBytes || plain.size() % kRecordBytes != 0) {
      hg::fuzz::check(!gz.loaded, "a batch over the cap, or not of whole records, was read");
      return 0;
    }
    const Outcome tail =
        plain.empty() ? Outcome{hg::data::cifar10::empty_dataset()} : load("plain", plain);
    hg::fuzz::check(gz.loaded.has_value() == tail.loaded.has_value(),
                    "zero records and a batch read unlike the batch alone");
    if (!gz.loaded) return 0;
    const std::vector<uint8_t>& labels = gz.loaded->labels;
    const std::vector<uint8_t>& pixels = gz.loaded->pixels;
    const size_t zero_pixels = size_t(zeros) * 3072;
    hg::fuzz::check(labels.size() == size_t(zeros) + tail.loaded->labels.size() &&
                        std::equal(tail.loaded->labels.begin(), tail.loaded->labels.end(),
                                   labels.begin() + zeros) &&
                        std::equal(tail.loaded->pixels.begin(), tail.loaded->pixels.end(),
                                   pixels.begin() + ptrdiff_t(zero_pixels)),
                    "the records after the zeros differ from the batch alone");
    hg::fuzz::check(
        std::all_of(labels.begin(), labels.begin() + zeros, [](uint8_t v) { return v == 0; }) &&
            std::all_of(pixels.begin(), pixels.begin() + ptrdiff_t(zero_pixels),
                        [](uint8_t v) { return v == 0; }),
        "the zero records are not zero");
    return 0;
  }
  if (shape % 8 == 6 && !plain.empty()) {  // two members
    const size_t split = size_t(shape / 8) * plain.size() / 32;
    stream = gzip(std::string_view(plain).substr(0, split), options, shape) +
             gzip(std::string_view(plain).substr(split), uint8_t(options + 1), shape >> 4);
  } else {
    stream = gzip(plain, options, shape);
  }
  if (shape % 8 == 5) {  // cut short: must be refused
    const size_t keep = size_t(options) * stream.size() / 256;
    stream.resize(keep);
    const Outcome gz = load("gz", stream);
    hg::fuzz::check(!gz.loaded, "a gzip stream cut short was read");
    return 0;
  }
  if (shape % 8 == 4) {  // bytes after the stream that start no member: refused
    stream += "trailing bytes, not a gzip member";
    hg::fuzz::check(!load("gz", stream).loaded, "bytes after the gzip stream were accepted");
    return 0;
  }
  const Outcome gz = load("gz", stream);
  const bool over = plain.size() > kMaxBinaryBatchBytes;
  if (over) hg::fuzz::check(!gz.loaded, "more than one batch's bytes were read");
  expect_same(gz, load("plain", plain), "a gzip stream reads unlike its plain bytes");
  return 0;
}
