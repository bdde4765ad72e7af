// The `mixt` subcommands run, check, list and describe. Each returns an exit code; errors
// are thrown as mixt::Error and turned into a message and exit code by main().
#pragma once

#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

int run(const std::string& recipe, const std::vector<std::string>& overrides);
int check(const std::string& recipe, const std::vector<std::string>& overrides);
// `recipe`: when not empty, its `plugins:` are loaded as well, as `run` loads them.
int list(const std::string& kind, const std::string& glob, const std::string& recipe = "");
// `markdown`: the options as the rows of a Markdown table (the docs' option tables).
int describe(const std::string& kind, const std::string& name, const std::string& recipe = "", bool markdown = false);
std::string version_text();

// Their flags, each subcommand added to `app` in this order.
void add_run_command(CLI::App& app, Commands& commands);
void add_check_command(CLI::App& app, Commands& commands);
void add_list_command(CLI::App& app, Commands& commands);
void add_describe_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
