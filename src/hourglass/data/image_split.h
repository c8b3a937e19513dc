// The splits of an image dataset on disk (data.dataset = "folder"): data.path holds train/ and
// val/ (or test/), each an image folder (root/<class>/<image>) or a pack written by
// `hourglass pack` (image_pack.h).
#pragma once

#include <memory>
#include <string>

#include "hourglass/data/dataset.h"
#include "hourglass/data/image_files.h"

namespace hg::data {

// The dataset name that selects image files (data.dataset).
inline constexpr const char* kImageFolderDataset = "folder";

// The folder of `split` under `root`: root/train for Train; root/val, else root/test, for Test.
// InvalidInput naming the folders looked for when none exists.
std::string image_split_dir(const std::string& root, Split split);

// Opens `split` of the image dataset at `root`: a pack when its folder holds a pack index,
// else an image folder scanned by name (image_folder.h).
std::shared_ptr<ImageFileSource> open_image_split(const std::string& root, Split split,
                                                  const ImageFileOptions& options);

}  // namespace hg::data
