// Errors: one exception type for everything a user can cause (bad config, bad file, shape
// mismatch), carrying what went wrong and how to fix it; an assertion for internal invariants.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace hg {

// What kind of failure an Error is; the CLI maps kinds to exit codes.
enum class ErrorKind {
  InvalidInput,  // the user's config, flags, files or arguments are wrong (exit code 2)
  OutOfMemory,   // an allocator could not satisfy a request
  Runtime,       // the environment failed (I/O, a library call)
  Internal,      // an invariant of hourglass itself broke: a bug
  Diverged,      // training produced a NaN or infinite loss (exit code 3)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, std::string remedy = {})
      : std::runtime_error(message),
        kind_(kind),
        message_(std::move(message)),
        remedy_(std::move(remedy)) {}

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  const std::string& remedy() const { return remedy_; }
  // "message (remedy)" on one line, for logs and the CLI.
  std::string one_line() const {
    return remedy_.empty() ? message_ : message_ + " (" + remedy_ + ")";
  }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string remedy_;
};

// A user error: the input is wrong. HG_CHECK(cond, "format {}", args...) throws it.
[[noreturn]] inline void throw_invalid(std::string message, std::string remedy = {}) {
  throw Error(ErrorKind::InvalidInput, std::move(message), std::move(remedy));
}

[[noreturn]] inline void throw_runtime(std::string message, std::string remedy = {}) {
  throw Error(ErrorKind::Runtime, std::move(message), std::move(remedy));
}

[[noreturn]] void throw_internal(const char* expr, const char* file, int line,
                                 const std::string& msg);

}  // namespace hg

// User-facing check: the condition must hold or the input was wrong.
#define HG_CHECK(cond, ...)                          \
  do {                                               \
    if (!(cond)) [[unlikely]]                        \
      ::hg::throw_invalid(fmt::format(__VA_ARGS__)); \
  } while (0)

// Internal invariant: failing it is a bug in hourglass; reports the expression and location.
#define HG_ASSERT(cond, ...)                                                        \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      ::hg::throw_internal(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)

// Hot-path invariant, checked in debug builds only.
#ifdef NDEBUG
#define HG_DEBUG_ASSERT(cond, ...) ((void)0)
#else
#define HG_DEBUG_ASSERT(cond, ...) HG_ASSERT(cond, __VA_ARGS__)
#endif
