// The index of an image folder in the ImageNet layout, root/<class name>/<image>: every
// subfolder of root is a class, numbered in byte order of the names (as torchvision's
// ImageFolder numbers them), and every file under it (subfolders included) whose name ends in
// .jpg, .jpeg or .png (any case) is a sample of that class. Names starting with '.' (hidden
// files and folders) are skipped, as are other files, and entries named like images that are not
// regular files once links are followed (FIFOs, sockets, devices, broken links: a warning counts
// them). Only names and file types are read here: the images are decoded when a loader reads
// them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hg::data {

struct ImageSample {
  std::string path;
  int64_t label = 0;
};

struct ImageFolderIndex {
  std::string root;
  std::vector<std::string> classes;  // label i is classes[i]
  // By label, then within a class by folder and file name (byte order), as torchvision lists
  // them.
  std::vector<ImageSample> samples;
};

// Whether a file name counts as an image: not hidden, extension .jpg, .jpeg or .png in any case.
bool is_image_file_name(std::string_view name);

// Scans `root`. InvalidInput naming root when it does not exist or is not a folder, holds no
// class folders, or when a class folder holds no images (naming it: an empty class would
// still take a label the model can never learn).
ImageFolderIndex scan_image_folder(const std::string& root);

}  // namespace hg::data
