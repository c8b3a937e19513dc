#include "hourglass/data/image_split.h"

#include <filesystem>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/data/image_pack.h"

namespace hg::data {

namespace {

bool is_folder(const std::string& path) { return file_kind(path) == "a directory"; }

}  // namespace

std::string image_split_dir(const std::string& root, Split split) {
  const std::filesystem::path r(root);
  if (root.empty())
    throw_invalid("dataset 'folder' needs data.path: a folder holding train/ and val/ (or test/)",
                  "set data.path to the dataset's root folder");
  if (split == Split::Train) {
    const std::string dir = (r / "train").string();
    if (!is_folder(dir))
      throw_invalid(fmt::format("image dataset {}: the train split {} is not a folder ({})", root,
                                dir, file_kind(dir).empty() ? "not found" : file_kind(dir)),
                    "put the training images in <data.path>/train/<class>/<image>");
    return dir;
  }
  for (const char* name : {"val", "test"}) {
    const std::string dir = (r / name).string();
    if (is_folder(dir)) return dir;
  }
  throw_invalid(fmt::format("image dataset {}: no test split: neither {} nor {} is a folder", root,
                            (r / "val").string(), (r / "test").string()),
                "put the evaluation images in <data.path>/val/<class>/<image>");
}

std::shared_ptr<ImageFileSource> open_image_split(const std::string& root, Split split,
                                                  const ImageFileOptions& options) {
  const std::string dir = image_split_dir(root, split);
  if (is_image_pack(dir))
    return std::make_shared<ImageFileSource>(std::make_shared<const PackImages>(dir), options);
  return std::make_shared<ImageFileSource>(
      std::make_shared<const FolderImages>(scan_image_folder(dir)), options);
}

}  // namespace hg::data
