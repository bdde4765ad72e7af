// Runs of `mixt` as the ranks of one data-parallel job on loopback (torchrun's environment
// set by hand), and the comparison of the weights they leave.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "test_support.h"

namespace mixt::testing {

struct RankResult {
  std::optional<int> exit_code;
  std::string log;
};

// Runs `mixt COMMAND... OVERRIDES[rank]...` (`mixt run r.yaml ...` by default) as `world`
// ranks in `dir`; waits for all.
inline std::vector<RankResult> run_ranks(const TempDir& dir, int world,
                                         const std::vector<std::vector<std::string>>& overrides,
                                         double timeout_seconds = 120,
                                         const std::vector<std::string>& command = {"run", "r.yaml"}) {
  const int port = free_port();
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {configured::mixt_executable()};
    argv.insert(argv.end(), command.begin(), command.end());
    const auto& mine = overrides[static_cast<std::size_t>(r) % overrides.size()];
    argv.insert(argv.end(), mine.begin(), mine.end());
    ranks.push_back(std::make_unique<ChildProcess>(argv, rank_environment(r, world, port), dir.path(),
                                                   dir.path() / ("rank" + std::to_string(r) + ".log")));
  }
  std::vector<RankResult> results;
  for (int r = 0; r < world; ++r) {
    RankResult result;
    result.exit_code = ranks[static_cast<std::size_t>(r)]->wait_for(timeout_seconds);
    result.log = read_file(dir.path() / ("rank" + std::to_string(r) + ".log"));
    results.push_back(result);
  }
  return results;
}

inline double max_difference(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  double worst = 0;
  EXPECT_EQ(a.size(), b.size());
  std::string where;
  for (const auto& [name, tensor] : a) {
    const double d = (tensor - b.at(name)).abs().max().item<double>();
    if (d > worst) worst = d, where = name;
  }
  std::printf("  largest difference in %s (max |value| %.3g)\n", where.c_str(),
              where.empty() ? 0.0 : a.at(where).abs().max().item<double>());
  return worst;
}

}  // namespace mixt::testing
