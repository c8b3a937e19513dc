#include "hourglass/base/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "hourglass/base/environment.h"
#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

namespace {

constexpr const char* kTerminalPattern = "[%H:%M:%S] %^%l%$ %v";
constexpr const char* kFilePattern = "[%Y-%m-%d %H:%M:%S.%e] %l %v";

// The file of add_log_file, and a logger that writes only to it.
std::shared_ptr<spdlog::sinks::basic_file_sink_mt> g_file_sink;
std::shared_ptr<spdlog::logger> g_file_only;

LiveLine* g_live_line = nullptr;  // guarded by terminal_mutex()

// The stderr sink, clearing the live line before each log line and redrawing it after.
class LiveLineGuardSink final : public spdlog::sinks::sink {
 public:
  explicit LiveLineGuardSink(std::shared_ptr<spdlog::sinks::sink> inner)
      : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::recursive_mutex> lock(terminal_mutex());
    if (g_live_line != nullptr) g_live_line->clear_for_log();
    inner_->log(msg);
    inner_->flush();
    if (g_live_line != nullptr) g_live_line->redraw_after_log();
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

}  // namespace

std::recursive_mutex& terminal_mutex() {
  static std::recursive_mutex m;
  return m;
}

void set_live_line(LiveLine* line) {
  std::lock_guard<std::recursive_mutex> lock(terminal_mutex());
  g_live_line = line;
}

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off")
    throw_invalid(fmt::format("unknown log level '{}'", untrusted_excerpt(level)),
                  "use one of debug, info, warn, error, off");
  spdlog::set_level(parsed);
}

bool log_colors_wanted(const std::string& color) {
  if (color == "always") return true;
  if (color == "never") return false;
  if (color != "auto")
    throw_invalid(fmt::format("unknown color mode '{}'", untrusted_excerpt(color)),
                  "use one of auto, always, never");
  const char* no_color = env::get("NO_COLOR");
  return ::isatty(STDERR_FILENO) && (no_color == nullptr || no_color[0] == '\0');
}

void init_logging(const std::string& color) {
  const auto mode =
      log_colors_wanted(color) ? spdlog::color_mode::always : spdlog::color_mode::never;
  auto logger = std::make_shared<spdlog::logger>(
      "hourglass", std::make_shared<LiveLineGuardSink>(
                       std::make_shared<spdlog::sinks::stderr_color_sink_mt>(mode)));
  logger->set_level(spdlog::default_logger()->level());
  logger->set_pattern(kTerminalPattern);
  spdlog::set_default_logger(std::move(logger));
}

void add_log_file(const std::string& path) {
  HG_ASSERT(!g_file_sink, "the log file is already open");
  // Appended to when it exists, so it must be a regular file: opening a FIFO would block.
  if (const std::string kind = file_kind(path); !kind.empty() && kind != "a regular file")
    throw_invalid(fmt::format("log file {} is {}, not a regular file",
                              untrusted_excerpt(path, kPathMax), kind),
                  "remove it, or pass another --run-dir");
  try {
    g_file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  } catch (const spdlog::spdlog_ex& e) {
    throw_runtime(fmt::format("cannot open log file {}: {}", path, e.what()),
                  "check the run directory's permissions and free space");
  }
  g_file_sink->set_pattern(kFilePattern);
  spdlog::default_logger()->sinks().push_back(g_file_sink);
  g_file_only = std::make_shared<spdlog::logger>("hourglass-file", g_file_sink);
  g_file_only->set_level(spdlog::level::info);
  g_file_only->flush_on(spdlog::level::info);
  spdlog::default_logger()->flush_on(spdlog::level::info);
}

void log_to_file_only(const std::string& line) {
  if (g_file_only) g_file_only->info(line);
}

}  // namespace hg
