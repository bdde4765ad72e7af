// `mixt evaluate --confusion-png`: the confusion matrix as a heat map, drawn with OpenCV
// in a module of its own (drawing_module.h; a build without OpenCV says so instead).
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

namespace mixt::cli {

// Each cell's colour is its share of its row (the label's samples), so a class with few
// samples reads as clearly as a large one; rows are labels, columns predictions. Counts are
// written in the cells and names beside the rows when there is room.
void write_confusion_heat_map(const std::filesystem::path& file, const at::Tensor& confusion,
                              const std::vector<std::string>& names);

// Before the evaluation: a usage error for `file` when this build cannot draw one (no OpenCV).
void check_heat_maps_drawable(const std::filesystem::path& file);

}  // namespace mixt::cli
