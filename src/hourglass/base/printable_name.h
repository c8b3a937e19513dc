// Names that come from outside (file, folder, tar-member and class names) made safe to print:
// control bytes (below 0x20, and 0x7f: escape sequences, newlines, carriage returns) are written
// as \xNN, so that a name can neither drive a terminal (an image named "\x1b[2J" clears the
// screen) nor forge a log line. Every other byte, UTF-8 included, is kept.
#pragma once

#include <string>
#include <string_view>

namespace hg {

std::string printable_name(std::string_view name);

}  // namespace hg
