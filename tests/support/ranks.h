// Runs of `mixt` as the ranks of one data-parallel job on loopback (torchrun's environment
// set by hand), and the comparison of the weights they leave.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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

// Waits until rank 0's `log` holds `mark` (a failure if rank 0 exits first, or after 90 s).
inline ::testing::AssertionResult rank0_logged(ChildProcess& rank0, const fs::path& log, const std::string& mark) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (read_file(log).find(mark) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) {
      return ::testing::AssertionFailure() << "rank 0 logged no '" << mark << "' within 90 s\n" << read_file(log);
    }
    if (rank0.wait_for(0)) return ::testing::AssertionFailure() << "rank 0 exited\n" << read_file(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ::testing::AssertionSuccess();
}

// How rank 0 ended after rank 1 was killed: its exit code (none: still running 45 s later),
// how long after the kill, and its log.
struct LostRankEnd {
  std::optional<int> code;
  double seconds = 0;
  std::string log;
};
inline LostRankEnd kill_rank_1(ChildProcess& rank0, ChildProcess& rank1, const fs::path& rank0_log) {
  const auto killed = std::chrono::steady_clock::now();
  rank1.signal(SIGKILL);
  LostRankEnd end;
  end.code = rank0.wait_for(45);
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  end.log = read_file(rank0_log);
  std::printf("rank 0 exited %d, %.1f s after rank 1 was killed\n", end.code.value_or(-1), end.seconds);
  return end;
}

}  // namespace mixt::testing
