// hourglass monitor [--interval SECONDS] [--count N] [--csv]: the machine's GPUs and host, live,
// one line per GPU per sample, as `nvidia-smi dmon` and `rocm-smi` print them: utilisation, memory,
// power, temperature and clocks (NVML, AMD SMI or ROCm SMI, loaded at run time), then the host's
// CPU and memory. --csv prints monitor.csv's columns instead (the format `hourglass train` writes
// to its run directory). Runs until interrupted, or for --count samples.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "hourglass/device/machine_readings.h"
#include "hourglass/obs/monitor.h"

namespace hg::cli {

namespace {

std::string cell(double v, int width, int decimals = 0) {
  return std::isfinite(v) ? fmt::format("{:>{}.{}f}", v, width, decimals)
                          : fmt::format("{:>{}}", "-", width);
}

}  // namespace

Runner add_monitor(CLI::App& app) {
  struct Args {
    double interval = 1;
    int64_t count = 0;
    bool csv = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "monitor",
      "Print the GPUs' utilisation, memory, power, temperature and clocks (NVML, AMD SMI or ROCm "
      "SMI) "
      "and the host's CPU and memory, one line per GPU every --interval seconds, until "
      "interrupted.");
  sub->add_option("--interval", a->interval, "seconds between samples")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--count", a->count, "stop after this many samples (0: run until interrupted)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--csv", a->csv, "print monitor.csv's columns (as train writes them)");
  return [a] {
    std::string why_not;
    std::unique_ptr<GpuReader> gpus = open_gpu_reader(&why_not);
    if (!gpus)
      std::fprintf(stderr, "hourglass monitor: %s; showing the host only\n", why_not.c_str());
    HostReader host;
    host.read();  // the first CPU share needs a previous reading
    const auto start = std::chrono::steady_clock::now();
    if (a->csv)
      std::printf("%s\n", obs::Monitor::csv_header().c_str());
    else
      std::printf(
          "#   time gpu  util%%  mem_used  mem_total   power_W  temp_C  sm_MHz  mem_MHz | "
          "host_cpu%%  host_mem_used  host_mem_total (MiB)\n");
    for (int64_t n = 0; a->count == 0 || n < a->count; ++n) {
      std::this_thread::sleep_for(std::chrono::duration<double>(n == 0 ? 0.1 : a->interval));
      const HostReading h = host.read();
      const double t =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int rows = gpus ? gpus->count() : 1;
      for (int i = 0; i < rows; ++i) {
        obs::MonitorSample s;
        s.elapsed_s = t;
        s.host = h;
        if (gpus) s.gpu = gpus->read(i);
        if (a->csv) {
          std::printf("%s\n", obs::Monitor::csv_row(s).c_str());
          continue;
        }
        const GpuReading& g = s.gpu;
        std::printf("%8.1f %3s %6s %9s %10s %9s %7s %7s %8s | %9s %14s %15s\n", t,
                    g.index >= 0 ? std::to_string(g.index).c_str() : "-",
                    cell(g.utilization_pct, 6).c_str(), cell(g.memory_used_mib, 9).c_str(),
                    cell(g.memory_total_mib, 10).c_str(), cell(g.power_w, 9, 1).c_str(),
                    cell(g.temperature_c, 7).c_str(), cell(g.sm_clock_mhz, 7).c_str(),
                    cell(g.memory_clock_mhz, 8).c_str(), cell(h.cpu_pct, 9, 1).c_str(),
                    cell(h.memory_used_mib, 14).c_str(), cell(h.memory_total_mib, 15).c_str());
      }
      std::fflush(stdout);
    }
    return 0;
  };
}

}  // namespace hg::cli
