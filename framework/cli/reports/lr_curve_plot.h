// `mixt lr-find --png`: the range test's smoothed loss against log lr, with the suggestion
// marked, drawn with OpenCV in a module of its own (drawing_module.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/lr_range_test.h"

namespace mixt::cli {

// The curve's colour, BGR, drawn without anti-aliasing (so a reader of the PNG finds exactly
// these pixels on it), and the suggestion's marker's.
inline constexpr unsigned char kLrCurveBgr[3] = {180, 119, 31};
inline constexpr unsigned char kLrSuggestionBgr[3] = {40, 39, 214};

struct LrCurvePlot {
  std::vector<std::pair<double, double>> points;        // (lr, smoothed loss), finite, in order
  std::optional<std::pair<double, double>> suggestion;  // the same for the suggested point
  LrPlotFrame frame;                                    // plot_frame() of the same points
  std::string title;
};

// Throws a runtime error when `file` cannot be written (or OpenCV cannot encode its extension).
void write_lr_curve_plot(const std::filesystem::path& file, const LrCurvePlot& plot);

// Before the test: a usage error for `file` when this build cannot draw one (no OpenCV).
void check_lr_curves_drawable(const std::filesystem::path& file);

}  // namespace mixt::cli
