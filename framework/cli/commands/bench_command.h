// `mixt bench`: runs a recipe's model and data under several precision policies in turn
// and prints one table (images/s, step time p50/p95, peak memory, final loss, skipped
// steps). Each policy runs in a child process of its own (`mixt bench-worker`), so global
// math modes, allocator peaks and process memory never leak from one policy to the next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct BenchOptions {
  std::string recipe;
  std::vector<std::string> policies;  // empty: the recipe's own policy
  std::int64_t steps = 50;
  std::int64_t warmup = 10;
  std::optional<std::int64_t> batch;  // none: the recipe's batch size
  // trainer.activation_checkpointing values (none, all, [names]), each a row per policy;
  // empty: the recipe's own.
  std::vector<std::string> checkpointing;
  std::vector<std::string> overrides;
};

// "none,all,[layer1, layer2]" → {"none", "all", "[layer1, layer2]"}: commas inside brackets
// belong to a list of names.
std::vector<std::string> split_checkpointing_settings(const std::string& text);

int bench(const BenchOptions& options);
// One policy, one JSON line on stdout.
int bench_worker(const BenchOptions& options);

// `mixt bench` and, hidden, the `mixt bench-worker` it starts per policy, with their flags.
void add_bench_commands(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
