// `mixt lr-find RECIPE`: Smith's learning-rate range test from the recipe's start (its model
// and initial weights, data, precision policy, optimizer; its scheduler and callbacks left
// out), the curve as JSON and, with --png, a plot, and the suggestion printed as the override
// to add. Nothing else is written: no run directory, no checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct LrFindOptions {
  std::string recipe;
  std::vector<std::string> overrides;  // key=value, as for `mixt run`
  double min_lr = 1e-7;
  double max_lr = 10.0;
  std::int64_t steps = 100;  // applied optimizer steps of the ramp
  std::string json;          // the curve; empty: <output>/lr-find/<name>.json
  std::string png;           // the plot; empty: none
};

int lr_find(const LrFindOptions& options);
void add_lr_find_command(CLI::App& app, Commands& commands);

// "3.2e-3": two significant digits, the exponent without padding (as an override reads).
std::string short_lr(double lr);

}  // namespace mixt::cli
