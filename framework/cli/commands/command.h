// A subcommand of `mixt`: each *_command.cpp declares its own flags on the CLI11 app it adds
// (add_<name>_command), next to the code that reads them, and hands back what runs it once
// the command line is parsed. main.cpp lists the commands and runs the one given.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mixt::cli {

struct Command {
  CLI::App* app = nullptr;   // the subcommand, as CLI11 parsed it
  std::function<int()> run;  // its exit code: 0 ok, 1 runtime failure, 2 bad usage (errors are thrown)
};
using Commands = std::vector<Command>;

// A recipe and its key=value overrides: what run and check take.
struct RecipeArguments {
  std::string recipe;
  std::vector<std::string> overrides;
};

// --best, as evaluate, predict and export say it.
inline constexpr const char* kBestHelp =
    "the run's best checkpoint (checkpoints/best, kept by the best_checkpoint callback) instead of its newest";

}  // namespace mixt::cli
