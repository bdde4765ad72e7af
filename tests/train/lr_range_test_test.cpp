// The range test's arithmetic (train/lr_range_test.h) against fastai's and Lightning's
// formulas applied with numpy to fixed loss sequences (tests/golden/make_lr_find_golden.py).
#include "train/lr_range_test.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace mixt {
namespace {

double number(const nlohmann::json& value) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    return text == "nan" ? NAN : text == "inf" ? INFINITY : -INFINITY;
  }
  return value.get<double>();
}

nlohmann::json golden_cases() {
  return nlohmann::json::parse(testing::read_file(testing::source_dir() / "tests/golden/lr_find.json"))["cases"];
}

// Feeds a case's sequence until the test says it is finished, as the callback does.
LrRangeTest run_case(const nlohmann::json& c) {
  LrRangeTest test({c["min_lr"].get<double>(), c["max_lr"].get<double>(), c["steps"].get<std::int64_t>()});
  for (const auto& step : c["sequence"]) {
    if (test.finished()) break;
    test.record(number(step["loss"]), step["applied"].get<bool>());
  }
  return test;
}

TEST(LrRangeTest, SmoothingDivergenceAndSuggestionMatchTheNumpyReference) {
  const nlohmann::json cases = golden_cases();
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const LrRangeTest test = run_case(c);
    ASSERT_EQ(test.points().size(), c["consumed"].get<std::size_t>());
    EXPECT_EQ(test.diverged(), c["diverged"].get<bool>());
    for (std::size_t i = 0; i < test.points().size(); ++i) {
      const LrRangePoint& p = test.points()[i];
      const auto& expected = c["points"][i];
      EXPECT_EQ(p.step, static_cast<std::int64_t>(i) + 1);
      EXPECT_EQ(p.skipped, expected["skipped"].get<bool>()) << "point " << i;
      EXPECT_NEAR(p.lr, expected["lr"].get<double>(), 1e-12 * expected["lr"].get<double>()) << "point " << i;
      if (p.skipped) continue;
      const double smoothed = number(expected["smoothed"]);
      if (std::isnan(smoothed)) {
        EXPECT_TRUE(std::isnan(p.smoothed)) << "point " << i;
      } else {
        EXPECT_NEAR(p.smoothed, smoothed, 1e-12 * std::abs(smoothed)) << "point " << i;
      }
    }
    // The plot: every applied point with a finite smoothed loss but the diverging one.
    std::size_t finite = 0;
    for (const LrRangePoint& p : applied_points(test.points())) finite += std::isfinite(p.smoothed);
    const std::vector<LrRangePoint> plotted = plotted_points(test);
    EXPECT_EQ(plotted.size(), finite - (test.diverged() && std::isfinite(test.points().back().smoothed) ? 1 : 0));
    if (test.diverged()) {
      EXPECT_LT(plotted.back().step, test.points().back().step);
    }
    const std::optional<std::size_t> index = suggestion_index(applied_points(test.points()));
    if (c["suggestion_index"].is_null()) {
      EXPECT_FALSE(index.has_value());
    } else {
      ASSERT_TRUE(index.has_value());
      EXPECT_EQ(*index, c["suggestion_index"].get<std::size_t>());
      EXPECT_NEAR(applied_points(test.points())[*index].lr, c["suggested_lr"].get<double>(),
                  1e-12 * c["suggested_lr"].get<double>());
    }
  }
}

TEST(LrRangeTest, TheRampIsGeometricFromMinToMaxBothIncluded) {
  const LrRamp ramp{1e-6, 1.0, 7};
  EXPECT_DOUBLE_EQ(ramp.lr_at(0), 1e-6);
  EXPECT_NEAR(ramp.lr_at(6), 1.0, 1e-12);
  for (int i = 1; i < 7; ++i) EXPECT_NEAR(ramp.lr_at(i) / ramp.lr_at(i - 1), 10.0, 1e-9);
  EXPECT_NEAR(ramp.lr_at(99), 1.0, 1e-12);  // never past --max
}

TEST(LrRangeTest, ASkippedStepTakesNoRampStepAndLeavesTheAverage) {
  LrRangeTest test({1e-3, 1e-1, 3});
  test.record(2.0, true);
  test.record(INFINITY, false);
  test.record(1.0, true);
  ASSERT_EQ(test.points().size(), 3u);
  EXPECT_TRUE(test.points()[1].skipped);
  EXPECT_DOUBLE_EQ(test.points()[1].lr, test.points()[2].lr);  // the lr the skipped step would have used
  // As if the skipped step had not been there: (0.98*0.02*2 + 0.02*1) / (1 - 0.98^2).
  EXPECT_NEAR(test.points()[2].smoothed, (0.98 * 0.02 * 2.0 + 0.02 * 1.0) / (1 - 0.98 * 0.98), 1e-12);
  EXPECT_EQ(test.skipped_steps(), 1);
  EXPECT_FALSE(test.finished());
  test.record(1.0, true);
  EXPECT_TRUE(test.finished());
  EXPECT_FALSE(test.diverged());
}

TEST(LrRangeTest, ThePlotFrameSpansThePlottedPoints) {
  LrRangeTest test({1e-4, 1e-1, 4});
  for (double loss : {2.0, 1.0, 0.5, 3.0}) test.record(loss, true);
  const LrPlotFrame frame = plot_frame(plotted_points(test));
  EXPECT_NEAR(frame.log10_lr_min, -4, 1e-12);
  EXPECT_NEAR(frame.log10_lr_max, -1, 1e-12);
  EXPECT_NEAR(frame.x(1e-4), frame.left, 1e-9);
  EXPECT_NEAR(frame.x(1e-1), frame.right, 1e-9);
  double low = INFINITY, high = -INFINITY;
  for (const LrRangePoint& p : test.points()) {
    low = std::min(low, p.smoothed);
    high = std::max(high, p.smoothed);
  }
  EXPECT_NEAR(frame.loss_min, low - 0.05 * (high - low), 1e-12);
  EXPECT_NEAR(frame.loss_max, high + 0.05 * (high - low), 1e-12);
  EXPECT_GT(frame.y(low), frame.y(high));  // lower losses lower in the picture
}

}  // namespace
}  // namespace mixt
