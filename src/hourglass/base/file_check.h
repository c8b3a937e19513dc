// Refusing a path that is not a regular file before anything opens it. open() on a FIFO with
// no writer blocks forever, and a directory or device "opens" and then reads as nothing or
// without end; stat() says what the path is without opening it.
#pragma once

#include <string>

namespace hg {

// What stat() says `path` is, for messages: "a regular file", "a directory", "a FIFO (named
// pipe)", "a character device", "a block device", "a socket", or "" when the path does not
// exist. Symbolic links are followed. Other stat() failures are InvalidInput naming the path.
std::string file_kind(const std::string& path);

// Throws InvalidInput unless `path` is a regular file (after following symbolic links): a
// missing path says "not found", anything else says what it is. `what` names the file's role
// in the message ("data file", "checkpoint", "config file").
void require_regular_file(const std::string& path, const std::string& what);

// Throws InvalidInput unless `path` may be replaced by renaming a new file over it: it is absent
// or a regular file itself (symbolic links are not followed: a link, a FIFO, a device or a
// directory there is refused, naming what it is, and left as it is).
void require_replaceable(const std::string& path);

}  // namespace hg
