// `mixt list [KIND] [GLOB] [--recipe FILE]`: the registered components, by kind, each with
// its summary and the plugin file it came from.
#pragma once

#include <string>

#include "commands/command.h"

namespace mixt::cli {

// `recipe`: when not empty, its `plugins:` are loaded as well, as `run` loads them.
int list(const std::string& kind, const std::string& glob, const std::string& recipe = "");

void add_list_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
