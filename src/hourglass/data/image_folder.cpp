#include "hourglass/data/image_folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <utility>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
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

// The image files under `dir` (recursively, links followed, hidden entries skipped), sorted by
// folder, then by name.
std::vector<std::string> images_under(const fs::path& dir, VisitedFolders& visited) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder, name)
  visited.enter(dir);
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  if (ec) throw_invalid(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw_invalid(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
    const fs::directory_entry& e = *it;
    if (hidden(e.path())) {
      if (is_dir(e)) it.disable_recursion_pending();
      continue;
    }
    if (is_dir(e)) {
      visited.enter(e.path());  // before the iterator descends into it
      continue;
    }
    if (!is_image_file_name(e.path().filename().string())) continue;
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
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_dir(*it) && !hidden(it->path())) index.classes.push_back(it->path().filename().string());
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
    per_class.push_back(images_under(fs::path(root) / name, visited));
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
