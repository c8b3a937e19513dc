// Sizes in bytes as people write them: "4GiB", "512MiB", "64KiB", "2GB" (powers of 1000),
// "1048576" (bytes).
#pragma once

#include <cstddef>
#include <string>

namespace hg {

// Throws InvalidInput naming `what` and the text when it is not a non-negative size.
size_t parse_byte_size(const std::string& text, const std::string& what);

// "12.3 MiB": how messages report memory.
std::string format_mib(size_t bytes);

}  // namespace hg
