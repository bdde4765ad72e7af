// `mixt describe KIND NAME [--recipe FILE] [--markdown]`: a component's (or the trainer's)
// options, their defaults and what they mean.
#pragma once

#include <string>

#include "commands/command.h"

namespace mixt::cli {

// `recipe`: when not empty, its `plugins:` are loaded as well, as `run` loads them.
// `markdown`: the options as the rows of a Markdown table (the docs' option tables).
int describe(const std::string& kind, const std::string& name, const std::string& recipe = "", bool markdown = false);

void add_describe_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
