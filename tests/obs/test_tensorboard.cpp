// TensorBoard event files read back by an independent reader (support/tfevents_reader.h: bitwise
// CRC-32C, its own protobuf decoding): framing, both masked CRCs, and the decoded events.
#include "hourglass/obs/tensorboard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "hourglass/base/error.h"
#include "support/temp_dir.h"
#include "support/tfevents_reader.h"

namespace hg::obs {
namespace {

namespace fs = std::filesystem;

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }

TEST(Crc32c, KnownAnswers) {
  // RFC 3720 (iSCSI) B.4 and the check value of the CRC catalogue.
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(""), 0u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += char(i);
  EXPECT_EQ(crc_of(ascending), 0x46DD794Eu);
  // The test reader's bitwise CRC agrees on the same answers.
  EXPECT_EQ(test::crc32c_bitwise("123456789", 9), 0xE3069283u);
  EXPECT_EQ(test::crc32c_bitwise(ascending.data(), ascending.size()), 0x46DD794Eu);
  // And with the table on arbitrary bytes, also when continued over two calls.
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes += char((i * 7919) >> 3);
  EXPECT_EQ(crc_of(bytes), test::crc32c_bitwise(bytes.data(), bytes.size()));
  EXPECT_EQ(crc32c(bytes.data() + 300, 700, crc32c(bytes.data(), 300)), crc_of(bytes));
  // TFRecord's mask: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST(TensorBoardWriter, EventsReadBackWithTheirFramingAndCrcs) {
  const std::string dir = test::fresh_temp_dir("tensorboard_events") + "/tb";  // created
  std::string path;
  {
    TensorBoardWriter w(dir);
    path = w.path();
    // Each record reaches the file as it is written.
    EXPECT_EQ(test::read_tfevents(path).size(), 1u);
    w.scalars(10, {{"step/loss", 2.25}, {"step/lr", 0.1}}, 1700000000.5);
    EXPECT_EQ(test::read_tfevents(path).size(), 2u);
    w.session_start(11, 1700000001.0);
    const int64_t big = (int64_t(1) << 40) + 3;  // a varint of six bytes
    w.scalars(big, {{"epoch/test_acc", 0.875}, {"epoch/nan", NAN}, {"epoch/neg", -1e-3}},
              1700000002.25);
    w.scalars(0, {}, 1700000003.0);  // no values: an event with an empty summary
  }
  const std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir));

  const std::vector<test::TfEvent> events = test::read_tfevents(path);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.5e9);  // the writer's clock: after 2017
  EXPECT_TRUE(events[0].scalars.empty());

  EXPECT_EQ(events[1].step, 10);
  EXPECT_EQ(events[1].wall_time, 1700000000.5);
  ASSERT_EQ(events[1].scalars.size(), 2u);
  EXPECT_EQ(events[1].scalars[0].first, "step/loss");
  EXPECT_EQ(events[1].scalars[0].second, 2.25f);
  EXPECT_EQ(events[1].scalars[1].first, "step/lr");
  EXPECT_EQ(events[1].scalars[1].second, 0.1f);
  EXPECT_EQ(events[1].session_status, -1);

  EXPECT_EQ(events[2].step, 11);
  EXPECT_EQ(events[2].session_status, 1);  // SessionLog.START
  EXPECT_TRUE(events[2].scalars.empty());

  EXPECT_EQ(events[3].step, (int64_t(1) << 40) + 3);
  EXPECT_EQ(events[3].wall_time, 1700000002.25);
  ASSERT_EQ(events[3].scalars.size(), 3u);
  EXPECT_EQ(events[3].scalars[0].first, "epoch/test_acc");
  EXPECT_EQ(events[3].scalars[0].second, 0.875f);
  EXPECT_TRUE(std::isnan(events[3].scalars[1].second));
  EXPECT_EQ(events[3].scalars[2].second, -1e-3f);

  EXPECT_EQ(events[4].step, 0);
  EXPECT_TRUE(events[4].scalars.empty());
}

TEST(TensorBoardWriter, TheReaderRejectsACorruptedRecord) {
  // The CRCs guard the records: one flipped bit in the data, or in the length, is caught.
  const std::string dir = test::fresh_temp_dir("tensorboard_corrupt");
  std::string path;
  {
    TensorBoardWriter w(dir);
    path = w.path();
    w.scalars(1, {{"a", 1.0}});
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 40u);
  for (size_t flip : {bytes.size() - 6, size_t(2)}) {
    std::string broken = bytes;
    broken[flip] = char(broken[flip] ^ 0x10);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << broken;
    EXPECT_THROW(test::read_tfevents(path), std::runtime_error) << "flipped byte " << flip;
  }
}

TEST(TensorBoardWriter, TwoWritersInOneDirectoryGetTheirOwnFiles) {
  const std::string dir = test::fresh_temp_dir("tensorboard_two");
  TensorBoardWriter a(dir), b(dir);
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(test::tfevents_files(dir).size(), 2u);
}

TEST(TensorBoardWriter, AnUncreatableDirectoryIsARuntimeErrorNamingIt) {
  try {
    TensorBoardWriter w("/proc/hourglass_no_such_dir/tb");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(e.message().find("/proc/hourglass_no_such_dir/tb"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace hg::obs
