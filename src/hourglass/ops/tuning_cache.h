// The tuning cache: the algorithms the vendor libraries' searches chose (cuDNN's timed engine
// search, cuBLASLt's timed heuristic list), kept on disk so that a later process with the same
// device and libraries searches nothing. Device-neutral: a key and a choice are bounded text
// records as in algorithm_choices.h ("key<TAB>choice" lines); what they mean belongs to the backend
// wrapper that stores them (backend/gpu/tuning_cudnn.h, blas_cublaslt.cpp), which also checks a
// cached choice before using it (the library still offers it, it builds, its workspace fits) and
// reports it with tuning_cache_reject when it does not.
//
// One file per identity (device name, driver and library versions, as the wrapper spells
// them): "<dir>/tuning-<16 hex digits of FNV-1a(identity)>.txt", holding
//   # hourglass tuning cache v1
//   # identity: <identity>
//   <key>\t<choice>          (one line per entry, sorted)
// A file that cannot be read, is too large, has another header or another identity is ignored
// whole; an entry that does not parse is ignored alone; each with one warning naming the file
// (and the entry). Nothing read from it is trusted: the caller validates every choice.
//
// Writing: each stored choice is merged, under an flock on "<file>.lock", into what is on disk
// then (entries written by other processes, data-parallel ranks among them, are kept; this
// process's entries win for their keys) and the file is replaced atomically
// (base/atomic_file.h). A write that fails warns once and the run goes on without writing.
//
// Process-wide and thread-safe (the choices depend on the device and libraries, not on the
// thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hg::ops {

// tune.cache: "on" (read and write), "read-only" (read, never write), "off" (neither).
enum class TuningCacheMode : uint8_t { Off, ReadOnly, ReadWrite };
// Parses tune.cache's value; InvalidInput naming `where` otherwise.
TuningCacheMode parse_tuning_cache_mode(std::string_view text, const std::string& where);
const char* tuning_cache_mode_name(TuningCacheMode mode);

// Bounds on the file and its records (a key may hold spaces, a choice not).
inline constexpr size_t kMaxTuningKey = 256;
inline constexpr size_t kMaxTuningChoice = 256;
inline constexpr size_t kMaxTuningIdentity = 512;
inline constexpr size_t kMaxTuningEntries = 16384;
inline constexpr size_t kMaxTuningFileBytes = size_t(8) << 20;

// The cache directory: $HOURGLASS_CACHE_DIR when set and not empty, else `configured`
// (tune.cache_dir) when not empty, else $XDG_CACHE_HOME/hourglass when XDG_CACHE_HOME is an
// absolute path (the XDG base directory rule), else $HOME/.cache/hourglass; "" when none is
// known (the cache is then off). A relative $HOURGLASS_CACHE_DIR is refused (InvalidInput).
std::string resolve_tuning_cache_dir(const std::string& configured);

// Sets the process's cache mode and directory (already resolved), forgetting what was read
// under the previous settings. Until this is called the cache is on (ReadWrite), in the
// directory resolve_tuning_cache_dir("") gives, resolved at its first use.
void configure_tuning_cache(TuningCacheMode mode, const std::string& dir);
struct TuningCacheSettings {
  TuningCacheMode mode = TuningCacheMode::ReadWrite;
  std::string dir;
};
TuningCacheSettings tuning_cache_settings();

// The file holding `identity`'s entries under `dir`.
std::string tuning_cache_file(const std::string& dir, const std::string& identity);

// The choice cached for `key` under `identity`, if any (the first lookup of an identity reads
// its file). A key or identity outside the bounds is a programming error (Internal).
std::optional<std::string> tuning_cache_lookup(const std::string& identity, const std::string& key);
// The caller could not use the choice lookup returned (`why`: the library no longer offers
// it, it fails to build, its workspace exceeds the bound, ...): warns once naming the file, the
// entry and `why`, and forgets the entry (the search that follows stores its replacement).
void tuning_cache_reject(const std::string& identity, const std::string& key,
                         const std::string& why);
// Records a search's choice for `key`: kept for this process and, in ReadWrite mode, merged
// into the file. A record outside the bounds is a programming error (Internal).
void tuning_cache_store(const std::string& identity, const std::string& key,
                        const std::string& choice);

// What the cache did since the process started (or tuning_cache_forget): lookups answered
// and not, choices stored, cached choices rejected, files or entries ignored as invalid,
// files written.
struct TuningCacheCounts {
  int64_t hits = 0, misses = 0, stored = 0, rejected = 0, ignored = 0, writes = 0;
};
TuningCacheCounts tuning_cache_counts();
// Forgets every entry read or stored and the counts, keeping the settings: the next lookup
// reads the files again (tests; `hourglass tune`).
void tuning_cache_forget();

// Algorithm planning: the host time the backends spend choosing and building an algorithm for
// a shape they meet for the first time (a choice rebuilt from this cache, or a search), counted
// per pass planned. Process-wide, thread-safe; the trainer reports each epoch's share
// (metrics.jsonl's planning_seconds): with a warm cache it is most of a first epoch's extra
// time.
struct AlgorithmPlanning {
  int64_t passes = 0;
  double seconds = 0;
};
void note_algorithm_planning(double seconds);
AlgorithmPlanning algorithm_planning();
// Notes its own lifetime as one pass's planning when `active` (the pass had no plan yet).
class PlanningScope {
 public:
  explicit PlanningScope(bool active) : active_(active), start_(std::chrono::steady_clock::now()) {}
  ~PlanningScope() {
    if (active_)
      note_algorithm_planning(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  PlanningScope(const PlanningScope&) = delete;
  PlanningScope& operator=(const PlanningScope&) = delete;

 private:
  bool active_;
  std::chrono::steady_clock::time_point start_;
};

// The file format, for the reader above and for tests. encode writes the header and the
// entries in key order. decode fills `entries` with the valid ones and returns "" when the
// file is usable, else why it is not (wrong header or identity, too many entries); the
// entries it skipped are counted in `skipped`, the first one described in `first_skipped`.
std::string encode_tuning_file(const std::string& identity,
                               const std::map<std::string, std::string>& entries);
struct TuningFileContents {
  std::map<std::string, std::string> entries;
  size_t skipped = 0;
  std::string first_skipped;
};
std::string decode_tuning_file(std::string_view text, const std::string& identity,
                               TuningFileContents& out);

}  // namespace hg::ops
