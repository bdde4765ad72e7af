// The `mixt` subcommands. Each returns an exit code; errors are thrown as mixt::Error and
// turned into a message and exit code by main().
#pragma once

#include <string>
#include <vector>

namespace mixt::cli {

int run(const std::string& recipe, const std::vector<std::string>& overrides);
int check(const std::string& recipe, const std::vector<std::string>& overrides);
// `recipe`: when not empty, its `plugins:` are loaded as well, as `run` loads them.
int list(const std::string& kind, const std::string& glob, const std::string& recipe = "");
int describe(const std::string& kind, const std::string& name, const std::string& recipe = "");
std::string version_text();

}  // namespace mixt::cli
