// `mixt run RECIPE [key=value ...]`: trains the model a recipe describes, then says what the
// run did (steps, samples and their rate, the last evaluation, the run directory).
#pragma once

#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

int run(const std::string& recipe, const std::vector<std::string>& overrides);

void add_run_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
