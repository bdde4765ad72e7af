// The tensorboard callback's file: TFRecord's masked CRC-32C against the published CRC-32C
// check value, and a disk that fills up for a while: one warning, the run goes on, and
// TensorBoard reads every record flushed before it filled and after it had room again. Reading back whole runs is tests/cli/tensorboard_cli_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "event_file.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"
#include "train/stop_control.h"

namespace mixt {
namespace {

// CRC-32C("123456789") = 0xE3069283 (RFC 3720 B.4's check value); TFRecord masks it as
// ((crc >> 15) | (crc << 17)) + 0xa282ead8 (tensorflow/core/lib/hash/crc32c.h Mask).
TEST(TensorBoardFile, MasksTheCastagnoliCrcAsTfRecordDoes) {
  const std::uint32_t crc = 0xE3069283u;
  const std::uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  EXPECT_EQ(tensorboard::masked_crc32c("123456789", 9), masked);
}

TEST(TensorBoardFile, AFullDiskIsOneWarningAndTheFlushedCurvesSurvive) {
  testing::TempDir dir;
  const fs::path disk = dir.path() / "disk";
  const testing::MountedTmpfs tmpfs(disk, "size=64k");
  if (!tmpfs.mounted()) GTEST_SKIP() << "mounting a small tmpfs needs root";

  testing::BuiltPlugins plugins;
  auto tensorboard = plugins.registry.make_callback(
      Config(parse_yaml("c: {name: tensorboard, recipe_text: false}", "t"), "").section("c"), CallbackContext{});
  auto fp32 = plugins.registry.make_precision(Config(parse_yaml("c: {name: fp32}", "t"), "").section("c"),
                                              PrecisionContext{});
  TrainState state;
  state.epochs = 3;
  StopControl control;
  tensorboard->on_fit_start(FitStart{state, disk, 0, 1});
  const auto steps = [&](std::int64_t from, std::int64_t to) {
    for (state.global_step = from; state.global_step <= to; ++state.global_step) {
      const StepEnd end{state,
                        state.global_step,
                        to,
                        true,
                        at::scalar_tensor(1.0 / static_cast<double>(state.global_step)),
                        0.1,
                        *fp32,
                        64,
                        1.0,
                        /*logged=*/true,
                        control};
      tensorboard->on_step_end(end);
    }
    --state.global_step;
  };
  steps(1, 10);
  tensorboard->on_epoch_end(EpochEnd{state, nullptr, {}, 0, 0, {}, control});  // flushed: these curves are on the disk
  tmpfs.fill();
  ::testing::internal::CaptureStderr();
  steps(11, 400);
  tensorboard->on_epoch_end(EpochEnd{state, nullptr, {}, 0, 0, {}, control});
  steps(401, 500);
  tensorboard->on_epoch_end(EpochEnd{state, nullptr, {}, 0, 0, {}, control});
  fs::remove(tmpfs.filler());  // room again: the next epoch's records are whole
  steps(501, 510);
  tensorboard->on_epoch_end(EpochEnd{state, nullptr, {}, 0, 0, {}, control});
  tensorboard->on_fit_end(state);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("mixt: warning: tensorboard: cannot write"));
  EXPECT_EQ(said.find("warning"), said.rfind("warning")) << "warned more than once:\n" << said;

  const testing::CommandResult read = testing::run_command(
      "python3 " + testing::shell_quote(testing::configured::source_dir() + "/tests/support/tensorboard_reader.py") +
      " events " + testing::shell_quote(disk.string()));
  ASSERT_EQ(read.exit_code, 0) << read.output;
  const auto events = nlohmann::json::parse(read.output.substr(read.output.find('{')));
  std::vector<std::int64_t> expected;
  for (std::int64_t step = 1; step <= 10; ++step) expected.push_back(step);
  for (std::int64_t step = 501; step <= 510; ++step) expected.push_back(step);
  const auto& loss = events["scalars"]["train/loss"];
  ASSERT_EQ(loss.size(), expected.size()) << read.output;
  for (std::size_t i = 0; i < loss.size(); ++i) {
    EXPECT_EQ(loss[i][0].get<std::int64_t>(), expected[i]);
    EXPECT_EQ(loss[i][1].get<double>(), static_cast<double>(static_cast<float>(1.0 / static_cast<double>(expected[i]))));
  }
}

}  // namespace
}  // namespace mixt
