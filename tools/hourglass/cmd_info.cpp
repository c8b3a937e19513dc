// hourglass info [--json]: what this build can run on.
#include <dnnl.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/base/parallel.h"
#include "hourglass/device/allocator.h"

namespace hg::cli {

Runner add_info(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("info", "Show the devices, threads and library versions of this build.");
  sub->add_flag("--json", *json, "print JSON instead of text");
  return [json] {
    const dnnl_version_t* v = dnnl_version();
    nlohmann::json info;
    info["hourglass"] = HOURGLASS_VERSION;
    info["gpu_backend"] = "none (built with HOURGLASS_GPU=off)";
    info["devices"] = nlohmann::json::array(
        {{{"device", "cpu"}, {"threads", num_threads()}, {"backend", "oneDNN + OpenMP loops"}}});
    info["onednn"] = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
    info["onednn_cpu_runtime"] = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other";
    if (*json) {
      std::printf("%s\n", info.dump(2).c_str());
      return 0;
    }
    std::printf("hourglass %s\n", HOURGLASS_VERSION);
    std::printf("device cpu: %d threads (OpenMP pool shared with oneDNN %s)\n", num_threads(),
                info["onednn"].get<std::string>().c_str());
    std::printf("gpu: %s\n", info["gpu_backend"].get<std::string>().c_str());
    return 0;
  };
}

}  // namespace hg::cli
