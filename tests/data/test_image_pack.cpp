// Packs: the images copied byte for byte into shards of the target size, the shards tar
// archives in WebDataset's layout (listed and extracted by GNU tar), a loader over a pack giving
// the batches it gives over the folder, packs of the raw-shard format still read, the index's
// round trip, and corrupt or interrupted packs refused with errors naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/image_fixtures.h"
#include "hourglass/base/atomic_file.h"
#include "hourglass/data/image_pack.h"
#include "hourglass/data/image_split.h"
#include "hourglass/data/loader.h"

namespace hg::data {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::fails_with;

void put(const std::string& path, const Bytes& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  test::write_file(path, bytes);
}

// root/{a,b,c}/ with JPEGs and PNGs of varied sizes.
void make_folder(const std::string& root) {
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 5; ++i) {
      const int h = 12 + 3 * i, w = 30 - 2 * i;
      put(fmt::format("{}/{}/{}.{}", root, char('a' + c), i, i % 2 ? "png" : "jpg"),
          i % 2 ? test::png_of(h, w, c * 5 + i) : test::jpeg_of(h, w, c * 5 + i));
    }
  }
}

void flip_byte(const std::string& path, size_t offset) {
  Bytes b = test::read_file(path);
  b[offset] ^= 0x5A;
  test::write_file(path, b);
}

TEST(ImagePack, CopiesEveryImageIntoShardsOfTheTargetSize) {
  test::ScratchDir dir;
  make_folder(dir.path() + "/imgs");
  const ImageFolderIndex folder = scan_image_folder(dir.path() + "/imgs");
  const PackSummary s = write_image_pack(folder, dir.path() + "/pack", 6000);
  EXPECT_EQ(s.samples, 15);
  EXPECT_GT(s.shards, 2);
  const PackImages pack(dir.path() + "/pack");
  EXPECT_EQ(pack.classes(), folder.classes);
  ASSERT_EQ(pack.size(), 15);
  int64_t total = 0;
  for (int64_t i = 0; i < pack.size(); ++i) {
    const std::vector<uint8_t> bytes = pack.read(i);
    EXPECT_EQ(bytes, test::read_file(folder.samples[size_t(i)].path)) << i;
    EXPECT_EQ(pack.label(i), folder.samples[size_t(i)].label);
    total += int64_t(bytes.size());
  }
  EXPECT_EQ(total, s.bytes);
  for (int64_t sh = 0; sh < s.shards; ++sh) {
    const auto size = int64_t(fs::file_size(dir.path() + "/pack/" + pack_shard_name(uint32_t(sh))));
    EXPECT_GT(size, 0);
    EXPECT_LE(size, 6000) << "no single sample here is larger than the target";
    EXPECT_EQ(size % 512, 0) << "a tar archive is whole blocks";
  }
  pack.verify_shards();
  EXPECT_NE(pack.where(0).find("/pack/shard-00000.tar"), std::string::npos);
  // GNU tar reads the shards: per sample <key>.<ext> with the image's bytes, then <key>.cls with
  // its label, keys the sample numbers in order.
  const std::string out = dir.path() + "/untarred";
  fs::create_directories(out);
  std::string listing;
  for (int64_t sh = 0; sh < s.shards; ++sh) {
    const std::string shard = dir.path() + "/pack/" + pack_shard_name(uint32_t(sh));
    ASSERT_EQ(std::system(("tar -xf '" + shard + "' -C '" + out + "'").c_str()), 0) << shard;
    ASSERT_EQ(std::system(("tar -tf '" + shard + "' >> '" + out + "/list'").c_str()), 0);
  }
  std::ifstream list(out + "/list");
  std::vector<std::string> names;
  for (std::string line; std::getline(list, line);) names.push_back(line);
  ASSERT_EQ(names.size(), 30u);
  for (size_t i = 0; i < 15; ++i) {
    const std::string path = folder.samples[i].path;
    const std::string ext = fs::path(path).extension().string();
    const std::string key = fmt::format("{:09d}", i);
    EXPECT_EQ(names[2 * i], key + ext);
    EXPECT_EQ(names[2 * i + 1], key + ".cls");
    EXPECT_EQ(test::read_file(out + "/" + key + ext), test::read_file(path)) << i;
    std::ifstream cls(out + "/" + key + ".cls");
    std::stringstream text;
    text << cls.rdbuf();
    EXPECT_EQ(text.str(), std::to_string(folder.samples[i].label)) << i;
  }
}

// A pack of the raw-shard format (index version 2, images back to back in shard-NNNNN.bin)
// still reads.
TEST(ImagePack, PacksWithRawShardsStillRead) {
  test::ScratchDir dir;
  make_folder(dir.path() + "/imgs");
  const ImageFolderIndex folder = scan_image_folder(dir.path() + "/imgs");
  const std::string p = dir.path() + "/old";
  fs::create_directories(p);
  PackIndex index;
  index.version = 2;
  index.classes = folder.classes;
  Bytes shard;
  for (const ImageSample& sample : folder.samples) {
    const Bytes image = test::read_file(sample.path);
    PackRecord r;
    r.offset = shard.size();
    r.length = uint32_t(image.size());
    r.label = uint32_t(sample.label);
    r.crc = uint32_t(::crc32(0, image.data(), unsigned(image.size())));
    index.records.push_back(r);
    shard.insert(shard.end(), image.begin(), image.end());
  }
  index.shard_sizes = {shard.size()};
  index.shard_crcs = {uint32_t(::crc32(0, shard.data(), unsigned(shard.size())))};
  test::write_file(p + "/shard-00000.bin", shard);
  write_file_atomic(p + "/" + kPackIndexName, serialize_pack_index(index));
  const PackImages pack(p);
  ASSERT_EQ(pack.size(), 15);
  for (int64_t i = 0; i < pack.size(); ++i)
    EXPECT_EQ(pack.read(i), test::read_file(folder.samples[size_t(i)].path)) << i;
  pack.verify_shards();
  EXPECT_NE(pack.where(0).find("shard-00000.bin"), std::string::npos);
}

TEST(ImagePack, LoaderReadsAPackAsItReadsTheFolder) {
  test::ScratchDir dir;
  make_folder(dir.path() + "/data/train");
  write_image_pack(scan_image_folder(dir.path() + "/data/train"), dir.path() + "/packed/train",
                   4000);
  ImageFileOptions o;
  o.image_size = 10;
  auto folder = open_image_split(dir.path() + "/data", Split::Train, o);
  auto packed = open_image_split(dir.path() + "/packed", Split::Train, o);
  EXPECT_EQ(packed->source(), dir.path() + "/packed/train");
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.augment = true;
  lo.seed = 5;
  lo.workers = 2;
  lo.transform = default_transform(kImageFolderDataset);
  DataLoader a(folder, lo), b(packed, lo);
  for (int64_t i = 0; i < a.batches_per_epoch(); ++i) {
    const Batch x = a.make_batch(1, i), y = b.make_batch(1, i);
    EXPECT_EQ(x.images.to_vector<float>(), y.images.to_vector<float>()) << i;
    EXPECT_EQ(x.labels.to_vector<int64_t>(), y.labels.to_vector<int64_t>()) << i;
  }
}

TEST(ImagePack, IndexRoundTrips) {
  PackIndex index;
  index.classes = {"cat", "dog"};
  index.shard_names = {"a.tar", "b.tar"};
  index.shard_sizes = {100, 50};
  index.shard_crcs = {0x12345678u, 0x9abcdef0u};
  index.records = {{0, 0, 60, 1, 7}, {0, 60, 40, 0, 8}, {1, 10, 40, 1, 0xfedcba98u}};
  const PackIndex back = parse_pack_index(serialize_pack_index(index), "i");
  EXPECT_EQ(back.version, 3u);
  EXPECT_EQ(back.shard_names, index.shard_names);
  EXPECT_EQ(back.classes, index.classes);
  EXPECT_EQ(back.shard_sizes, index.shard_sizes);
  EXPECT_EQ(back.shard_crcs, index.shard_crcs);
  ASSERT_EQ(back.records.size(), 3u);
  EXPECT_EQ(back.records[2].offset, 10u);
  EXPECT_EQ(back.records[2].label, 1u);
  EXPECT_EQ(back.records[2].crc, 0xfedcba98u);
  // Version 1 (records without a CRC32, 4 bytes shorter each) still reads.
  PackIndex v1 = index;
  v1.version = 1;
  v1.shard_names.clear();
  const std::string v1_bytes = serialize_pack_index(v1);
  EXPECT_EQ(v1_bytes.size() + 12 + 2 * (4 + 5), serialize_pack_index(index).size());
  const PackIndex back1 = parse_pack_index(v1_bytes, "v1");
  EXPECT_EQ(back1.version, 1u);
  EXPECT_EQ(back1.records[1].offset, 60u);
  EXPECT_EQ(back1.records[1].crc, 0u);
  // A record past its shard's end, or a label beyond the classes, is refused even with a
  // valid CRC.
  PackIndex bad = index;
  bad.records[2].offset = 11;
  EXPECT_TRUE(fails_with([&] { parse_pack_index(serialize_pack_index(bad), "bad.hgpack"); },
                         {"bad.hgpack", "sample 2", "outside"}));
  bad = index;
  bad.shard_names[1] = "../b.tar";  // a shard name is a file in the pack's folder
  EXPECT_TRUE(fails_with([&] { parse_pack_index(serialize_pack_index(bad), "bad.hgpack"); },
                         {"bad.hgpack", "not a file name"}));
  bad = index;
  bad.records[0].label = 2;
  EXPECT_TRUE(fails_with([&] { parse_pack_index(serialize_pack_index(bad), "bad.hgpack"); },
                         {"bad.hgpack", "label 2"}));
}

TEST(ImagePack, CorruptPacksNameTheFile) {
  test::ScratchDir dir;
  make_folder(dir.path() + "/imgs");
  const std::string p = dir.path() + "/pack", index = p + "/" + kPackIndexName;
  write_image_pack(scan_image_folder(dir.path() + "/imgs"), p, 3000);
  const Bytes good_index = test::read_file(index);
  flip_byte(index, 40);
  EXPECT_TRUE(fails_with([&] { PackImages x(p); }, {index, "CRC32", "hourglass pack"}));
  test::write_file(index, Bytes(good_index.begin(), good_index.begin() + 30));
  EXPECT_TRUE(fails_with([&] { PackImages x(p); }, {index, "corrupt pack index"}));
  test::write_file(index, {'n', 'o', 'p', 'e'});
  EXPECT_TRUE(fails_with([&] { PackImages x(p); }, {index, "not a pack index"}));
  test::write_file(index, good_index);
  // A shard cut short: its size no longer matches the index.
  const std::string shard1 = p + "/" + pack_shard_name(1);
  const Bytes shard_bytes = test::read_file(shard1);
  test::write_file(shard1, Bytes(shard_bytes.begin(), shard_bytes.end() - 1));
  EXPECT_TRUE(fails_with([&] { PackImages x(p); }, {shard1, "bytes, its index"}));
  // A shard with a changed byte: found by verify_shards, and by reading the image it is in
  // (its own CRC32), so a loader skips that image with a warning instead of training on it.
  test::write_file(shard1, shard_bytes);
  flip_byte(shard1, 600);  // in the first image: past its 512-byte tar header
  const PackImages pack(p);
  EXPECT_TRUE(fails_with([&] { pack.verify_shards(); }, {shard1, "CRC32"}));
  int64_t damaged = -1;
  for (int64_t i = 0; i < pack.size(); ++i) {
    try {
      pack.read(i);
    } catch (const Error& e) {
      EXPECT_EQ(damaged, -1) << "a second image failed: " << e.message();
      damaged = i;
      EXPECT_NE(e.message().find("corrupt image data: CRC32"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(pack_shard_name(1)), std::string::npos) << e.message();
    }
  }
  EXPECT_GE(damaged, 0) << "no image noticed the changed byte";
  fs::remove(p + "/" + pack_shard_name(0));
  EXPECT_TRUE(fails_with([&] { PackImages x(p); }, {pack_shard_name(0), "not found"}));
}

TEST(ImagePack, AnInterruptedPackLeavesNoIndex) {
  test::ScratchDir dir;
  make_folder(dir.path() + "/imgs");
  const std::string p = dir.path() + "/pack";
  write_image_pack(scan_image_folder(dir.path() + "/imgs"), p, 3000);
  ASSERT_TRUE(is_image_pack(p));
  // Packing again fails at an image that cannot be read (replaced by a FIFO after the scan,
  // which skips FIFOs) after some shards were rewritten: the old index is gone, so nothing
  // describes the new shards wrongly.
  const std::string zz = dir.path() + "/imgs/b/zz.jpg";
  test::write_file(zz, {1, 2, 3});
  const ImageFolderIndex index = scan_image_folder(dir.path() + "/imgs");
  fs::remove(zz);
  ASSERT_EQ(::mkfifo(zz.c_str(), 0644), 0);
  EXPECT_TRUE(fails_with([&] { write_image_pack(index, p, 3000); }, {"zz.jpg", "FIFO"}));
  EXPECT_FALSE(is_image_pack(p));
  EXPECT_TRUE(fails_with([&] { PackImages x(p); }, {kPackIndexName, "not found"}));
}

// Tar shards written by GNU tar in WebDataset's layout, in its own format (a GNU long name), in
// POSIX ustar (a name split into prefix and name) and in pax (a path longer than ustar holds),
// each sample with a member that is neither image nor label: indexed as a pack whose images and
// labels are the files'.
TEST(ImagePack, IndexesWebDatasetShardsWrittenByTar) {
  test::ScratchDir dir;
  const std::string src = dir.path() + "/src", shards = dir.path() + "/shards";
  const std::string deep(120, 'd');  // a directory name past ustar's 100 bytes
  fs::create_directories(src + "/" + deep);
  fs::create_directories(shards);
  struct Sample {
    std::string key, ext;
    Bytes image;
    int label;
  };
  std::vector<Sample> samples;
  for (int i = 0; i < 6; ++i) {
    // Keys as paths: sample 4 shares its file name with sample 3, in another directory.
    const std::string key =
        (i == 2 || i >= 4 ? deep + "/" : "") + fmt::format("s{:03d}", i == 4 ? 3 : i);
    Sample x{key, i % 2 ? "png" : "jpg",
             i % 2 ? test::png_of(9, 7 + i, i) : test::jpeg_of(9, 7 + i, i), (i * 5) % 4};
    put(src + "/" + key + "." + x.ext, x.image);
    const std::string label = std::to_string(x.label);
    put(src + "/" + key + ".cls", Bytes(label.begin(), label.end()));
    put(src + "/" + key + ".json", Bytes{'{', '}'});
    samples.push_back(x);
  }
  auto members = [&](int from, int to) {
    std::string list;
    for (int i = from; i < to; ++i) {
      const Sample& x = samples[size_t(i)];
      list += " '" + x.key + "." + x.ext + "' '" + x.key + ".cls' '" + x.key + ".json'";
    }
    return list;
  };
  // Samples 2, 4 and 5 lie under the long directory: a GNU long name, a ustar prefix, a pax path.
  auto tar = [&](const char* format, const char* shard, int from, int to) {
    return std::system(("cd '" + src + "' && tar --format=" + format + " -cf '" + shards + "/" +
                        shard + "'" + members(from, to))
                           .c_str());
  };
  ASSERT_EQ(tar("gnu", "a-000.tar", 0, 3), 0);
  ASSERT_EQ(tar("ustar", "a-001.tar", 3, 5), 0);
  ASSERT_EQ(tar("pax", "a-002.tar", 5, 6), 0);
  const PackSummary s = index_tar_shards(shards);
  EXPECT_EQ(s.samples, 6);
  EXPECT_EQ(s.shards, 3);
  const PackImages pack(shards);
  EXPECT_EQ(pack.classes(), (std::vector<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(pack.size(), 6);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(pack.read(i), samples[size_t(i)].image) << i;
    EXPECT_EQ(pack.label(i), samples[size_t(i)].label) << i;
  }
  pack.verify_shards();
  EXPECT_NE(pack.where(4).find("a-001.tar"), std::string::npos);
  // A sample without its label is refused, naming the shard and the key.
  fs::remove(src + "/s001.cls");
  ASSERT_EQ(std::system(("cd '" + src + "' && tar -cf '" + shards +
                         "/a-000.tar' s000.jpg s000.cls s001.png")
                            .c_str()),
            0);
  EXPECT_TRUE(
      fails_with([&] { index_tar_shards(shards); }, {"a-000.tar", "'s001'", "no cls member"}));
}

}  // namespace
}  // namespace hg::data
