// Human-friendly durations for config values and progress output.
#pragma once

#include <string>
#include <string_view>

namespace hg {

// Seconds in "90s", "10m", "2h", "1h30m", "1.5h", "200h", "2d", "250ms", "1h 30m", or a plain
// non-negative number (seconds). Throws InvalidInput naming the text otherwise.
double parse_duration_seconds(std::string_view text);

// A clock-style duration for ETAs: "0:35", "12:03", "1:02:03", "27:46:40" (whole seconds,
// rounded); "?" for a negative or non-finite value.
std::string format_duration_clock(double seconds);

// Seconds since this process started, by the kernel's record of its start (/proc/self/stat's
// start time against /proc/uptime, 10 ms steps), so loading the libraries before main counts;
// where /proc cannot be read, since this library was loaded.
double seconds_since_process_start();

}  // namespace hg
