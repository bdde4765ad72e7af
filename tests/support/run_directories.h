// The run directory an end-to-end test's `mixt run` wrote.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace mixt::testing {

// The one run directory under `runs` (OUTPUT/<recipe name>): a test failure, and an empty
// path, unless it holds exactly one entry besides links (elastic-<id> links to a run).
inline std::filesystem::path only_run_directory(const std::filesystem::path& runs) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(runs)) {
    if (!entry.is_symlink()) found.push_back(entry.path());
  }
  EXPECT_EQ(found.size(), 1u) << "run directories in " << runs;
  return found.size() == 1 ? found.front() : std::filesystem::path();
}

}  // namespace mixt::testing
