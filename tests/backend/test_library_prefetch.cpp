// backend/gpu/library_prefetch.h: which files the page-cache warm-up reads (GPU builds only;
// the reading itself is readahead(2), best effort, and changes no result).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/library_prefetch.h"

namespace {

namespace fs = std::filesystem;

void write_bytes(const fs::path& p, size_t n) {
  std::ofstream(p, std::ios::binary) << std::string(n, 'x');
}

TEST(LibraryPrefetch, MappedLibrariesAndEachStemsFilesBesideThemOnceEachLargestFirst) {
  const fs::path lib = hg::test::fresh_temp_dir("library_prefetch");
  const fs::path other = lib / "other";
  fs::create_directories(other);
  write_bytes(lib / "libcudnn.so.9.14.0", 100);
  fs::create_symlink("libcudnn.so.9.14.0", lib / "libcudnn.so.9");
  write_bytes(lib / "libcudnn_engines_precompiled.so.9.14.0", 3000);
  write_bytes(lib / "libcudnn_ops.so.9.14.0", 2000);
  write_bytes(lib / "libcudnn.txt", 5000);               // not a shared library
  write_bytes(lib / "libcublas.so.13", 4000);            // another stem, not mapped
  write_bytes(lib / "libcublasLt.so.13.1", 1500);        // a stem's file beside a mapped one
  write_bytes(other / "libcublasLt.so.13", 1000);        // mapped, alone in its folder
  write_bytes(other / "libc.so.6", 9000);                // mapped, not a vendor library
  fs::create_directories(lib / "libcudnn_folder.so.d");  // not a regular file
  const std::string maps = "7f0000000000-7f0000001000 r-xp 00000000 08:01 1 " +
                           (lib / "libcudnn.so.9").string() +
                           "\n"
                           "7f0000001000-7f0000002000 r--p 00001000 08:01 1 " +
                           (lib / "libcudnn.so.9").string() +
                           "\n"
                           "7f0000003000-7f0000004000 r-xp 00000000 08:01 2 " +
                           (other / "libcublasLt.so.13").string() +
                           "\n"
                           "7f0000005000-7f0000006000 r-xp 00000000 08:01 3 " +
                           (other / "libc.so.6").string() +
                           "\n"
                           "7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]\n";
  const std::vector<std::string> files =
      hg::gpu::vendor_library_files(maps, {"libcudnn", "libcublasLt"});
  const std::vector<std::string> expected = {
      fs::canonical(lib / "libcudnn_engines_precompiled.so.9.14.0").string(),
      fs::canonical(lib / "libcudnn_ops.so.9.14.0").string(),
      fs::canonical(lib / "libcublasLt.so.13.1").string(),
      fs::canonical(other / "libcublasLt.so.13").string(),
      fs::canonical(lib / "libcudnn.so.9.14.0").string()};
  EXPECT_EQ(files, expected);
}

TEST(LibraryPrefetch, NothingMappedNothingRead) {
  EXPECT_TRUE(hg::gpu::vendor_library_files("", {"libcudnn"}).empty());
  EXPECT_TRUE(hg::gpu::vendor_library_files("garbage line without a path\n", {"libcudnn"}).empty());
  // A mapped path that no longer exists is skipped.
  EXPECT_TRUE(hg::gpu::vendor_library_files("7f00-7f01 r-xp 0 0:0 0 /nonexistent/libcudnn.so.9\n",
                                            {"libcudnn"})
                  .empty());
}

TEST(LibraryPrefetch, StartingItTwiceIsHarmless) {
  hg::gpu::prefetch_vendor_libraries();
  hg::gpu::prefetch_vendor_libraries();
}

}  // namespace
#else
TEST(LibraryPrefetch, NeedsAGpuBuild) { GTEST_SKIP() << "built without a GPU backend"; }
#endif
