// Handling text that comes from files and configs, which may hold anything: quoting it in
// messages, and checking JSON's nesting before a parser sees it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hg {

// `text` made safe to quote in an error message: bytes outside printable ASCII as \xNN and,
// when longer than `max_chars`, cut to that prefix followed by "... (N bytes)".
std::string untrusted_excerpt(std::string_view text, size_t max_chars = 80);
// The max_chars that quotes a path (or a message holding one) whole: PATH_MAX.
inline constexpr size_t kPathMax = 4096;

// JSON parsers and the trees they build recurse once per level (destroying a 60,000-deep value
// overflows the stack), so JSON text from a file is refused past a fixed depth before parsing.

// The byte offset in `text` where JSON nesting first exceeds `limit` levels, or npos. Brackets
// inside strings do not count; the text need not be valid JSON (the parser judges that).
size_t find_json_nesting_beyond(std::string_view text, int limit);

}  // namespace hg
