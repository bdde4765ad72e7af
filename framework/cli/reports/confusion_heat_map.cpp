// The heat map's drawing, in a module of its own (libmixt_confusion_heat_map.so) that
// `mixt evaluate --confusion-png` loads when asked: OpenCV and its dependencies stay out of
// the mixt program, which then runs where OpenCV is not installed (the GPU pack).
#include "reports/confusion_heat_map.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "mixt/error.h"
#include "reports/png_file.h"

namespace mixt::cli {

void write_confusion_heat_map(const std::filesystem::path& file, const at::Tensor& confusion,
                              const std::vector<std::string>& names) {
  const at::Tensor counts = confusion.to(at::kCPU, at::kLong).contiguous();
  const int classes = static_cast<int>(counts.size(0));
  const int cell = std::clamp(800 / std::max(classes, 1), 4, 48);
  const bool labelled = cell >= 12;  // names and counts only where they fit
  const int left = labelled ? 140 : 0, top = labelled ? 24 : 0;
  const int side = classes * cell;
  cv::Mat image(top + side, left + side, CV_8UC3, cv::Scalar(255, 255, 255));

  cv::Mat shares(classes, classes, CV_8UC1);
  const std::int64_t* value = counts.data_ptr<std::int64_t>();
  for (int i = 0; i < classes; ++i) {
    std::int64_t row = 0;
    for (int j = 0; j < classes; ++j) row += value[i * classes + j];
    for (int j = 0; j < classes; ++j) {
      const double share = row > 0 ? static_cast<double>(value[i * classes + j]) / static_cast<double>(row) : 0.0;
      shares.at<std::uint8_t>(i, j) = static_cast<std::uint8_t>(std::lround(255.0 * share));
    }
  }
  cv::Mat colours, cells;
  cv::applyColorMap(shares, colours, cv::COLORMAP_VIRIDIS);
  cv::resize(colours, cells, cv::Size(side, side), 0, 0, cv::INTER_NEAREST);
  cells.copyTo(image(cv::Rect(left, top, side, side)));

  if (labelled) {
    const double scale = std::min(0.45, cell / 40.0);
    cv::putText(image, "rows: label, columns: predicted (in the same order)", cv::Point(left, 16),
                cv::FONT_HERSHEY_SIMPLEX, 0.45, cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
    for (int i = 0; i < classes; ++i) {
      const std::string name = names[static_cast<std::size_t>(i)].substr(0, 18);
      cv::putText(image, name, cv::Point(4, top + i * cell + cell / 2 + 4), cv::FONT_HERSHEY_SIMPLEX, 0.4,
                  cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
      for (int j = 0; j < classes && cell >= 24; ++j) {
        // Dark text on the bright end of the map, light text on the dark end.
        const cv::Scalar ink = shares.at<std::uint8_t>(i, j) > 160 ? cv::Scalar(0, 0, 0) : cv::Scalar(255, 255, 255);
        cv::putText(image, std::to_string(value[i * classes + j]),
                    cv::Point(left + j * cell + 3, top + i * cell + cell / 2 + 4), cv::FONT_HERSHEY_SIMPLEX, scale, ink,
                    1, cv::LINE_AA);
      }
    }
  }
  write_png(file, image, "the heat map");
}

}  // namespace mixt::cli

// The entry point confusion_heat_map_loader.cpp looks up (unmangled, so dlsym finds it).
extern "C" __attribute__((visibility("default"))) void mixt_write_confusion_heat_map(
    const std::filesystem::path& file, const at::Tensor& confusion, const std::vector<std::string>& names) {
  mixt::cli::write_confusion_heat_map(file, confusion, names);
}
