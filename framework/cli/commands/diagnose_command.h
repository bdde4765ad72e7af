// `mixt diagnose RECIPE`: where precision bites in a recipe, and the fp32_modules that fix it.
#pragma once

#include <string>
#include <vector>

#include "commands/command.h"
#include "diagnose/diagnosis.h"

namespace mixt::cli {

// Prints the report (a table, or JSON with `json`). Returns 0 for a report (healthy, or a
// fix found), 1 when no fix was found; a bad recipe throws (exit 2).
int diagnose(const std::string& recipe, const std::vector<std::string>& overrides,
             const diagnose::DiagnoseOptions& options, bool json);
void add_diagnose_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
