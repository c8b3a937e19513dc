// libFuzzer target: the image-folder scan (image_folder.h) and the loader's first reads of what
// it found (image_files.h). The input is a script that builds a small tree in a fresh folder:
// folders, files (a valid 2x2 PNG, a damaged one, fuzzed bytes, empty), symbolic links to
// folders and files (inside the tree, `.` and `..`, outside the tree, dangling, to themselves),
// FIFOs, with names of fuzzed bytes (control characters, spaces, non-UTF-8, long names) and one
// of a few extensions. Beside the image folder an outside folder holds two PNG files that links
// may reach.
//
// A scan that succeeds must list each real file at most once (so no more images than regular
// files were made), only regular files (a FIFO, which would block a reader, is never listed),
// each under the class folder its path names, and no file that really lies in the image folder
// under a class other than the one it is labelled with (no mislabelling through links). The
// first samples are then read and decoded as the loader would, at 8x8.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "hourglass/base/log.h"
#include "hourglass/data/image_files.h"
#include "hourglass/data/image_folder.h"
#include "hourglass/data/transforms.h"

namespace {

namespace fs = std::filesystem;

using hg::fuzz::Script;

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(char((v >> shift) & 0xff));
}

void png_chunk(std::string& out, const char* type, const std::string& body) {
  put_u32(out, uint32_t(body.size()));
  const std::string typed = std::string(type, 4) + body;
  out += typed;
  put_u32(out,
          uint32_t(crc32(0, reinterpret_cast<const Bytef*>(typed.data()), uInt(typed.size()))));
}

// A valid 2x2 RGB PNG.
const std::string& tiny_png() {
  static const std::string png = [] {
    std::string out = "\x89PNG\r\n\x1a\n";
    std::string ihdr;
    put_u32(ihdr, 2);
    put_u32(ihdr, 2);
    ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, no interlace
    png_chunk(out, "IHDR", ihdr);
    const std::string raw("\x00\xff\x00\x00\x00\xff\x00\x00\x00\x00\xff\xff\xff\xff\xff", 14);
    std::string z(compressBound(uLong(raw.size())), '\0');
    uLongf z_size = uLongf(z.size());
    compress(reinterpret_cast<Bytef*>(z.data()), &z_size,
             reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()));
    z.resize(z_size);
    png_chunk(out, "IDAT", z);
    png_chunk(out, "IEND", "");
    return out;
  }();
  return png;
}

constexpr const char* kSuffixes[] = {".jpg", ".png", ".JPEG",     ".PnG",
                                     "",     ".txt", ".jpg.part", ".jpeg"};

// A name of fuzzed bytes ('/' and NUL, which no name can hold, become '_') and a suffix. A
// length byte of 255 gives a long name, at times longer than a name may be (NAME_MAX).
std::string next_name(Script& in) {
  const uint8_t length = in.byte();
  std::string name;
  if (length == 255) {
    name.assign(240 + in.byte() % 32, 'n');
  } else {
    for (int i = 0; i < length % 12; ++i) {
      const char c = char(in.byte());
      name.push_back(c == '/' || c == '\0' ? '_' : c);
    }
  }
  name += kSuffixes[in.byte() % std::size(kSuffixes)];
  return name.empty() ? "e" : name;
}

bool write_file(const fs::path& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size());
  ::close(fd);
  return ok;
}

// The tree an input builds, and what it made.
struct Tree {
  fs::path base, root, outside;
  std::vector<fs::path> folders;  // root and the folders made under it
  std::vector<fs::path> files;    // regular files made (the outside ones included)
};

void build(Script& in, Tree& t) {
  std::error_code ec;
  fs::remove_all(t.base, ec);
  fs::create_directories(t.root);
  fs::create_directories(t.outside / "sub");
  for (const fs::path& p : {t.outside / "o.png", t.outside / "sub" / "p.png"}) {
    write_file(p, tiny_png());
    t.files.push_back(p);
  }
  t.folders = {t.root};
  for (int op = 0; op < 48 && !in.done(); ++op) {
    const uint8_t kind = in.byte() % 8;
    const fs::path parent = t.folders[in.byte() % t.folders.size()];
    const fs::path path = parent / next_name(in);
    switch (kind) {
      case 0:  // a folder
        if (fs::create_directory(path, ec)) t.folders.push_back(path);
        break;
      case 1:
      case 2: {  // a file
        std::string bytes;
        switch (in.byte() % 4) {
          case 0: bytes = tiny_png(); break;
          case 1: bytes = tiny_png(), bytes[bytes.size() / 2] ^= 0x5a; break;
          case 2:
            for (int i = in.byte() % 32; i > 0; --i) bytes.push_back(char(in.byte()));
            break;
          default: break;  // empty
        }
        if (write_file(path, bytes)) t.files.push_back(path);
        break;
      }
      case 3: {  // a link to a folder
        const uint8_t which = in.byte();
        fs::path target;
        switch (which % 6) {
          case 0: target = "."; break;
          case 1: target = ".."; break;
          case 2: target = "../.."; break;
          case 3: target = t.outside; break;
          case 4: target = t.folders[which / 6 % t.folders.size()]; break;  // absolute
          default: target = t.folders[which / 6 % t.folders.size()].lexically_relative(parent);
        }
        fs::create_directory_symlink(target, path, ec);
        break;
      }
      case 4: {  // a link to a file
        const uint8_t which = in.byte();
        fs::path target;
        switch (which % 4) {
          case 0: target = "missing.jpg"; break;
          case 1: target = path.filename(); break;  // itself
          case 2: target = t.files[which / 4 % t.files.size()]; break;
          default: target = t.files[which / 4 % t.files.size()].lexically_relative(parent);
        }
        fs::create_symlink(target, path, ec);
        break;
      }
      case 5:  // a FIFO
        ::mkfifo(path.c_str(), 0644);
        break;
      default:  // a class folder holding a valid image, to reach the later checks quickly
        if (fs::create_directory(path, ec)) {
          t.folders.push_back(path);
          if (write_file(path / "a.png", tiny_png())) t.files.push_back(path / "a.png");
        }
    }
  }
}

bool inside(const fs::path& p, const fs::path& folder) {
  const std::string s = p.string(), f = folder.string() + "/";
  return s.compare(0, f.size(), f) == 0;
}

void check_index(const hg::data::ImageFolderIndex& index, const Tree& t) {
  using hg::fuzz::check;
  check(index.samples.size() <= t.files.size(), "more images than regular files were made");
  check(std::is_sorted(index.classes.begin(), index.classes.end()), "classes not in byte order");
  std::error_code ec;
  const fs::path root_real = fs::canonical(t.root, ec);
  check(!ec, "the image folder cannot be resolved");
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const hg::data::ImageSample& s : index.samples) {
    check(s.label >= 0 && size_t(s.label) < index.classes.size(), "label out of range", s.path);
    const fs::path class_dir = t.root / index.classes[size_t(s.label)];
    check(inside(s.path, class_dir), "a sample is not under the folder of its class", s.path);
    struct stat st {};
    check(::stat(s.path.c_str(), &st) == 0 && S_ISREG(st.st_mode),
          "a sample that is not a regular file (a FIFO, a folder, a broken link)", s.path);
    check(seen.insert({st.st_dev, st.st_ino}).second, "one file listed twice", s.path);
    const fs::path real = fs::canonical(s.path, ec);
    check(!ec, "a sample cannot be resolved", s.path);
    const fs::path class_real = fs::canonical(class_dir, ec);
    check(!ec, "a class folder cannot be resolved", class_dir.string());
    if (inside(real, root_real))
      check(inside(real, class_real), "a file of the image folder labelled with another class",
            s.path + " is " + real.string());
  }
}

// The loader's first reads: each of the first samples decoded (or skipped as unreadable).
void read_first(const hg::data::ImageFolderIndex& index) {
  hg::data::ImageFileOptions options;
  options.image_size = 8;
  const hg::data::ImageFileSource source(std::make_shared<hg::data::FolderImages>(index), options);
  const hg::data::ImageTransform transform(hg::data::TransformOptions{}, 8, 8, 3);
  std::vector<uint8_t> pixels(8 * 8 * 3);
  for (int64_t i = 0; i < std::min<int64_t>(source.size(), 4); ++i) {
    hg::data::SampleRequest request;
    request.augment = i % 2 == 1;
    request.transform = &transform;
    int64_t label = -1;
    if (source.write(i, request, pixels.data(), nullptr, &label))
      hg::fuzz::check(label == index.samples[size_t(i)].label, "a read sample's label changed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (hg::set_log_level("error"), true);  // the skipped-image warnings
  (void)quiet;
  Tree t;
  t.base = hg::fuzz::scratch_dir() / "tree";
  t.root = t.base / "images";
  t.outside = t.base / "outside";
  Script in{data, size};
  build(in, t);
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::data::ImageFolderIndex index = hg::data::scan_image_folder(t.root.string());
        check_index(index, t);
        read_first(index);
      },
      t.root.string());
  std::error_code ec;
  fs::remove_all(t.base, ec);
  return 0;
}
