// hourglass pack FOLDER OUT [--shard-size 256MiB]: copies an image folder's encoded files
// (root/<class>/<image>) into a pack (data/image_pack.h) that data.dataset = "folder" reads
// like the folder. hourglass pack --check PACK reads a pack back and compares each shard's
// CRC32 with its index. hourglass pack --index-shards DIR indexes tar shards written elsewhere in
// WebDataset's layout as a pack. --json prints the result as one JSON object.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#include "hourglass/base/plural.h"
#include "hourglass/data/image_folder.h"
#include "hourglass/data/image_pack.h"

namespace hg::cli {

Runner add_pack(CLI::App& app) {
  struct Args {
    std::string folder, out, shard_size = "256MiB", check, index_shards;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "pack",
      "Pack an image folder (FOLDER/<class>/<image>.jpg|.jpeg|.png) into large shard files and "
      "an index in OUT, read with one pread per image; pack each split (train, val) into "
      "OUT/train, OUT/val and point data.path at OUT. Images are copied, not re-encoded.");
  sub->add_option("folder", args->folder, "the image folder of one split");
  sub->add_option("out", args->out, "the pack folder to write (created when missing)");
  sub->add_option("--shard-size", args->shard_size, "target size of each shard, e.g. 256MiB")
      ->capture_default_str();
  sub->add_option("--check", args->check,
                  "instead of packing, read the pack in this folder and check every shard's "
                  "CRC32 against its index");
  sub->add_option("--index-shards", args->index_shards,
                  "instead of packing, index the WebDataset tar shards in this folder (<key>.jpg|"
                  ".jpeg|.png and <key>.cls members; classes named by their numbers) as a pack: "
                  "writes its index.hgpack beside them");
  sub->add_flag("--json", args->json, "print the result as one JSON object");
  return [args] {
    if (!args->index_shards.empty()) {
      if (!args->folder.empty() || !args->check.empty())
        throw_invalid("pack --index-shards DIR takes no FOLDER, OUT or --check",
                      "run: hourglass pack --index-shards DIR");
      const data::PackSummary s = data::index_tar_shards(args->index_shards);
      const data::PackImages pack(args->index_shards);
      if (args->json) {
        const nlohmann::json out = {{"pack", args->index_shards},
                                    {"images", s.samples},
                                    {"classes", pack.classes().size()},
                                    {"bytes", s.bytes},
                                    {"shards", s.shards}};
        std::printf("%s\n", out.dump().c_str());
        return 0;
      }
      std::printf("indexed %s of %s (%s) in %s in %s\n", plural(s.samples, "image").c_str(),
                  plural(int64_t(pack.classes().size()), "class", "classes").c_str(),
                  format_mib(size_t(s.bytes)).c_str(), plural(s.shards, "shard").c_str(),
                  args->index_shards.c_str());
      return 0;
    }
    if (!args->check.empty()) {
      if (!args->folder.empty())
        throw_invalid("pack --check PACK takes no FOLDER or OUT",
                      "run: hourglass pack --check PACK");
      const data::PackImages pack(args->check);
      pack.verify_shards();
      if (args->json) {
        const nlohmann::json out = {{"pack", args->check},
                                    {"images", pack.size()},
                                    {"classes", pack.classes().size()},
                                    {"verified", true}};
        std::printf("%s\n", out.dump().c_str());
        return 0;
      }
      std::printf("%s: %s of %s, every shard matches its CRC32\n", args->check.c_str(),
                  plural(pack.size(), "image").c_str(),
                  plural(int64_t(pack.classes().size()), "class", "classes").c_str());
      return 0;
    }
    if (args->folder.empty() || args->out.empty())
      throw_invalid("pack needs a FOLDER and an OUT folder", "run: hourglass pack FOLDER OUT");
    const auto shard_bytes = int64_t(parse_byte_size(args->shard_size, "--shard-size"));
    HG_CHECK(shard_bytes >= 1, "--shard-size must be at least one byte, got '{}'",
             args->shard_size);
    const data::ImageFolderIndex index = data::scan_image_folder(args->folder);
    const data::PackSummary s = data::write_image_pack(index, args->out, shard_bytes);
    if (args->json) {
      const nlohmann::json out = {{"out", args->out},
                                  {"images", s.samples},
                                  {"classes", index.classes.size()},
                                  {"bytes", s.bytes},
                                  {"shards", s.shards}};
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    std::printf("packed %s of %s (%s) into %s in %s\n", plural(s.samples, "image").c_str(),
                plural(int64_t(index.classes.size()), "class", "classes").c_str(),
                format_mib(size_t(s.bytes)).c_str(), plural(s.shards, "shard").c_str(),
                args->out.c_str());
    return 0;
  };
}

}  // namespace hg::cli
