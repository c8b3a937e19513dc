// The hourglass binary facing corrupt checkpoints: a header nested 600,000 levels deep is a
// one-line error for eval (it ended the process with SIGSEGV) and train --resume auto skips it
// for the previous checkpoint; a checkpoint of the earlier format is refused by eval naming
// --allow-unverified-checkpoint, which then reads it.
#include <gtest/gtest.h>

#include "support/run_binary.h"
#include "support/temp_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hourglass/tensor/safetensors.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

const std::string kQuickstart = HG_SOURCE_DIR "/configs/quickstart.toml";
// Two epochs of 4 steps on small synthetic images, a checkpoint after every step.
const std::string kSmallRun =
    " --no-progress --set data.dataset=synthetic --set data.synthetic.train_size=64"
    " --set data.synthetic.test_size=32 --set data.synthetic.height=16"
    " --set data.synthetic.width=16 --set train.batch_size=16 --set train.epochs=2"
    " --checkpoint-every-steps 1";

std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const auto pos = s.rfind('\n');
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

// Exit code 2 and a last line "hourglass: error: ..." holding every part.
void expect_input_error(const test::RunResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, 2) << r.output.substr(0, 2000);
  const std::string line = last_line(r.output);
  EXPECT_EQ(line.rfind("hourglass: error: ", 0), 0u) << line;
  EXPECT_LT(line.size(), 1000u) << "the error quotes too much of the file";
  for (const std::string& p : parts)
    EXPECT_NE(line.find(p), std::string::npos) << "'" << p << "' not in: " << line;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A safetensors file of `header` (JSON text) and no data.
void write_header_only(const std::string& path, const std::string& header) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes << header;
}

TEST(CliCheckpointIntegrity, DeeplyNestedHeaderIsAOneLineErrorAndResumeFallsBack) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_integrity_deep");
  const test::RunResult first = test::run_hourglass("train " + kQuickstart + kSmallRun +
                                                    " --run-dir " + dir + " --stop-after 3");
  ASSERT_EQ(first.code, 75) << first.output;
  const std::string ck = dir + "/checkpoints/";
  ASSERT_TRUE(fs::exists(ck + "step-000000003.safetensors"));

  const size_t depth = 600000;
  write_header_only(ck + "step-000000003.safetensors", R"({"__metadata__": {"hourglass.config": )" +
                                                           std::string(depth, '[') +
                                                           std::string(depth, ']') + "}}");
  expect_input_error(test::run_hourglass("eval " + ck + "step-000000003.safetensors"),
                     {ck + "step-000000003.safetensors", "more than 64 levels deep"});

  const test::RunResult resumed = test::run_hourglass("train " + kQuickstart + kSmallRun +
                                                      " --run-dir " + dir + " --resume auto");
  ASSERT_EQ(resumed.code, 0) << resumed.output.substr(0, 4000);
  EXPECT_NE(resumed.output.find("skipping checkpoint " + ck + "step-000000003.safetensors"),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from " + ck + "step-000000002.safetensors"),
            std::string::npos)
      << resumed.output;
  EXPECT_TRUE(fs::exists(ck + "discarded/step-000000003.safetensors"));
  EXPECT_EQ(test::run_hourglass("eval " + dir + "/final.safetensors").code, 0);
}

TEST(CliCheckpointIntegrity, EarlierFormatNeedsAllowUnverifiedCheckpoint) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_integrity_v2");
  const test::RunResult run =
      test::run_hourglass("train " + kQuickstart + kSmallRun + " --run-dir " + dir);
  ASSERT_EQ(run.code, 0) << run.output;
  const test::RunResult good = test::run_hourglass("eval " + dir + "/final.safetensors");
  ASSERT_EQ(good.code, 0) << good.output;

  // final.safetensors as checkpoint-v2 wrote it: that format label, no whole-file checksum.
  SafetensorsFile f = load_safetensors(dir + "/final.safetensors");
  f.metadata["hourglass.format"] = "checkpoint-v2";
  const std::string v2 = dir + "/v2.safetensors";
  save_safetensors(v2, f.tensors, f.metadata);
  std::string bytes = read_bytes(v2);
  const std::string field = std::string("\"") + kSafetensorsChecksumKey + "\":\"" +
                            load_safetensors(v2).metadata.at(kSafetensorsChecksumKey) + "\",";
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  std::string header = bytes.substr(8, header_len);
  ASSERT_NE(header.find(field), std::string::npos);
  header.erase(header.find(field), field.size());
  write_header_only(v2, header);
  std::ofstream(v2, std::ios::binary | std::ios::app) << bytes.substr(8 + header_len);
  EXPECT_EQ(load_safetensors(v2).integrity, Integrity::None);

  expect_input_error(test::run_hourglass("eval " + v2),
                     {v2, "'checkpoint-v2'", "--allow-unverified-checkpoint"});
  const test::RunResult allowed =
      test::run_hourglass("eval " + v2 + " --allow-unverified-checkpoint");
  EXPECT_EQ(allowed.code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("without whole-file verification"), std::string::npos)
      << allowed.output;
  // The same accuracy and loss as the verified file ("test accuracy A loss L (fp32, N images,
  // T s)").
  const auto result = [](const std::string& out) {
    const std::string line = last_line(out);
    return line.substr(0, line.find(" ("));
  };
  EXPECT_EQ(result(allowed.output), result(good.output));
  EXPECT_NE(result(good.output).find("test accuracy"), std::string::npos) << good.output;
}

}  // namespace
}  // namespace hg
