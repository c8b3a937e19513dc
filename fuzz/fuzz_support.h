// Shared by the libFuzzer targets: a scratch file per process that each input is written to
// (the readers under test take paths, and reading through the file system is what users do),
// and the checks every target makes on a rejection.
//
// A target's contract: any input either loads, and then satisfies the invariants the target
// checks, or is refused with an hg::Error whose message names the file (or config source) and
// stays short, as messages quoting untrusted bytes must. Every other outcome is a finding:
// a crash or sanitizer report, a hang or memory blow-up (libFuzzer's -timeout and
// -rss_limit_mb), another exception type (std::terminate), or a failed check (abort()).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "hourglass/base/error.h"

namespace hg::fuzz {

// A folder of this process's own under $TMPDIR (or /tmp), made on first use and removed at
// exit; two fuzzers (or jobs of one) never share files.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                              ("hg_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes `bytes` to <scratch>/<name> (replacing it) and returns the path.
inline std::string write_input(const std::string& name, std::string_view bytes) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// Aborts (a finding) with `what` when `ok` is false.
inline void check(bool ok, const char* what, std::string_view detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n%.*s\n", what, int(detail.size()), detail.data());
  std::abort();
}

// The longest message a rejection may have: untrusted values are quoted as 80-character
// excerpts, so anything near this size quotes the input wholesale.
inline constexpr size_t kMaxMessageBytes = 2048;

// Runs `load`; a thrown hg::Error must be InvalidInput (the input's fault, exit code 2) with a
// short message containing `must_name` (the file or source the user has to fix).
// With HG_FUZZ_PRINT set in the environment, each input's outcome is printed (to see what the
// seeds reach: `HG_FUZZ_PRINT=1 fuzz_x -runs=0 fuzz/corpus/x`).
template <class Load>
void expect_load_or_clear_refusal(Load&& load, std::string_view must_name) {
  static const bool print = std::getenv("HG_FUZZ_PRINT") != nullptr;
  try {
    load();
    if (print) std::fprintf(stderr, "fuzz: loaded\n");
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (print) std::fprintf(stderr, "fuzz: refused: %s\n", e.what());
    check(e.kind() == ErrorKind::InvalidInput, "a bad input was not reported as InvalidInput",
          message);
    check(message.size() <= kMaxMessageBytes, "refusal message too long", message.substr(0, 400));
    check(message.find(must_name) != std::string_view::npos,
          "refusal message does not name the input", message);
  }
}

// The input, read a byte at a time; zeros once it is used up (the generators of fuzz_image_folder
// and fuzz_run_dir).
struct Script {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool done() const { return at >= size; }
  uint8_t byte() { return at < size ? data[at++] : 0; }
};

}  // namespace hg::fuzz
