// Editing a safetensors file as a tool that does not know hourglass's checksum would, for the
// tests that check such edits are caught.
#pragma once

#include <string>

namespace hg::test {

// `bytes` (a whole safetensors file) with the first `from` in its header replaced by `to` and
// the length prefix updated. Records a test failure (and returns `bytes`) when `from` is not
// in the header.
std::string edit_header(const std::string& bytes, const std::string& from, const std::string& to);

}  // namespace hg::test
