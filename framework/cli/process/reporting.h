// How `mixt` ends: every failure as one clear message on stderr and the documented exit
// code — 0 ok, 1 runtime failure, 2 bad usage/recipe/plugin, 130 interrupted.
#pragma once

#include <functional>
#include <optional>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace mixt::cli {

// Before anything else: a Ctrl-C during start-up, and MIXT_HOST_ALLOCATOR, read before the
// first tensor (LibTorch reads its huge-page switch at its first allocation). An exit code
// when the program must stop there.
std::optional<int> start_up();

// CLI11's own words for a bad command line ("A subcommand is required", "The following
// argument was not expected: --epochs", then "Run with --help"), in mixt's error format,
// with what the user most likely meant.
int report_usage(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv);

// Runs a command, turning what it throws (mixt::Error, out of memory, LibTorch's errors,
// anything else) into its message and exit code.
int run_reporting_errors(const std::function<int()>& command);

}  // namespace mixt::cli
