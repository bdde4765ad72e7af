#include "train/lr_range_test.h"

#include <algorithm>
#include <limits>

namespace mixt {

double LrRamp::lr_at(std::int64_t index) const {
  if (steps <= 1) return min_lr;
  const double position = static_cast<double>(std::min(index, steps - 1)) / static_cast<double>(steps - 1);
  return min_lr * std::pow(max_lr / min_lr, position);
}

LrRangeTest::LrRangeTest(LrRamp ramp, double beta, double divergence)
    : ramp_(ramp), beta_(beta), divergence_(divergence) {}

void LrRangeTest::record(double loss, bool applied) {
  LrRangePoint point;
  point.step = static_cast<std::int64_t>(points_.size()) + 1;
  point.lr = next_lr();
  point.loss = loss;
  point.skipped = !applied;
  if (applied) {
    ++applied_;
    average_ = beta_ * average_ + (1 - beta_) * loss;
    point.smoothed = average_ / (1 - std::pow(beta_, static_cast<double>(applied_)));
    // The first point sets the best; a later one diverges past `divergence` times it (a NaN
    // average never comes back, so it ends the test too, as in fastai).
    if (applied_ > 1 && (!std::isfinite(point.smoothed) || point.smoothed > divergence_ * best_)) diverged_ = true;
    if (applied_ == 1 || point.smoothed < best_) best_ = point.smoothed;
  }
  points_.push_back(point);
}

std::vector<LrRangePoint> applied_points(const std::vector<LrRangePoint>& points) {
  std::vector<LrRangePoint> applied;
  for (const LrRangePoint& point : points) {
    if (!point.skipped) applied.push_back(point);
  }
  return applied;
}

std::vector<LrRangePoint> plotted_points(const LrRangeTest& test) {
  std::vector<LrRangePoint> plotted;
  for (const LrRangePoint& point : applied_points(test.points())) {
    if (std::isfinite(point.smoothed)) plotted.push_back(point);
  }
  if (test.diverged() && !plotted.empty() && plotted.back().step == test.points().back().step) plotted.pop_back();
  return plotted;
}

std::optional<std::size_t> suggestion_index(const std::vector<LrRangePoint>& applied, std::size_t skip_begin,
                                            std::size_t skip_end) {
  if (applied.size() <= skip_begin + skip_end) return std::nullopt;
  std::vector<std::size_t> kept;
  for (std::size_t i = skip_begin; i + skip_end < applied.size(); ++i) {
    if (std::isfinite(applied[i].smoothed)) kept.push_back(i);
  }
  if (kept.size() < 2) return std::nullopt;
  // np.gradient(y, x) for unevenly spaced x: second-order central differences inside,
  // first-order differences at both ends.
  const auto x = [&](std::size_t k) { return std::log(applied[kept[k]].lr); };
  const auto y = [&](std::size_t k) { return applied[kept[k]].smoothed; };
  const std::size_t n = kept.size();
  std::size_t best = 0;
  double steepest = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < n; ++k) {
    double gradient = 0;
    if (k == 0) {
      gradient = (y(1) - y(0)) / (x(1) - x(0));
    } else if (k + 1 == n) {
      gradient = (y(n - 1) - y(n - 2)) / (x(n - 1) - x(n - 2));
    } else {
      const double h1 = x(k) - x(k - 1), h2 = x(k + 1) - x(k);
      gradient = (h1 * h1 * y(k + 1) - h2 * h2 * y(k - 1) + (h2 * h2 - h1 * h1) * y(k)) / (h1 * h2 * (h1 + h2));
    }
    if (gradient < steepest) {  // the first of equal ones, as argmin
      steepest = gradient;
      best = k;
    }
  }
  return kept[best];
}

LrPlotFrame plot_frame(const std::vector<LrRangePoint>& plotted) {
  LrPlotFrame frame;
  double lr_low = std::numeric_limits<double>::infinity(), lr_high = 0;
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (const LrRangePoint& point : plotted) {
    if (!std::isfinite(point.smoothed)) continue;
    lr_low = std::min(lr_low, point.lr);
    lr_high = std::max(lr_high, point.lr);
    low = std::min(low, point.smoothed);
    high = std::max(high, point.smoothed);
  }
  if (!(lr_high > 0)) return frame;  // nothing to plot: the default ranges
  frame.log10_lr_min = std::log10(lr_low);
  frame.log10_lr_max = std::log10(lr_high);
  if (frame.log10_lr_max - frame.log10_lr_min < 1e-9) {  // one point: a decade around it
    frame.log10_lr_min -= 0.5;
    frame.log10_lr_max += 0.5;
  }
  const double margin = high > low ? 0.05 * (high - low) : 0.5;
  frame.loss_min = low - margin;
  frame.loss_max = high + margin;
  return frame;
}

}  // namespace mixt
