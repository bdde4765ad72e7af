// The range test's plot, in a module of its own (libmixt_lr_curve_plot.so) that `mixt
// lr-find --png` loads when asked: OpenCV stays out of the mixt program.
#include "reports/lr_curve_plot.h"

#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>

#include "mixt/error.h"
#include "reports/png_file.h"

namespace mixt::cli {

namespace {
const cv::Scalar kInk(0, 0, 0), kGrid(225, 225, 225);
const cv::Scalar kCurve(kLrCurveBgr[0], kLrCurveBgr[1], kLrCurveBgr[2]);
const cv::Scalar kMarker(kLrSuggestionBgr[0], kLrSuggestionBgr[1], kLrSuggestionBgr[2]);

cv::Point pixel(const LrPlotFrame& frame, double lr, double loss) {
  return {static_cast<int>(std::lround(frame.x(lr))), static_cast<int>(std::lround(frame.y(loss)))};
}

void text(cv::Mat& image, const std::string& line, cv::Point at, double scale = 0.42) {
  cv::putText(image, line, at, cv::FONT_HERSHEY_SIMPLEX, scale, kInk, 1, cv::LINE_AA);
}

std::string number(const char* pattern, double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

// Decades on x (1e-7 ... 10), five values on y, with light grid lines.
void draw_axes(cv::Mat& image, const LrPlotFrame& f) {
  for (int decade = static_cast<int>(std::ceil(f.log10_lr_min - 1e-9)); decade <= f.log10_lr_max + 1e-9; ++decade) {
    const int x = static_cast<int>(std::lround(f.x(std::pow(10.0, decade))));
    cv::line(image, {x, f.top}, {x, f.bottom}, kGrid, 1, cv::LINE_8);
    text(image, "1e" + std::to_string(decade), {x - 14, f.bottom + 18});
  }
  for (int i = 0; i <= 4; ++i) {
    const double loss = f.loss_min + (f.loss_max - f.loss_min) * i / 4.0;
    const int y = static_cast<int>(std::lround(f.y(loss)));
    cv::line(image, {f.left, y}, {f.right, y}, kGrid, 1, cv::LINE_8);
    text(image, number("%.3g", loss), {8, y + 4});
  }
  cv::rectangle(image, {f.left, f.top}, {f.right, f.bottom}, kInk, 1, cv::LINE_8);
  text(image, "learning rate (log scale)", {(f.left + f.right) / 2 - 90, f.height - 14}, 0.5);
}
}  // namespace

void write_lr_curve_plot(const std::filesystem::path& file, const LrCurvePlot& plot) {
  const LrPlotFrame& f = plot.frame;
  cv::Mat image(f.height, f.width, CV_8UC3, cv::Scalar(255, 255, 255));
  draw_axes(image, f);
  text(image, plot.title, {f.left, 18}, 0.5);
  // The marker and its words first: the curve drawn over them stays whole.
  if (plot.suggestion) {
    const cv::Point at = pixel(f, plot.suggestion->first, plot.suggestion->second);
    cv::circle(image, at, 7, kMarker, 2, cv::LINE_8);
    // Right of the marker, or left of it near the right edge.
    const std::string words = "suggested lr " + number("%.2g", plot.suggestion->first);
    int baseline = 0;
    const int width = cv::getTextSize(words, cv::FONT_HERSHEY_SIMPLEX, 0.5, 1, &baseline).width;
    const int x = at.x + 12 + width < f.right ? at.x + 12 : at.x - 12 - width;
    text(image, words, {x, at.y - 12}, 0.5);
  }
  std::vector<cv::Point> line;
  for (const auto& [lr, loss] : plot.points) line.push_back(pixel(f, lr, loss));
  if (line.size() == 1) cv::circle(image, line.front(), 2, kCurve, cv::FILLED, cv::LINE_8);
  if (line.size() > 1) cv::polylines(image, line, /*isClosed=*/false, kCurve, 2, cv::LINE_8);
  write_png(file, image, "the plot");
}

}  // namespace mixt::cli

// The entry point lr_curve_plot_loader.cpp looks up (unmangled, so dlsym finds it).
extern "C" __attribute__((visibility("default"))) void mixt_write_lr_curve_plot(const std::filesystem::path& file,
                                                                                const mixt::cli::LrCurvePlot& plot) {
  mixt::cli::write_lr_curve_plot(file, plot);
}
