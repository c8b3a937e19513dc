#include "hourglass/tensor/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "support/compare.h"
#include "support/fifo.h"
#include "support/safetensors_edit.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / fmt::format("hg_safetensors_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    detail::set_safetensors_write_fault_after_bytes(-1);
    fs::remove_all(dir_);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A file with the given header text (unpadded) and data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
  return out + header + data;
}

// Raw bytes of a tensor in row-major order.
std::string tensor_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// One tensor of every dtype, plus non-contiguous views, a scalar and an empty tensor.
std::vector<NamedTensor> sample_tensors() {
  std::vector<NamedTensor> out;
  const auto values = test::random_values(24, 7, -3.0, 3.0);
  const Tensor base = test::f32_tensor(values, {2, 3, 4});
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I32,
                   DType::I64, DType::U8}) {
    Tensor t = dt == DType::U8 ? Tensor::empty({2, 3, 4}, dt) : base.to(dt);
    if (dt == DType::U8)  // values above 127 catch a reader treating U8 as signed
      for (int i = 0; i < 24; ++i) t.data<uint8_t>()[i] = uint8_t(i * 11);
    out.push_back({fmt::format("plain.{}", dtype_name(dt)), t});
  }
  out.push_back({"view.permuted", base.permute({2, 0, 1})});
  out.push_back({"view.narrowed", base.to(DType::F64).narrow(2, 1, 2)});
  out.push_back({"view.bf16_permuted", base.to(DType::BF16).permute({1, 0, 2})});
  out.push_back({"scalar", Tensor::scalar(2.5, DType::F64)});
  out.push_back({"empty", Tensor::zeros({0, 3}, DType::I32)});
  return out;
}

TEST_F(Safetensors, RoundTripsEveryDtypeViewsAndScalars) {
  const auto tensors = sample_tensors();
  save_safetensors(file("a.safetensors"), tensors, {});
  const SafetensorsFile loaded = load_safetensors(file("a.safetensors"));
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& got = loaded.tensors[i];  // saved order is kept
    const Tensor& want = tensors[i].tensor;
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(got.name, tensors[i].name);
    EXPECT_EQ(got.tensor.dtype(), want.dtype());
    EXPECT_EQ(got.tensor.shape(), want.shape());
    EXPECT_TRUE(got.tensor.is_contiguous());
    EXPECT_EQ(tensor_bytes(got.tensor), tensor_bytes(want));  // bit-exact
  }
  EXPECT_EQ(loaded.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.at("scalar").item(), 2.5);
  // The header is padded so that the data section is 8-byte aligned.
  const std::string bytes = read_bytes(file("a.safetensors"));
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST_F(Safetensors, MetadataRoundTripsWithChecksum) {
  const std::map<std::string, std::string> meta = {
      {"epoch", "3"}, {"config", "[train]\nlr = 0.1\n"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  save_safetensors(file("m.safetensors"), {{"w", Tensor::full({3}, 1.0)}}, meta);
  for (const auto& got : {load_safetensors(file("m.safetensors")).metadata,
                          read_safetensors_metadata(file("m.safetensors"))}) {
    for (const auto& [k, v] : meta) EXPECT_EQ(got.at(k), v) << k;
    ASSERT_TRUE(got.count(kSafetensorsChecksumKey));
    EXPECT_EQ(got.at(kSafetensorsChecksumKey).size(), 8u);
    EXPECT_EQ(got.size(), meta.size() + 1);
  }
}

TEST_F(Safetensors, IndependentPythonReaderAgrees) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not installed";
  const auto tensors = sample_tensors();
  save_safetensors(file("p.safetensors"), tensors, {{"epoch", "12"}});
  const std::string out = file("p.txt");
  const std::string cmd =
      fmt::format("/usr/bin/python3 {}/tests/tensor/read_safetensors.py {} > {}", HG_SOURCE_DIR,
                  file("p.safetensors"), out);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::istringstream lines(read_bytes(out));
  std::string line;
  size_t index = 0;
  std::map<std::string, std::string> meta;
  bool file_checksum_ok = false;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string field; std::getline(fields, field, '\t');) f.push_back(field);
    if (f[0] == "file_crc32") {
      file_checksum_ok = f.size() == 2 && f[1] == "ok";
      continue;
    }
    if (f[0] == "meta") {
      meta[f[1]] = f[2];
      continue;
    }
    ASSERT_EQ(f.size(), 5u) << line;
    ASSERT_LT(index, tensors.size());
    const NamedTensor& want = tensors[index++];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(f[0], want.name);
    static const std::map<DType, std::string> names = {
        {DType::F32, "F32"}, {DType::F64, "F64"}, {DType::F16, "F16"}, {DType::BF16, "BF16"},
        {DType::I8, "I8"},   {DType::I32, "I32"}, {DType::I64, "I64"}, {DType::U8, "U8"}};
    EXPECT_EQ(f[1], names.at(want.tensor.dtype()));
    std::string shape;
    for (int64_t d : want.tensor.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    EXPECT_EQ(f[2], shape);
    double sum = 0, weighted = 0;
    const std::vector<double> values = test::to_doubles(want.tensor);
    for (size_t i = 0; i < values.size(); ++i) {
      sum += values[i];
      weighted += double(i + 1) * values[i];
    }
    EXPECT_NEAR(std::stod(f[3]), sum, 1e-9 * (1 + std::abs(sum)));
    EXPECT_NEAR(std::stod(f[4]), weighted, 1e-9 * (1 + std::abs(weighted)));
  }
  EXPECT_EQ(index, tensors.size());
  EXPECT_EQ(meta["epoch"], "12");
  EXPECT_EQ(meta.count(kSafetensorsChecksumKey), 1u);
  EXPECT_TRUE(file_checksum_ok) << "the reader did not verify the whole-file checksum";

  // The independent reader also refuses a file whose header was edited.
  std::string edited = read_bytes(file("p.safetensors"));
  const size_t at = edited.find("\"12\"");
  ASSERT_NE(at, std::string::npos);
  edited[at + 1] = '3';
  write_bytes(file("edited.safetensors"), edited);
  const std::string edited_cmd =
      fmt::format("/usr/bin/python3 {}/tests/tensor/read_safetensors.py {} > /dev/null 2>&1",
                  HG_SOURCE_DIR, file("edited.safetensors"));
  EXPECT_NE(std::system(edited_cmd.c_str()), 0) << edited_cmd;
}

// Expects `fn` to throw an Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning " << parts.front();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.one_line();
    for (const std::string& p : parts)
      EXPECT_NE(e.message().find(p), std::string::npos) << "'" << p << "' not in: " << e.message();
  }
}

TEST_F(Safetensors, MalformedFilesNameTheFileAndTheFault) {
  const auto bad = [&](const std::string& name, const std::string& bytes,
                       const std::vector<std::string>& parts) {
    SCOPED_TRACE(name);
    write_bytes(file(name), bytes);
    auto all = parts;
    all.push_back(file(name));
    expect_error([&] { load_safetensors(file(name)); }, ErrorKind::InvalidInput, all);
    expect_error([&] { read_safetensors_metadata(file(name)); }, ErrorKind::InvalidInput, all);
  };
  expect_error([&] { load_safetensors(file("missing.safetensors")); }, ErrorKind::InvalidInput,
               {file("missing.safetensors"), "does not exist"});
  bad("short", "abc", {"3 bytes", "shorter than the 8-byte", "not a safetensors checkpoint"});
  bad("long_header", raw_file("{}", "").substr(0, 8) + "{", {"header length 2", "beyond"});
  bad("garbage", raw_file("{\"a\": [1, 2", ""), {"not valid JSON"});
  bad("not_object", raw_file("[1, 2]", ""),
      {"not a safetensors checkpoint", "does not start with a safetensors header"});
  bad("empty_header", raw_file("", ""), {"not a safetensors checkpoint"});
  bad("dtype",
      raw_file(R"({"x": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", "ab"),
      {"'x'", "unknown dtype 'F8_E4M3'"});
  bad("span",
      raw_file(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
               std::string(8, '\0')),
      {"'x'", "needs 12 bytes", "span 8"});
  bad("negative",
      raw_file(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
               std::string(4, '\0')),
      {"'x'", "not a non-negative integer"});
  bad("overlap",
      raw_file(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                   "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
               std::string(6, '\0')),
      {"'a' [0, 4)", "'b' [2, 6)", "overlap"});
  bad("hole",
      raw_file(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                   "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})",
               std::string(6, '\0')),
      {"bytes [2, 4)", "no tensor"});
  bad("beyond",
      raw_file(R"({"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})",
               std::string(8, '\0')),
      {"truncated", "16 bytes", "only 8"});
  bad("trailing",
      raw_file(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "xyz"),
      {"2 unexpected bytes"});
  bad("meta", raw_file(R"({"__metadata__": {"epoch": 3}})", ""), {"metadata 'epoch'"});
}

// A file that is no safetensors file at all (here a text file, whose first 8 bytes read as an
// absurd header length) is named as such, with advice on what to pass instead, rather than
// advice to re-create it.
TEST_F(Safetensors, AFileOfAnotherFormatIsNamedAsNotACheckpoint) {
  write_bytes(file("README.md"), "# hourglass\n\nA deep-learning training engine.\n");
  for (const auto& fn :
       std::vector<std::function<void()>>{[&] { load_safetensors(file("README.md")); },
                                          [&] { read_safetensors_metadata(file("README.md")); }}) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_EQ(e.message().rfind(file("README.md") + " is not a safetensors checkpoint", 0), 0u)
          << e.message();
      EXPECT_NE(e.remedy().find("final.safetensors"), std::string::npos) << e.remedy();
      EXPECT_EQ(e.one_line().find("re-create"), std::string::npos) << e.one_line();
    }
  }
}

TEST_F(Safetensors, TruncatedAndCorruptedCheckpointsAreDetected) {
  const auto tensors = sample_tensors();
  save_safetensors(file("good.safetensors"), tensors, {});
  const std::string good = read_bytes(file("good.safetensors"));

  write_bytes(file("cut.safetensors"), good.substr(0, good.size() - 5));
  expect_error([&] { load_safetensors(file("cut.safetensors")); }, ErrorKind::InvalidInput,
               {file("cut.safetensors"), "truncated"});

  std::string flipped = good;
  flipped[flipped.size() - 40] ^= 0x10;  // a data byte
  write_bytes(file("flip.safetensors"), flipped);
  const auto meta = read_safetensors_metadata(file("good.safetensors"));
  expect_error([&] { load_safetensors(file("flip.safetensors")); }, ErrorKind::InvalidInput,
               {file("flip.safetensors"), "checksum mismatch",
                "expects file crc32 " + meta.at(kSafetensorsChecksumKey)});
  // Skipping the check still loads the (damaged) values for inspection.
  EXPECT_EQ(load_safetensors(file("flip.safetensors"), ChecksumCheck::Skip).tensors.size(),
            tensors.size());

  // Files from other writers have no checksum and load without one.
  write_bytes(
      file("foreign.safetensors"),
      raw_file(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "\x01\x02"));
  EXPECT_EQ(load_safetensors(file("foreign.safetensors")).at("a").to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2}));
}

TEST_F(Safetensors, MissingTensorErrorNamesTensorAndFile) {
  save_safetensors(file("t.safetensors"), {{"conv.weight", Tensor::zeros({2})}}, {});
  const SafetensorsFile f = load_safetensors(file("t.safetensors"));
  EXPECT_EQ(f.find("nope"), nullptr);
  try {
    f.at("fc.bias");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("'fc.bias'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(file("t.safetensors")), std::string::npos) << e.message();
    EXPECT_NE(e.remedy().find("conv.weight"), std::string::npos) << e.remedy();
  }
}

TEST_F(Safetensors, BadTensorNamesAreRejected) {
  const Tensor t = Tensor::zeros({1});
  expect_error(
      [&] {
        save_safetensors(file("d"), {{"a", t}, {"a", t}}, {});
      },
      ErrorKind::InvalidInput, {"'a' is used twice"});
  expect_error(
      [&] {
        save_safetensors(file("d"), {{"", t}}, {});
      },
      ErrorKind::InvalidInput, {"empty name"});
  expect_error(
      [&] {
        save_safetensors(file("d"), {{"__metadata__", t}}, {});
      },
      ErrorKind::InvalidInput, {"reserved"});
  EXPECT_FALSE(fs::exists(file("d")));
}

TEST_F(Safetensors, FailedWritesLeaveTheOldFileIntact) {
  const std::string path = file("ckpt.safetensors");
  save_safetensors(path, {{"w", Tensor::full({4}, 1.0)}}, {{"epoch", "1"}});
  const std::string old_bytes = read_bytes(path);
  const auto bigger = sample_tensors();
  save_safetensors(file("probe"), bigger, {{"epoch", "2"}});
  const int64_t full_size = int64_t(fs::file_size(file("probe")));
  fs::remove(file("probe"));

  // Fail at the start, inside the length prefix, inside the header and inside the data.
  for (int64_t budget : {int64_t(0), int64_t(5), int64_t(60), full_size - 10}) {
    SCOPED_TRACE(budget);
    detail::set_safetensors_write_fault_after_bytes(budget);
    expect_error(
        [&] {
          save_safetensors(path, bigger, {{"epoch", "2"}});
        },
        ErrorKind::Runtime, {path, strerror(ENOSPC)});
    detail::set_safetensors_write_fault_after_bytes(-1);
    EXPECT_EQ(read_bytes(path), old_bytes);
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file();
    EXPECT_EQ(files, 1u) << "the temporary file was not removed";
  }
  EXPECT_EQ(load_safetensors(path).metadata.at("epoch"), "1");

  // A directory that does not exist.
  const std::string nowhere = file("no/such/dir/ckpt.safetensors");
  expect_error([&] { save_safetensors(nowhere, bigger, {}); }, ErrorKind::Runtime,
               {nowhere, strerror(ENOENT)});

  // A successful overwrite replaces the file.
  save_safetensors(path, bigger, {{"epoch", "2"}});
  EXPECT_EQ(load_safetensors(path).metadata.at("epoch"), "2");
}

TEST_F(Safetensors, TheChecksumCoversTheWholeFile) {
  // Two tensors of the same size and shape whose dtypes have the same width.
  const std::vector<NamedTensor> tensors = {
      {"a", test::f32_tensor({1, 2, 3, 4}, {4})},
      {"b", Tensor::from_vector<int32_t>({5, 6, 7, 8}, {4})},
  };
  save_safetensors(file("good.safetensors"), tensors, {{"epoch", "3"}});
  const std::string good = read_bytes(file("good.safetensors"));
  EXPECT_EQ(load_safetensors(file("good.safetensors")).integrity, Integrity::WholeFile);
  // The checksum field is the header's first entry, where readers look for it.
  EXPECT_EQ(good.substr(8, 41), R"({"__metadata__":{"hourglass.file_crc32":")");

  const auto refused = [&](const std::string& name, const std::string& bytes,
                           const std::vector<std::string>& parts) {
    SCOPED_TRACE(name);
    write_bytes(file(name), bytes);
    auto all = parts;
    all.push_back(file(name));
    expect_error([&] { load_safetensors(file(name)); }, ErrorKind::InvalidInput, all);
  };
  // A dtype label changed (F32 read as I32 would be garbage): the data is untouched.
  refused("dtype.safetensors", test::edit_header(good, R"("dtype":"F32")", R"("dtype":"I32")"),
          {"checksum mismatch", "file crc32"});
  // The byte ranges of two same-sized tensors swapped (names exchanged in the header).
  std::string swapped = test::edit_header(good, R"("a":{)", R"("x":{)");
  swapped = test::edit_header(swapped, R"("b":{)", R"("a":{)");
  swapped = test::edit_header(swapped, R"("x":{)", R"("b":{)");
  refused("swapped.safetensors", swapped, {"checksum mismatch"});
  // Metadata rewritten.
  refused("meta.safetensors", test::edit_header(good, R"("epoch":"3")", R"("epoch":"4")"),
          {"checksum mismatch"});
  // One flipped byte in the length prefix's neighbour, the header's last padding byte.
  std::string padded = good;
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  padded[8 + header_len - 1] = padded[8 + header_len - 1] == ' ' ? '\t' : ' ';
  refused("padding.safetensors", padded, {"checksum mismatch"});
  // The checksum field moved away from the start of the header.
  const std::string digits =
      load_safetensors(file("good.safetensors")).metadata.at(kSafetensorsChecksumKey);
  std::string moved = test::edit_header(good, R"("hourglass.file_crc32":")" + digits + R"(",)", "");
  moved = test::edit_header(moved, R"("epoch":"3")",
                            R"("epoch":"3","hourglass.file_crc32":")" + digits + "\"");
  refused("moved.safetensors", moved, {"not at the start of the header"});
  refused("digits.safetensors", test::edit_header(good, digits, "xyz12345"),
          {"not 8 hexadecimal digits"});

  // Without the key the file is an ordinary safetensors file: it loads, marked unverified
  // (checkpoints refuse such files: test_checkpoint.cpp).
  write_bytes(file("deleted.safetensors"),
              test::edit_header(good, R"("hourglass.file_crc32":")" + digits + R"(",)", ""));
  const SafetensorsFile deleted = load_safetensors(file("deleted.safetensors"));
  EXPECT_EQ(deleted.integrity, Integrity::None);
  EXPECT_EQ(deleted.tensors.size(), 2u);
  // Skipping the check loads an edited file and marks it unverified.
  EXPECT_EQ(load_safetensors(file("meta.safetensors"), ChecksumCheck::Skip).integrity,
            Integrity::None);
}

TEST_F(Safetensors, OlderDataOnlyChecksumIsStillVerified) {
  // crc32 of the bytes 01 02 is b6cc4292 (zlib.crc32 in Python).
  const std::string entry = R"("a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]})";
  write_bytes(
      file("old.safetensors"),
      raw_file(R"({"__metadata__": {"hourglass.crc32": "b6cc4292"}, )" + entry + "}", "\x01\x02"));
  EXPECT_EQ(load_safetensors(file("old.safetensors")).integrity, Integrity::DataOnly);
  write_bytes(
      file("old_bad.safetensors"),
      raw_file(R"({"__metadata__": {"hourglass.crc32": "b6cc4292"}, )" + entry + "}", "\x01\x03"));
  expect_error([&] { load_safetensors(file("old_bad.safetensors")); }, ErrorKind::InvalidInput,
               {file("old_bad.safetensors"), "checksum mismatch", "expects crc32 b6cc4292"});
}

TEST_F(Safetensors, DeeplyNestedHeadersAreRefusedBeforeParsing) {
  // Headers like these (60,000 levels) exhausted the stack: the error message printed the
  // whole value, recursing once per level. 600,000 levels do so whatever the frame size.
  const size_t depth = 600000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  for (const std::string& header :
       {R"({"__metadata__": {"x": )" + nested + "}}",
        R"({"t": {"dtype": "U8", "shape": )" + nested + R"(, "data_offsets": [0, 0]}})",
        std::string(depth, '{')}) {
    write_bytes(file("deep.safetensors"), raw_file(header, ""));
    for (int reader = 0; reader < 2; ++reader)
      expect_error(
          [&] {
            if (reader == 0)
              load_safetensors(file("deep.safetensors"));
            else
              read_safetensors_metadata(file("deep.safetensors"));
          },
          ErrorKind::InvalidInput,
          {file("deep.safetensors"), "more than 64 levels deep", "needs 3"});
  }
  // 64 levels are parsed (and the value refused for what it is); brackets inside strings
  // do not count.
  const std::string deep64 = std::string(62, '[') + std::string(62, ']');
  write_bytes(file("d64.safetensors"),
              raw_file(R"({"__metadata__": {"x": )" + deep64 + R"(, "y": "[[[[[[[["}})", ""));
  expect_error([&] { load_safetensors(file("d64.safetensors")); }, ErrorKind::InvalidInput,
               {"metadata 'x' is not a string"});
  write_bytes(file("brackets.safetensors"),
              raw_file(R"({"__metadata__": {"y": ")" + std::string(100, '[') + R"("}})", ""));
  EXPECT_EQ(load_safetensors(file("brackets.safetensors")).metadata.at("y"), std::string(100, '['));
}

TEST_F(Safetensors, ErrorsQuoteOnlyAShortPrefixOfUntrustedValues) {
  const std::string long_value = "[" + std::string(100000, '7') + "]";
  const std::string long_name(5000, 'n');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"value", R"({"__metadata__": {"x": )" + long_value + "}}"},
      {"dtype", R"({"t": {"dtype": ")" + long_name + R"(", "shape": [], "data_offsets": [0, 0]}})"},
      {"name",
       R"({")" + long_name + R"(": {"dtype": "U8", "shape": [1], "data_offsets": [0, 2]}})"},
      {"shape", R"({"t": {"dtype": "U8", "shape": [-1, )" + std::string(5000, '1') +
                    R"(], "data_offsets": [0, 0]}})"},
      {"json", R"({"x": ")" + long_name},
  };
  for (const auto& [what, header] : cases) {
    SCOPED_TRACE(what);
    write_bytes(file("long.safetensors"), raw_file(header, std::string(2, '\0')));
    try {
      load_safetensors(file("long.safetensors"));
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_NE(e.message().find(file("long.safetensors")), std::string::npos) << e.message();
      EXPECT_LT(e.message().size(), 400u) << e.message().substr(0, 400);
    }
  }
  EXPECT_EQ(untrusted_excerpt("ab\ncd\xff", 80), "ab\\x0acd\\xff");
  EXPECT_EQ(untrusted_excerpt(std::string(100, 'z'), 10), "zzzzzzzzzz... (100 bytes)");
}

TEST_F(Safetensors, AFifoIsRefusedWithoutBlocking) {
  // `eval pipe.safetensors` used to block forever in open().
  const std::string fifo = file("pipe.safetensors");
  test::make_fifo(fifo);
  const std::string text =
      test::error_text(test::run_unblocking_fifo(fifo, [&] { load_safetensors(fifo); }));
  EXPECT_NE(text.find("FIFO"), std::string::npos) << text;
  EXPECT_NE(text.find(fifo), std::string::npos) << text;
}

}  // namespace
}  // namespace hg
