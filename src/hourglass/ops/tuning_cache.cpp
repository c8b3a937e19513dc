#include "hourglass/ops/tuning_cache.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/environment.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/base/untrusted_text.h"
#include "hourglass/ops/algorithm_choices.h"

namespace hg::ops {

namespace {

constexpr std::string_view kMagic = "# hourglass tuning cache v1\n";
constexpr std::string_view kIdentityPrefix = "# identity: ";

// One identity's entries: what its file held when first read, updated by this process.
struct Bucket {
  bool loaded = false;
  std::string file;
  std::map<std::string, std::string> entries;
  std::map<std::string, std::string> mine;  // stored by this process: they win a merge
};

struct State {
  std::mutex mutex;
  bool configured = false;
  TuningCacheSettings settings;
  std::map<std::string, Bucket> buckets;  // by identity
  TuningCacheCounts counts;
  bool write_warned = false;
};

State& state() {
  static auto* s = new State();  // never destroyed: libraries may look up at exit
  return *s;
}

// The settings, resolved on first use when nobody configured them. Called under the mutex.
const TuningCacheSettings& settings_locked(State& s) {
  if (!s.configured) {
    s.settings.mode = TuningCacheMode::ReadWrite;
    s.configured = true;
    try {
      s.settings.dir = resolve_tuning_cache_dir("");
    } catch (const Error& e) {  // a command that never configured it: the cache stays off
      HG_LOG_WARN("tuning cache off: {} ({})", e.message(), e.remedy());
      s.settings.dir.clear();
    }
  }
  return s.settings;
}

bool active(const TuningCacheSettings& st) {
  return st.mode != TuningCacheMode::Off && !st.dir.empty();
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void check_identity(const std::string& identity) {
  const std::string fault = algorithm_record_fault(identity, "x", kMaxTuningIdentity, 1);
  HG_ASSERT(fault.empty(), "tuning cache identity '{}': {}", untrusted_excerpt(identity), fault);
}

// The file's contents, or "" with `why` set when it does not exist (why stays "") or cannot be
// read or is too large.
std::string read_bounded(const std::string& path, std::string& why) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {};
  if (!S_ISREG(info.st_mode)) {
    why = "it is not a regular file";
    return {};
  }
  if (size_t(info.st_size) > kMaxTuningFileBytes) {
    why = fmt::format("it has {} bytes (at most {} expected)", info.st_size, kMaxTuningFileBytes);
    return {};
  }
  try {
    return read_file_bytes(path);
  } catch (const Error& e) {
    why = e.message();
    return {};
  }
}

// Reads `identity`'s file into `b` (once), warning once about what is ignored.
void load_locked(State& s, Bucket& b, const std::string& identity) {
  if (b.loaded) return;
  b.loaded = true;
  b.file = tuning_cache_file(s.settings.dir, identity);
  std::string why;
  const std::string text = read_bounded(b.file, why);
  if (!why.empty()) {
    ++s.counts.ignored;
    HG_LOG_WARN("tuning cache {}: ignored, {}; searching again", b.file, why);
    return;
  }
  if (text.empty()) return;  // no file yet
  TuningFileContents contents;
  why = decode_tuning_file(text, identity, contents);
  if (!why.empty()) {
    ++s.counts.ignored;
    HG_LOG_WARN("tuning cache {}: ignored, {}; searching again (the next search rewrites it)",
                b.file, why);
    return;
  }
  if (contents.skipped > 0) {
    s.counts.ignored += int64_t(contents.skipped);
    HG_LOG_WARN("tuning cache {}: {} entr{} ignored ({}{}); those convolutions are searched again",
                b.file, contents.skipped, contents.skipped == 1 ? "y" : "ies",
                contents.first_skipped, contents.skipped > 1 ? ", and more" : "");
  }
  for (auto& [key, choice] : contents.entries) b.entries.emplace(key, std::move(choice));
}

// Merges this process's entries of `b` into its file on disk, under the file's lock.
void write_locked(State& s, Bucket& b, const std::string& identity) {
  try {
    std::filesystem::create_directories(s.settings.dir);
    const FileLock lock(b.file);
    std::map<std::string, std::string> merged;
    std::string why;
    const std::string text = read_bounded(b.file, why);
    TuningFileContents contents;
    if (why.empty() && !text.empty() && decode_tuning_file(text, identity, contents).empty())
      merged = std::move(contents.entries);  // what other processes wrote (valid entries only)
    for (const auto& [key, choice] : b.mine) merged[key] = choice;
    while (merged.size() > kMaxTuningEntries) {  // keep ours: drop others' first
      auto it = merged.begin();
      while (it != merged.end() && b.mine.count(it->first) != 0) ++it;
      if (it == merged.end()) break;
      merged.erase(it);
    }
    write_file_atomic(b.file, encode_tuning_file(identity, merged));
    ++s.counts.writes;
  } catch (const std::exception& e) {
    if (!s.write_warned)
      HG_LOG_WARN("tuning cache {}: cannot write it ({}); going on without saving searches", b.file,
                  e.what());
    s.write_warned = true;
  }
}

}  // namespace

TuningCacheMode parse_tuning_cache_mode(std::string_view text, const std::string& where) {
  if (text == "on") return TuningCacheMode::ReadWrite;
  if (text == "read-only") return TuningCacheMode::ReadOnly;
  if (text == "off") return TuningCacheMode::Off;
  throw_invalid(fmt::format("{}: '{}' is not a tuning cache mode", where, untrusted_excerpt(text)),
                "use \"on\" (read and write), \"read-only\" or \"off\"");
}

const char* tuning_cache_mode_name(TuningCacheMode mode) {
  switch (mode) {
    case TuningCacheMode::Off: return "off";
    case TuningCacheMode::ReadOnly: return "read-only";
    default: return "on";
  }
}

std::string resolve_tuning_cache_dir(const std::string& configured) {
  if (const char* env = env::get("HOURGLASS_CACHE_DIR"); env != nullptr && *env != '\0') {
    // Relative, it would name another folder in each working directory (tune.cache_dir
    // refuses one too).
    if (env[0] != '/')
      throw_invalid(fmt::format("HOURGLASS_CACHE_DIR='{}' is not an absolute path",
                                untrusted_excerpt(env, kPathMax)),
                    "set it to an absolute path, e.g. \"$PWD/cache\", or unset it");
    return env;
  }
  if (!configured.empty()) return configured;
  if (const char* xdg = env::get("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return std::string(xdg) + "/hourglass";
  if (const char* home = env::get("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/hourglass";
  return {};
}

void configure_tuning_cache(TuningCacheMode mode, const std::string& dir) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.configured = true;
  s.settings = TuningCacheSettings{mode, dir};
  s.buckets.clear();
  s.write_warned = false;
}

TuningCacheSettings tuning_cache_settings() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return settings_locked(s);
}

std::string tuning_cache_file(const std::string& dir, const std::string& identity) {
  return fmt::format("{}/tuning-{:016x}.txt", dir, fnv1a(identity));
}

std::optional<std::string> tuning_cache_lookup(const std::string& identity,
                                               const std::string& key) {
  check_identity(identity);
  HG_ASSERT(algorithm_record_fault(key, "x", kMaxTuningKey, 1).empty(),
            "tuning cache key '{}' out of bounds", untrusted_excerpt(key));
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!active(settings_locked(s))) return std::nullopt;
  Bucket& b = s.buckets[identity];
  load_locked(s, b, identity);
  const auto it = b.entries.find(key);
  if (it == b.entries.end()) {
    ++s.counts.misses;
    return std::nullopt;
  }
  ++s.counts.hits;
  return it->second;
}

void tuning_cache_reject(const std::string& identity, const std::string& key,
                         const std::string& why) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Bucket& b = s.buckets[identity];
  const auto it = b.entries.find(key);
  if (it == b.entries.end()) return;
  ++s.counts.rejected;
  HG_LOG_WARN("tuning cache {}: entry '{}' -> '{}' ignored: {}; searching again", b.file,
              untrusted_excerpt(key, 160), untrusted_excerpt(it->second), why);
  b.entries.erase(it);
  b.mine.erase(key);
}

void tuning_cache_store(const std::string& identity, const std::string& key,
                        const std::string& choice) {
  check_identity(identity);
  const std::string fault = algorithm_record_fault(key, choice, kMaxTuningKey, kMaxTuningChoice);
  HG_ASSERT(fault.empty(), "tuning cache entry '{}' -> '{}': {}", untrusted_excerpt(key),
            untrusted_excerpt(choice), fault);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const TuningCacheSettings& st = settings_locked(s);
  if (!active(st)) return;
  Bucket& b = s.buckets[identity];
  load_locked(s, b, identity);
  b.entries[key] = choice;
  b.mine[key] = choice;
  ++s.counts.stored;
  if (st.mode == TuningCacheMode::ReadWrite) write_locked(s, b, identity);
}

TuningCacheCounts tuning_cache_counts() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counts;
}

namespace {
std::atomic<int64_t> g_planned_passes{0};
std::atomic<int64_t> g_planning_nanoseconds{0};
}  // namespace

void note_algorithm_planning(double seconds) {
  g_planned_passes.fetch_add(1, std::memory_order_relaxed);
  g_planning_nanoseconds.fetch_add(int64_t(seconds * 1e9), std::memory_order_relaxed);
}

AlgorithmPlanning algorithm_planning() {
  return AlgorithmPlanning{g_planned_passes.load(std::memory_order_relaxed),
                           double(g_planning_nanoseconds.load(std::memory_order_relaxed)) * 1e-9};
}

void tuning_cache_forget() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.buckets.clear();
  s.counts = TuningCacheCounts{};
  s.write_warned = false;
}

std::string encode_tuning_file(const std::string& identity,
                               const std::map<std::string, std::string>& entries) {
  std::string text(kMagic);
  text += std::string(kIdentityPrefix) + identity + '\n';
  for (const auto& [key, choice] : entries) text += key + '\t' + choice + '\n';
  return text;
}

std::string decode_tuning_file(std::string_view text, const std::string& identity,
                               TuningFileContents& out) {
  if (text.substr(0, kMagic.size()) != kMagic)
    return "its first line is not '# hourglass tuning cache v1'";
  text.remove_prefix(kMagic.size());
  const size_t end = text.find('\n');
  const std::string_view line = text.substr(0, end);
  if (end == std::string_view::npos || line.substr(0, kIdentityPrefix.size()) != kIdentityPrefix)
    return "its second line is not '# identity: ...'";
  if (line.substr(kIdentityPrefix.size()) != identity)
    return fmt::format("it names another device or library versions ('{}', this process has '{}')",
                       untrusted_excerpt(line.substr(kIdentityPrefix.size()), 160), identity);
  text.remove_prefix(end + 1);
  size_t number = 2;
  auto skip = [&](std::string_view record, const std::string& fault) {
    if (out.skipped++ == 0)
      out.first_skipped =
          fmt::format("line {}, '{}': {}", number, untrusted_excerpt(record), fault);
  };
  while (!text.empty()) {
    ++number;
    const size_t stop = text.find('\n');
    const std::string_view record = text.substr(0, stop);
    text.remove_prefix(stop == std::string_view::npos ? text.size() : stop + 1);
    if (stop == std::string_view::npos) {
      skip(record, "it does not end in a newline (a cut write)");
      break;
    }
    const size_t tab = record.find('\t');
    if (tab == std::string_view::npos) {
      skip(record, "it is not 'key<TAB>choice'");
      continue;
    }
    const std::string_view key = record.substr(0, tab), choice = record.substr(tab + 1);
    const std::string fault = algorithm_record_fault(key, choice, kMaxTuningKey, kMaxTuningChoice);
    if (!fault.empty()) {
      skip(record, fault);
      continue;
    }
    if (!out.entries.emplace(std::string(key), std::string(choice)).second) {
      skip(record, "it repeats a key");
      continue;
    }
    if (out.entries.size() > kMaxTuningEntries)
      return fmt::format("it has more than {} entries", kMaxTuningEntries);
  }
  return {};
}

}  // namespace hg::ops
