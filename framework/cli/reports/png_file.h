// What the drawing modules (confusion_heat_map.cpp, lr_curve_plot.cpp) share: writing an
// image as PNG, with mixt's error (OpenCV throws for an extension it cannot encode).
#pragma once

#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <string>

#include "mixt/error.h"

namespace mixt::cli {

// `what` names the drawing in the error ("the heat map").
inline void write_png(const std::filesystem::path& file, const cv::Mat& image, const std::string& what) {
  bool written = false;
  try {
    written = cv::imwrite(file.string(), image);
  } catch (const cv::Exception&) {
    written = false;
  }
  if (!written)
    throw runtime_error("cannot write " + what + " " + file.string(),
                        "name a .png file in a directory you can write to");
}

}  // namespace mixt::cli
