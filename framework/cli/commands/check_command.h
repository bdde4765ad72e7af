// `mixt check RECIPE [key=value ...]`: validates a recipe without training — loads its
// plugins, builds every component (a forward pass on a blank batch) — and says what it
// found: the plugins, the data, the model's parameters and linear layers, what it routes,
// the optimizer steps per epoch.
#pragma once

#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

int check(const std::string& recipe, const std::vector<std::string>& overrides);

void add_check_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
