#include "hourglass/data/image_folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/log.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::data {

namespace fs = std::filesystem;

namespace {

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

bool is_dir(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_directory(ec);  // follows symbolic links
}

bool is_regular(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_regular_file(ec);  // follows symbolic links; false for a broken one
}

// Every folder a scan has entered, by device and inode (links followed), with the path it was
// first reached by: a folder reached again is a link loop, or a second way into one folder whose
// images would be counted twice (or under another class).
class VisitedFolders {
 public:
  explicit VisitedFolders(std::string root) : root_(std::move(root)) {}
  void enter(const fs::path& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return;  // listing it reports the error
    const auto [it, fresh] =
        seen_.emplace(std::pair<uint64_t, uint64_t>{st.st_dev, st.st_ino}, dir.string());
    if (!fresh)
      throw_invalid(fmt::format("image folder {}: {} leads to {}, which the scan already "
                                "reached (a link loop, or a second link to one folder)",
                                root_, untrusted_excerpt(dir.string(), kPathMax),
                                untrusted_excerpt(it->second, kPathMax)),
                    "remove the link from the image folder (copy the images instead)");
  }

 private:
  std::string root_;
  std::map<std::pair<uint64_t, uint64_t>, std::string> seen_;
};

bool is_link(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_symlink(ec);  // the entry's own type, known from the listing
}

// What a scan met besides images. Entries named like images that are not regular files (FIFOs,
// sockets, devices, broken links) are skipped, since no image can be read from them (opening a
// FIFO would block), and reported once. Symbolic links make the scan check, once it has listed
// everything, that no file is reached twice and none is labelled through a link with a class
// whose folder does not hold it.
struct ScanNotes {
  int64_t not_files = 0;
  std::string first_not_file;
  bool links = false;
};

// With links in the image folder: each image file is a file no other sample is (by device and
// inode; a second link to one image would count it twice, or under two classes), and one whose
// real path lies in the image folder lies in the folder of its class (a link from class a to an
// image in class b's folder would teach the model that b's image is an a).
void check_linked_images(const std::string& root, const std::vector<std::string>& classes,
                         const std::vector<std::vector<std::string>>& per_class) {
  std::error_code ec;
  const fs::path root_real = fs::canonical(root, ec);
  if (ec) throw_invalid(fmt::format("image folder {}: cannot resolve: {}", root, ec.message()));
  const auto within = [](const std::string& path, const std::string& folder) {
    return path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 &&
           path[folder.size()] == '/';
  };
  std::map<std::pair<uint64_t, uint64_t>, std::string> seen;
  for (size_t label = 0; label < classes.size(); ++label) {
    const std::string class_dir = (fs::path(root) / classes[label]).string();
    const std::string class_real = fs::canonical(class_dir, ec).string();
    if (ec)
      throw_invalid(fmt::format("image folder {}: cannot resolve {}: {}", root,
                                untrusted_excerpt(class_dir, kPathMax), ec.message()));
    for (const std::string& path : per_class[label]) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0)
        throw_invalid(fmt::format("image folder {}: cannot stat {}: {}", root,
                                  untrusted_excerpt(path, kPathMax), std::strerror(errno)));
      const auto [it, fresh] =
          seen.emplace(std::pair<uint64_t, uint64_t>{st.st_dev, st.st_ino}, path);
      if (!fresh)
        throw_invalid(fmt::format("image folder {}: {} is the file {} is, which the scan already "
                                  "reached (two links to one image would count it twice)",
                                  root, untrusted_excerpt(path, kPathMax),
                                  untrusted_excerpt(it->second, kPathMax)),
                      "remove the link from the image folder (copy the image instead)");
      const std::string real = fs::canonical(path, ec).string();
      if (ec)
        throw_invalid(fmt::format("image folder {}: cannot resolve {}: {}", root,
                                  untrusted_excerpt(path, kPathMax), ec.message()));
      if (within(real, root_real.string()) && !within(real, class_real))
        throw_invalid(
            fmt::format("image folder {}: {} leads to {}, which lies in the image "
                        "folder but outside the folder of its class {}",
                        root, untrusted_excerpt(path, kPathMax), untrusted_excerpt(real, kPathMax),
                        untrusted_excerpt(classes[label], kPathMax)),
            "remove the link from the image folder (copy the image into the class "
            "folder it belongs to)");
    }
  }
}

// The image files under `dir` (recursively, links followed, hidden entries skipped), sorted by
// folder, then by name.
std::vector<std::string> images_under(const fs::path& dir, VisitedFolders& visited,
                                      ScanNotes& notes) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder, name)
  visited.enter(dir);
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  if (ec) throw_invalid(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw_invalid(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
    const fs::directory_entry& e = *it;
    if (is_link(e)) notes.links = true;
    if (hidden(e.path())) {
      if (is_dir(e)) it.disable_recursion_pending();
      continue;
    }
    if (is_dir(e)) {
      visited.enter(e.path());  // before the iterator descends into it
      continue;
    }
    if (!is_image_file_name(e.path().filename().string())) continue;
    if (!is_regular(e)) {
      if (notes.not_files++ == 0) notes.first_not_file = e.path().string();
      continue;
    }
    found.emplace_back(e.path().parent_path().string(), e.path().filename().string());
  }
  if (ec) throw_invalid(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (const auto& [folder, name] : found) paths.push_back((fs::path(folder) / name).string());
  return paths;
}

}  // namespace

bool is_image_file_name(std::string_view name) {
  if (name.empty() || name[0] == '.') return false;
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string ext(name.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return char(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

ImageFolderIndex scan_image_folder(const std::string& root) {
  const std::string kind = file_kind(root);
  if (kind.empty())
    throw_invalid(fmt::format("image folder {} not found", root),
                  "point data.path at a folder holding one subfolder of images per class");
  if (kind != "a directory")
    throw_invalid(fmt::format("image folder {} is {}, not a folder", root, kind),
                  "point data.path at a folder holding one subfolder of images per class");
  ImageFolderIndex index;
  index.root = root;
  std::error_code ec;
  ScanNotes notes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_dir(*it) && !hidden(it->path())) {
      index.classes.push_back(it->path().filename().string());
      if (is_link(*it)) notes.links = true;
    }
  }
  if (ec) throw_invalid(fmt::format("image folder {}: cannot list: {}", root, ec.message()));
  if (index.classes.empty())
    throw_invalid(fmt::format("image folder {} holds no class folders", root),
                  "put each class's images in a subfolder named after the class "
                  "(root/<class>/<image>.jpg)");
  std::sort(index.classes.begin(), index.classes.end());
  std::vector<std::vector<std::string>> per_class;
  VisitedFolders visited(root);
  visited.enter(root);  // a link back to the root is a loop too
  for (const std::string& name : index.classes)
    per_class.push_back(images_under(fs::path(root) / name, visited, notes));
  if (notes.not_files > 0)
    HG_LOG_WARN(
        "image folder {}: skipped {} entr{} named like an image but not a regular file "
        "(a FIFO, socket, device or broken link), the first {}",
        root, notes.not_files, notes.not_files == 1 ? "y" : "ies",
        untrusted_excerpt(notes.first_not_file, kPathMax));
  if (notes.links) check_linked_images(root, index.classes, per_class);
  const bool any =
      std::any_of(per_class.begin(), per_class.end(), [](const auto& p) { return !p.empty(); });
  if (!any)
    throw_invalid(fmt::format("image folder {} holds no images: none of its {} class folders "
                              "holds a .jpg, .jpeg or .png file",
                              root, index.classes.size()),
                  "put each class's images in a subfolder named after the class");
  for (size_t label = 0; label < index.classes.size(); ++label) {
    if (per_class[label].empty())
      throw_invalid(fmt::format("image folder {}: class folder {} holds no .jpg, .jpeg or .png "
                                "files",
                                root, (fs::path(root) / index.classes[label]).string()),
                    "add its images, or remove the folder");
    for (const std::string& p : per_class[label]) index.samples.push_back({p, int64_t(label)});
  }
  return index;
}

}  // namespace hg::data
