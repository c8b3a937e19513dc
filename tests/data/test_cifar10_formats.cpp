// CIFAR-10 in each form a user may have on disk: the python version (pickles, as torchvision
// downloads it), both .tar.gz archives read in place, and the binary version; which one wins
// when several are present; and clear errors for damaged pickles and archives.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/cifar10_fixtures.h"
#include "data/fixtures.h"
#include "hourglass/data/dataset.h"
#include "hourglass/data/tar_gz_reader.h"
#include "support/fifo.h"

namespace hg::data {
namespace {

using test::Bytes;
using test::cifar_python_batch;
using test::cifar_records;
using test::fails_with;
using test::PickleOptions;
using test::PickleStyle;
using test::ScratchDir;

constexpr int kPerFile = 3;  // images per training batch
constexpr int kTest = 4;     // images in the test batch

// Batch b (1..5; 0 for the test batch) of a data set whose seeds start at `base`.
int first_seed(int base, int b) { return b == 0 ? base + 100 : base + (b - 1) * kPerFile; }
int batch_size(int b) { return b == 0 ? kTest : kPerFile; }
std::string batch_name(int b) { return b == 0 ? "test_batch" : "data_batch_" + std::to_string(b); }

void write_binary(const std::string& dir, int base = 0) {
  std::filesystem::create_directories(dir);
  for (int b = 0; b <= 5; ++b) {
    test::write_file(dir + "/" + batch_name(b) + ".bin",
                     cifar_records(batch_size(b), first_seed(base, b)));
  }
}

void write_python(const std::string& dir, int base = 0, PickleOptions options = {}) {
  std::filesystem::create_directories(dir);
  for (int b = 0; b <= 5; ++b) {
    test::write_file(dir + "/" + batch_name(b),
                     cifar_python_batch(batch_size(b), first_seed(base, b), options));
  }
  test::write_file(dir + "/batches.meta", {0x80, 0x02, '}', '.'});  // not read
}

// The members of a published archive, in the scrambled order the real ones list them, with
// the folder entry and the files that are not batches.
std::vector<std::pair<std::string, Bytes>> archive_members(bool python, int base = 0) {
  const std::string folder = python ? "cifar-10-batches-py/" : "cifar-10-batches-bin/";
  std::vector<std::pair<std::string, Bytes>> members = {{folder, {}}};
  for (int b : {4, 0, 3, 2, 5, 1}) {
    const Bytes data = python ? cifar_python_batch(batch_size(b), first_seed(base, b))
                              : cifar_records(batch_size(b), first_seed(base, b));
    members.emplace_back(folder + batch_name(b) + (python ? "" : ".bin"), data);
    if (b == 3) members.emplace_back(folder + "readme.html", Bytes{'h', 'i'});
  }
  return members;
}

void write_archive(const std::string& path, bool python, int base = 0) {
  test::write_gz(path, test::tar_archive(archive_members(python, base)));
}

// ds holds the images of the data set seeded from `base`, for the split, in order.
void expect_content(const ImageDataset& ds, Split split, int base, int64_t limit = 0) {
  std::vector<int> seeds;
  for (int b : split == Split::Test ? std::vector<int>{0} : std::vector<int>{1, 2, 3, 4, 5}) {
    for (int i = 0; i < batch_size(b); ++i) seeds.push_back(first_seed(base, b) + i);
  }
  if (limit > 0) seeds.resize(size_t(limit));
  ASSERT_EQ(ds.size(), int64_t(seeds.size()));
  ASSERT_EQ(ds.pixels.size(), seeds.size() * 3072);
  EXPECT_EQ(ds.name, "cifar10");
  EXPECT_EQ(ds.height, 32);
  EXPECT_EQ(ds.channels, 3);
  EXPECT_EQ(ds.num_classes, 10);
  for (size_t i = 0; i < seeds.size(); ++i) {
    ASSERT_EQ(ds.labels[i], seeds[i] % 10) << "image " << i;
    const uint8_t* img = ds.image(int64_t(i));
    for (int pos = 0; pos < 1024; ++pos) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(img[pos * 3 + c], test::cifar_value(seeds[i], c, pos))
            << "image " << i << " pos " << pos << " c " << c;
      }
    }
  }
}

bool same(const ImageDataset& a, const ImageDataset& b) {
  return a.labels == b.labels && a.pixels == b.pixels && a.height == b.height &&
         a.width == b.width && a.channels == b.channels && a.num_classes == b.num_classes;
}

TEST(Cifar10Formats, PythonFolderEqualsBinaryFolder) {
  ScratchDir dir;
  write_binary(dir.file("bin"));
  for (PickleStyle style :
       {PickleStyle::Python2, PickleStyle::Python3, PickleStyle::Python3Protocol4}) {
    SCOPED_TRACE(int(style));
    // torchvision's root: the archive's folder beside where the archive would be.
    const std::string root = dir.file("root" + std::to_string(int(style)));
    write_python(root + "/cifar-10-batches-py", 0, {.style = style});
    for (Split split : {Split::Train, Split::Test}) {
      const ImageDataset bin = load_cifar10(dir.file("bin"), split);
      const ImageDataset py = load_cifar10(root, split);
      expect_content(py, split, 0);
      EXPECT_TRUE(same(py, bin));
      // The batches folder itself, through load_dataset.
      EXPECT_TRUE(same(load_dataset("cifar10", root + "/cifar-10-batches-py", split), bin));
    }
  }
  EXPECT_NE(load_cifar10(dir.file("root0"), Split::Test).source.find("cifar-10-batches-py"),
            std::string::npos);
}

// A batch with more than 1,000 labels (several APPENDS runs) and more than 256 memo entries
// (LONG_BINPUT): the size of the published batches' structure, at a smaller scale.
TEST(Cifar10Formats, PythonBatchWithLongLists) {
  ScratchDir dir;
  const int n = 1203;
  test::write_file(dir.file("test_batch"), cifar_python_batch(n, 7));
  test::write_file(dir.file("test_batch.bin"), cifar_records(n, 7));
  const ImageDataset py = load_cifar10(dir.path(), Split::Test);  // .bin wins; compare below
  std::filesystem::remove(dir.file("test_batch.bin"));
  EXPECT_TRUE(same(load_cifar10(dir.path(), Split::Test), py));
  EXPECT_EQ(py.size(), n);
}

TEST(Cifar10Formats, ArchivesReadInPlace) {
  ScratchDir dir;
  write_binary(dir.file("bin"));
  for (bool python : {false, true}) {
    SCOPED_TRACE(python ? "python archive" : "binary archive");
    const std::string folder = dir.file(python ? "py" : "binary");
    std::filesystem::create_directories(folder);
    const std::string archive =
        folder + (python ? "/cifar-10-python.tar.gz" : "/cifar-10-binary.tar.gz");
    write_archive(archive, python);
    for (Split split : {Split::Train, Split::Test}) {
      const ImageDataset bin = load_cifar10(dir.file("bin"), split);
      const ImageDataset in_folder = load_cifar10(folder, split);
      expect_content(in_folder, split, 0);
      EXPECT_TRUE(same(in_folder, bin));
      EXPECT_NE(in_folder.source.find(archive), std::string::npos) << in_folder.source;
      // The archive given as the path itself, under any name.
      const std::string renamed = dir.file(python ? "mine-py.tgz" : "mine-bin.tgz");
      std::filesystem::copy_file(archive, renamed,
                                 std::filesystem::copy_options::overwrite_existing);
      EXPECT_TRUE(same(load_cifar10(renamed, split), bin));
    }
    // Never unpacked: the folder holds only the archive.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder),
                            std::filesystem::directory_iterator()),
              1);
  }
}

TEST(Cifar10Formats, LimitAcrossFormats) {
  ScratchDir dir;
  write_binary(dir.file("bin"));
  write_python(dir.file("py"));
  write_archive(dir.file("binary.tar.gz"), false);
  write_archive(dir.file("python.tar.gz"), true);
  for (const char* where : {"bin", "py", "binary.tar.gz", "python.tar.gz"}) {
    SCOPED_TRACE(where);
    for (int64_t limit : {1, 5, 15, 100}) {
      const ImageDataset ds = load_cifar10(dir.file(where), Split::Train, limit);
      expect_content(ds, Split::Train, 0, std::min<int64_t>(limit, 5 * kPerFile));
    }
    EXPECT_EQ(load_dataset("cifar10", dir.file(where), Split::Test, {.limit = 2}).size(), 2);
  }
  // An archive is read only as far as the limit needs: batches after it may be missing.
  auto members = archive_members(true);
  std::erase_if(members, [](const auto& m) { return m.first.ends_with("data_batch_5"); });
  test::write_gz(dir.file("partial.tar.gz"), test::tar_archive(members));
  expect_content(load_cifar10(dir.file("partial.tar.gz"), Split::Train, 4), Split::Train, 0, 4);
  EXPECT_TRUE(
      fails_with([&] { load_cifar10(dir.file("partial.tar.gz"), Split::Train); },
                 {dir.file("partial.tar.gz"), "no member cifar-10-batches-py/data_batch_5"}));
}

// Unpacked binary, unpacked python, binary archive, python archive: each present with its own
// content, removed in turn.
TEST(Cifar10Formats, Precedence) {
  ScratchDir dir;
  write_binary(dir.file("cifar-10-batches-bin"), 1000);
  write_python(dir.file("cifar-10-batches-py"), 2000);
  write_archive(dir.file("cifar-10-binary.tar.gz"), false, 3000);
  write_archive(dir.file("cifar-10-python.tar.gz"), true, 4000);
  expect_content(load_cifar10(dir.path(), Split::Test), Split::Test, 1000);
  std::filesystem::remove_all(dir.file("cifar-10-batches-bin"));
  expect_content(load_cifar10(dir.path(), Split::Test), Split::Test, 2000);
  std::filesystem::remove_all(dir.file("cifar-10-batches-py"));
  expect_content(load_cifar10(dir.path(), Split::Train), Split::Train, 3000);
  std::filesystem::remove(dir.file("cifar-10-binary.tar.gz"));
  expect_content(load_cifar10(dir.path(), Split::Train), Split::Train, 4000);
  // Batch files directly in the folder come before its subfolders.
  write_python(dir.path(), 5000);
  expect_content(load_cifar10(dir.path(), Split::Test), Split::Test, 5000);
}

TEST(Cifar10Formats, WrongFolderNamesEveryLayout) {
  ScratchDir dir;
  const std::vector<std::string> layouts = {"data_batch_1.bin",       "cifar-10-batches-bin",
                                            "data_batch_1",           "cifar-10-batches-py",
                                            "cifar-10-binary.tar.gz", "cifar-10-python.tar.gz"};
  std::vector<std::string> fragments = {"no CIFAR-10 data in " + dir.path(), "download"};
  fragments.insert(fragments.end(), layouts.begin(), layouts.end());
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Train); }, fragments));
  fragments[0] = "no CIFAR-10 data in " + dir.file("nowhere") + " (it does not exist)";
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.file("nowhere"), Split::Train); }, fragments));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {"test_batch.bin", "test_batch (python version)"}));
  // A python folder missing a later batch names it.
  write_python(dir.path());
  std::filesystem::remove(dir.file("data_batch_4"));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Train); },
                         {dir.file("data_batch_4"), "not found", "cifar-10-python.tar.gz"}));
}

// Every prefix of a pickle is refused naming the file; none crashes.
TEST(Cifar10Formats, TruncatedPickle) {
  ScratchDir dir;
  const std::string path = dir.file("test_batch");
  for (PickleStyle style : {PickleStyle::Python2, PickleStyle::Python3Protocol4}) {
    const Bytes whole = cifar_python_batch(2, 0, {.style = style});
    // Every cut within the header and the last 300 bytes (labels, names, the dict's end); a
    // sample of the cuts within the pixel bytes.
    for (size_t cut = 0; cut < whole.size();
         cut += (cut < 300 || cut + 300 > whole.size()) ? 1 : 97) {
      test::write_file(path, Bytes(whole.begin(), whole.begin() + ptrdiff_t(cut)));
      ASSERT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); }, {path}))
          << "cut at " << cut;
    }
  }
  Bytes cut = cifar_python_batch(2, 0);
  cut.pop_back();  // only the STOP opcode missing
  test::write_file(path, cut);
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {path, "pickle: truncated", "before the STOP opcode"}));
}

TEST(Cifar10Formats, RefusesOtherGlobals) {
  ScratchDir dir;
  const std::string path = dir.file("test_batch");
  for (PickleStyle style : {PickleStyle::Python2, PickleStyle::Python3Protocol4}) {
    test::write_file(path, cifar_python_batch(2, 0, {.style = style, .reconstruct = "os.system"}));
    EXPECT_TRUE(fails_with(
        [&] { load_cifar10(dir.path(), Split::Test); },
        {path, "global 'os.system' is not accepted", "numpy.core.multiarray._reconstruct"}));
  }
  // A global that is accepted, but called where numpy never calls it.
  test::write_file(path, cifar_python_batch(2, 0, {.reconstruct = "numpy.dtype"}));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {path, "numpy.dtype is accepted only"}));
}

TEST(Cifar10Formats, WrongShapeOrDtype) {
  ScratchDir dir;
  const std::string path = dir.file("test_batch");
  auto load = [&] { load_cifar10(dir.path(), Split::Test); };
  test::write_file(path, test::cifar_pickle({1, 2}, Bytes(2 * 1024), {.columns = 1024}));
  EXPECT_TRUE(fails_with(load, {path, "shape (2, 1024)", "expected (N, 3072)"}));
  test::write_file(path, cifar_python_batch(2, 0, {.dtype = "<f4"}));
  EXPECT_TRUE(fails_with(load, {path, "dtype '<f4'", "uint8"}));
  test::write_file(path, cifar_python_batch(2, 0, {.rows = 3}));
  EXPECT_TRUE(fails_with(load, {path, "6144 bytes", "(3, 3072)"}));
  test::write_file(path, test::cifar_pickle({1, 2, 3}, Bytes(2 * 3072), {.rows = 2}));
  EXPECT_TRUE(fails_with(load, {path, "3 labels for 2 images"}));
}

TEST(Cifar10Formats, PickleLabelOutOfRange) {
  ScratchDir dir;
  const std::string path = dir.file("test_batch");
  test::write_file(path, test::cifar_pickle({1, 2, 10}, Bytes(3 * 3072)));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {path, "label 10 at index 2", "10 classes"}));
  test::write_file(path, test::cifar_pickle({1, -1}, Bytes(2 * 3072)));
  EXPECT_TRUE(
      fails_with([&] { load_cifar10(dir.path(), Split::Test); }, {path, "label -1 at index 1"}));
  // Within the limit, only the kept labels are checked (as for the binary version).
  EXPECT_EQ(load_cifar10(dir.path(), Split::Test, 1).size(), 1);
}

TEST(Cifar10Formats, DamagedArchives) {
  ScratchDir dir;
  const std::string path = dir.file("cifar-10-python.tar.gz");
  write_archive(path, true);
  const Bytes whole = test::read_file(path);
  auto load = [&] { load_cifar10(dir.path(), Split::Train); };
  // Cut short anywhere: a clear error naming the archive.
  for (size_t cut : {size_t(0), size_t(5), size_t(30), whole.size() / 3, whole.size() / 2,
                     whole.size() - 20, whole.size() - 4}) {
    test::write_file(path, Bytes(whole.begin(), whole.begin() + ptrdiff_t(cut)));
    EXPECT_TRUE(fails_with(load, {path})) << "cut at " << cut;
  }
  // Corrupt compressed data.
  Bytes corrupt = whole;
  for (size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 64; ++i) corrupt[i] ^= 0x5a;
  test::write_file(path, corrupt);
  EXPECT_TRUE(fails_with(load, {path}));
  // Bytes appended after the gzip stream: refused once the archive's end is reached.
  Bytes appended = whole;
  appended.insert(appended.end(), {'e', 'x', 't', 'r', 'a'});
  test::write_file(path, appended);
  EXPECT_TRUE(fails_with(load, {path, "5 bytes after the end of the gzip data"}));
  // Far more than a tar record's padding after the end marker, inside the gzip stream (a small
  // file that inflates to gigabytes): refused at the bound, not inflated whole.
  Bytes padded = test::tar_archive(archive_members(true));
  padded.resize(padded.size() + 2 * TarGzReader::kMaxTailBytes, 0);
  test::write_gz(path, padded);
  EXPECT_TRUE(fails_with(load, {path, "bytes after the archive's end marker"}));
  // Not an archive at all.
  test::write_file(path, Bytes(1000, 'x'));
  EXPECT_TRUE(fails_with(load, {path, "not a readable .tar.gz archive"}));
  // An archive without the batches.
  test::write_gz(path, test::tar_archive({{"other/file", {1, 2, 3}}}));
  EXPECT_TRUE(fails_with(load, {path, "no member cifar-10-batches-py/data_batch_1"}));
  // A file given directly, holding neither layout, names both.
  EXPECT_TRUE(
      fails_with([&] { load_cifar10(path, Split::Test); },
                 {"cifar-10-batches-bin/test_batch.bin or cifar-10-batches-py/test_batch"}));
  // A damaged pickle inside names the archive and the member.
  auto members = archive_members(true);
  members[2].second.resize(members[2].second.size() - 10);  // test_batch
  test::write_gz(path, test::tar_archive(members));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {path + ": member cifar-10-batches-py/test_batch: pickle: truncated"}));
}

// An archive that is a FIFO is refused before it is opened (opening it would wait for a
// writer); one that is a folder is named as one.
TEST(Cifar10Formats, ArchiveThatIsNotAFile) {
  ScratchDir dir;
  const std::string fifo = dir.file("cifar-10-python.tar.gz");
  hg::test::make_fifo(fifo);
  for (const std::string& path : {dir.path(), fifo}) {
    const std::string text = hg::test::error_text(
        hg::test::run_unblocking_fifo(fifo, [&] { load_cifar10(path, Split::Test); }));
    EXPECT_NE(text.find(fifo), std::string::npos) << text;
    EXPECT_NE(text.find("FIFO (named pipe)"), std::string::npos) << text;
  }
  std::filesystem::remove(fifo);
  std::filesystem::create_directory(dir.file("cifar-10-binary.tar.gz"));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {dir.file("cifar-10-binary.tar.gz"), "is a directory"}));
}

// A member larger than any CIFAR-10 batch is refused while it is read, not allocated.
TEST(Cifar10Formats, OversizedMember) {
  ScratchDir dir;
  const std::string path = dir.file("cifar-10-binary.tar.gz");
  test::write_gz(
      path,
      test::tar_archive({{"cifar-10-batches-bin/test_batch.bin", Bytes(size_t(10001) * 3073, 0)}}));
  EXPECT_TRUE(fails_with(
      [&] { load_cifar10(dir.path(), Split::Test); },
      {path, "member cifar-10-batches-bin/test_batch.bin", "larger than 30730000 bytes"}));
}

}  // namespace
}  // namespace hg::data
