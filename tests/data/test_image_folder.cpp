// The image-folder index: classes in byte order, images found by extension in any case and in
// nested folders, hidden and other files skipped, and errors naming the root or class folder.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "data/fixtures.h"
#include "hourglass/data/image_folder.h"

namespace hg::data {
namespace {

namespace fs = std::filesystem;
using test::fails_with;

void touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  test::write_file(path, {1, 2, 3});
}

TEST(ImageFolder, ImageFileNames) {
  EXPECT_TRUE(is_image_file_name("a.jpg"));
  EXPECT_TRUE(is_image_file_name("a.JPEG"));
  EXPECT_TRUE(is_image_file_name("a.b.Png"));
  EXPECT_FALSE(is_image_file_name(".a.jpg"));
  EXPECT_FALSE(is_image_file_name("a.gif"));
  EXPECT_FALSE(is_image_file_name("jpg"));
  EXPECT_FALSE(is_image_file_name("a.jpg.txt"));
}

TEST(ImageFolder, ClassesInByteOrderAndSortedSamples) {
  test::ScratchDir dir;
  const std::string r = dir.path();
  touch(r + "/dog/b.jpg");
  touch(r + "/dog/a.PNG");
  touch(r + "/dog/notes.txt");
  touch(r + "/dog/.hidden.jpg");
  touch(r + "/dog/sub/c.jpeg");
  touch(r + "/dog/.cache/d.jpg");
  touch(r + "/Zebra/z.jpg");  // upper case sorts first in byte order
  touch(r + "/cat/x.jpg");
  touch(r + "/.trash/t.jpg");
  touch(r + "/loose.jpg");  // not in a class folder
  const ImageFolderIndex index = scan_image_folder(r);
  EXPECT_EQ(index.root, r);
  EXPECT_EQ(index.classes, (std::vector<std::string>{"Zebra", "cat", "dog"}));
  std::vector<std::string> names;
  std::vector<int64_t> labels;
  for (const auto& s : index.samples) {
    names.push_back(fs::relative(s.path, r).string());
    labels.push_back(s.label);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Zebra/z.jpg", "cat/x.jpg", "dog/a.PNG", "dog/b.jpg",
                                             "dog/sub/c.jpeg"}));
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 2, 2, 2}));
}

TEST(ImageFolder, ErrorsNameTheRootOrClass) {
  test::ScratchDir dir;
  const std::string r = dir.path();
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r + "/absent"); }, {r + "/absent", "not found"}));
  touch(r + "/file.jpg");
  EXPECT_TRUE(
      fails_with([&] { scan_image_folder(r + "/file.jpg"); }, {"file.jpg", "not a folder"}));
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); }, {r, "no class folders"}));
  touch(r + "/a/readme.txt");
  fs::create_directories(r + "/b");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); }, {r, "holds no images", "2 class folders"}));
  touch(r + "/a/1.jpg");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); }, {r + "/b", "holds no .jpg"}));
}

// A folder reached twice (a link loop, or a second link to one folder) would count its images
// again, under the wrong class, or never end: the scan refuses it naming both paths.
TEST(ImageFolder, LinkLoopsAndSecondLinksToAFolderAreRefused) {
  test::ScratchDir dir;
  const std::string r = dir.path();
  touch(r + "/a/1.jpg");
  touch(r + "/b/2.jpg");
  fs::create_directory_symlink("..", r + "/a/loop");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); },
                         {r + "/a/loop", "already reached", "remove the link"}));
  fs::remove(r + "/a/loop");
  fs::create_directory_symlink(".", r + "/a/self");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); }, {r + "/a/self", "already reached"}));
  fs::remove(r + "/a/self");
  fs::create_directory_symlink("../b", r + "/a/b_again");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); }, {r + "/a/b_again", "already reached"}));
  fs::remove(r + "/a/b_again");
  // A link to a folder outside the tree, reached once, is followed.
  touch(r + "/../outside_" + fs::path(r).filename().string() + "/3.jpg");
  fs::create_directory_symlink(
      fs::path(r).parent_path() / ("outside_" + fs::path(r).filename().string()), r + "/b/more");
  EXPECT_EQ(scan_image_folder(r).samples.size(), 3u);
  fs::remove_all(fs::path(r).parent_path() / ("outside_" + fs::path(r).filename().string()));
}

// Found by fuzz_image_folder: an entry named like an image that is not a regular file (a FIFO,
// a broken link) was listed as a labelled sample, so a folder could count more images than it
// holds files. It is skipped (a FIFO is never opened).
TEST(ImageFolder, EntriesThatAreNotRegularFilesAreSkipped) {
  test::ScratchDir dir;
  const std::string r = dir.path();
  touch(r + "/a/1.jpg");
  ASSERT_EQ(::mkfifo((r + "/a/pipe.jpg").c_str(), 0644), 0);
  fs::create_symlink("missing.png", r + "/a/broken.png");
  const ImageFolderIndex index = scan_image_folder(r);
  ASSERT_EQ(index.samples.size(), 1u);
  EXPECT_EQ(index.samples[0].path, r + "/a/1.jpg");
  // A class whose only "images" are not files holds no images.
  ASSERT_EQ(::mkfifo((r + "/b.jpg").c_str(), 0644), 0);
  fs::create_directories(r + "/b");
  ASSERT_EQ(::mkfifo((r + "/b/only.jpg").c_str(), 0644), 0);
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); }, {r + "/b", "holds no .jpg"}));
}

// Found by fuzz_image_folder: links to files were followed without the checks links to folders
// have, so one image could be counted twice, or under a class whose folder does not hold it.
TEST(ImageFolder, LinksToFilesCountAnImageOnceUnderItsOwnClass) {
  test::ScratchDir dir;
  const std::string r = dir.path();
  touch(r + "/a/1.jpg");
  touch(r + "/b/2.jpg");
  touch(r + "/b/notes.txt");
  fs::create_symlink("1.jpg", r + "/a/again.jpg");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); },
                         {r + "/a/again.jpg", "already reached", "remove the link"}));
  fs::remove(r + "/a/again.jpg");
  // Into another class's folder, under a name that class does not count as an image.
  fs::create_symlink("../b/notes.txt", r + "/a/3.jpg");
  EXPECT_TRUE(fails_with([&] { scan_image_folder(r); },
                         {r + "/a/3.jpg", "outside the folder of its class a"}));
  fs::remove(r + "/a/3.jpg");
  // A link within its own class to a file counted nowhere else, and one to a file outside the
  // image folder, are followed.
  touch(r + "/a/.kept/4.txt");
  fs::create_symlink(".kept/4.txt", r + "/a/4.jpg");
  const std::string outside = r + "_outside.png";
  test::write_file(outside, {1});
  fs::create_symlink(outside, r + "/b/5.png");
  EXPECT_EQ(scan_image_folder(r).samples.size(), 4u);
  fs::remove(outside);
}

}  // namespace
}  // namespace hg::data
