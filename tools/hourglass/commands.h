// The subcommands of the hourglass CLI: each registers its options on a CLI11 app and returns
// the function that runs it. Exit codes: 0 success, 2 bad input (config, flags, files),
// 1 any other failure (I/O, out of memory), 70 an internal error.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace hg::cli {

using Runner = std::function<int()>;

Runner add_train(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_info(CLI::App& app);
Runner add_bench(CLI::App& app);

}  // namespace hg::cli
