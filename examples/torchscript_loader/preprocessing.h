// The evaluation transforms of mixt's recipes (docs/datasets.md, "Transforms") redone with
// LibTorch alone, from the metadata of an exported file: an image file in, the model's input
// sample out, as `mixt predict --image` would feed it.
#pragma once

#include <torch/script.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

struct Step {
  enum class Kind { resize, center_crop, to_tensor, normalize } kind;
  std::int64_t height = 0, width = 0;  // resize: the shorter side in height; center_crop: the box
  std::vector<double> mean, std;       // normalize
};

// `transforms` as mixt.json states them: a preset name, a preset map, or a list. Throws
// std::runtime_error for what an inference program must not redo (random augmentation) or
// cannot know (the dataset's own default, which the recipe did not spell out).
std::vector<Step> read_pipeline(const nlohmann::json& transforms, const std::string& data_section);

std::string describe(const std::vector<Step>& pipeline);  // "resize(36) -> center_crop(32x32) -> ..."

// An image file decoded as mixt's image_folder dataset does (OpenCV, EXIF orientation ignored):
// H x W x channels uint8, RGB for 3 channels, grey for 1.
torch::Tensor decode_image(const std::string& path, std::int64_t channels);

// The pipeline on one decoded image: float C x H x W.
torch::Tensor preprocess(const std::vector<Step>& pipeline, torch::Tensor image);
