// Smith's learning-rate range test as arithmetic only (no model, no trainer): the
// exponential ramp, the smoothed loss and its divergence stop, the suggestion, and where a
// plot puts each point. train/lr_finder.h drives it with the Trainer; `mixt lr-find` prints it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace mixt {

// lr(i) = min * (max / min)^(i / (steps - 1)) for the i-th applied step (0-based): equal
// steps in log lr from min to max, both included (one step: min alone).
struct LrRamp {
  double min_lr = 1e-7;
  double max_lr = 10.0;
  std::int64_t steps = 100;
  double lr_at(std::int64_t index) const;
};

struct LrRangePoint {
  std::int64_t step = 0;  // the optimizer step, 1-based, skipped ones counted
  double lr = 0;          // the learning rate the step used (a skipped step's would have)
  double loss = NAN;      // the step's training loss
  double smoothed = NAN;  // the bias-corrected moving average up to here; NaN when skipped
  bool skipped = false;   // the precision policy skipped the step: not smoothed, not plotted
};

// The curve as fastai's LRFinder and Lightning's _LRCallback record it: an exponential moving
// average of the loss (beta 0.98) divided by 1 - beta^k after the k-th applied step, the test
// ending once the smoothed loss exceeds `divergence` times the best one before it (or is not
// finite). Skipped steps are kept as points but take no ramp step and no part in the average.
class LrRangeTest {
 public:
  explicit LrRangeTest(LrRamp ramp, double beta = 0.98, double divergence = 4.0);

  // The learning rate of the next applied step.
  double next_lr() const { return ramp_.lr_at(applied_); }
  // One optimizer step's loss; `applied`: the policy did not skip it.
  void record(double loss, bool applied);
  // Every ramp step is done, or the loss diverged.
  bool finished() const { return diverged_ || applied_ >= ramp_.steps; }
  bool diverged() const { return diverged_; }
  std::int64_t applied_steps() const { return applied_; }
  std::int64_t skipped_steps() const { return static_cast<std::int64_t>(points_.size()) - applied_; }
  const std::vector<LrRangePoint>& points() const { return points_; }
  const LrRamp& ramp() const { return ramp_; }

 private:
  LrRamp ramp_;
  double beta_, divergence_;
  double average_ = 0, best_ = 0;
  std::int64_t applied_ = 0;
  bool diverged_ = false;
  std::vector<LrRangePoint> points_;
};

// The applied points, in order (what is smoothed and plotted).
std::vector<LrRangePoint> applied_points(const std::vector<LrRangePoint>& points);

// What the plot draws: the applied points with a finite smoothed loss, less the one that
// diverged (many times the others, it would flatten the rest of the curve; Lightning's plot
// leaves out the last point too).
std::vector<LrRangePoint> plotted_points(const LrRangeTest& test);

// Lightning's LRFinder.suggestion(skip_begin=10, skip_end=1): of the applied points less the
// first `skip_begin` and the last `skip_end`, those with a finite smoothed loss; the one where
// its gradient with respect to log lr (np.gradient: central differences, one-sided at the
// ends) is most negative. Returns the index into `applied` (as applied_points() gives), or
// nothing with fewer than two such points.
std::optional<std::size_t> suggestion_index(const std::vector<LrRangePoint>& applied, std::size_t skip_begin = 10,
                                            std::size_t skip_end = 1);

// Where the PNG puts the curve: x is log10(lr) over the plotted points' range, y the smoothed
// loss over theirs (5% margin above and below), both into the plotting area
// [left, right] x [top, bottom] of a width x height image (y grows downwards). The JSON keeps
// it, so a reader can map each point to its pixel.
struct LrPlotFrame {
  int width = 800, height = 500;
  int left = 80, top = 40, right = 770, bottom = 440;
  double log10_lr_min = 0, log10_lr_max = 1;
  double loss_min = 0, loss_max = 1;
  double x(double lr) const {
    return left + (std::log10(lr) - log10_lr_min) / (log10_lr_max - log10_lr_min) * (right - left);
  }
  double y(double loss) const { return bottom - (loss - loss_min) / (loss_max - loss_min) * (bottom - top); }
};
LrPlotFrame plot_frame(const std::vector<LrRangePoint>& plotted);

}  // namespace mixt
