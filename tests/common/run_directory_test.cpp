// The run directory: metrics.jsonl and log.txt on a full disk, and what reopening it after a
// killed job cleans up.
#include "common/run_directory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace mixt {
namespace {

// A disk that fills up for a while (a tmpfs of 64 KiB, filled): the line that did not fit
// is cut back, so once there is room again the next line starts on a line of its own and
// every line of metrics.jsonl parses. Root only (it mounts the tmpfs).
TEST(RunDirectory, ALineThatDidNotFitIsCutBackSoTheNextLineIsWhole) {
  testing::TempDir dir;
  const fs::path disk = dir.path() / "disk";
  const testing::MountedTmpfs tmpfs(disk, "size=64k");
  if (!tmpfs.mounted()) GTEST_SKIP() << "mounting a small tmpfs needs root";
  fs::path metrics;
  {
    RunDirectory run(disk, "full");
    metrics = run.path() / "metrics.jsonl";
    run.append_metrics({{"step", 1}});
    tmpfs.fill();
    ::testing::internal::CaptureStderr();
    run.append_metrics({{"step", 2}, {"note", std::string(6000, 'n')}});  // fits the page's rest only in part
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_THAT(said, HasSubstr("cannot append to " + metrics.string()));
    fs::remove(tmpfs.filler());
    run.append_metrics({{"step", 3}});
  }
  std::ifstream in(metrics);
  std::vector<std::int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    try {
      steps.push_back(nlohmann::json::parse(line).at("step").get<std::int64_t>());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "a line that is not JSON: " << line.substr(0, 80) << "... ("
                    << std::string(e.what()).substr(0, 100) << ")";
    }
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 3}));
}

// metrics.jsonl on a full disk (/dev/full fails every write with ENOSPC): one warning, and
// the run goes on; the lines used to vanish without a word.
TEST(RunDirectory, AMetricsFileThatCannotBeWrittenIsWarnedAboutOnce) {
  testing::TempDir dir;
  fs::path path;
  {
    RunDirectory made(dir.path(), "full");
    path = made.path();
  }
  fs::remove(path / "metrics.jsonl");
  fs::create_symlink("/dev/full", path / "metrics.jsonl");
  RunDirectory reopened(path, RunDirectory::Reopen{});
  ::testing::internal::CaptureStderr();
  reopened.append_metrics({{"step", 1}});
  reopened.append_metrics({{"step", 2}});
  reopened.append_log("still written");
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("mixt: warning: cannot append to " + (path / "metrics.jsonl").string() +
                      " (No space left on device): lines are missing from it"))
      << said;
  EXPECT_EQ(said.find("cannot append", said.find("cannot append") + 1), std::string::npos) << said;
  EXPECT_EQ(testing::read_file(path / "log.txt"), "still written\n");
}

// A restarted job reopens its run directory: what its predecessor was writing when it died
// (epoch-0003.tmp) is removed.
TEST(RunDirectory, ReopeningRemovesTheTemporariesOfAKilledWrite) {
  testing::TempDir dir;
  fs::path path;
  {
    RunDirectory made(dir.path(), "restart");
    path = made.path();
  }
  fs::create_directories(path / "checkpoints");
  std::ofstream(path / "checkpoints" / "epoch-0003.tmp") << "half";
  RunDirectory reopened(path, RunDirectory::Reopen{});
  EXPECT_FALSE(fs::exists(path / "checkpoints" / "epoch-0003.tmp"));
}

}  // namespace
}  // namespace mixt
