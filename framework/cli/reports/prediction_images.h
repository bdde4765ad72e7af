// What `mixt predict --image` writes besides the top classes: when the recipe's task draws
// its predictions (mixt::RendersPredictions, since ABI 6.5: segmentation's colour masks),
// each image's drawing as <folder>/<image's name>.<suffix>.png. Any other task draws nothing.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "mixt/config.h"
#include "mixt/renders_predictions.h"
#include "mixt/task.h"
#include "plugins/registry.h"

namespace mixt::cli {

class PredictionImages {
 public:
  // The recipe's task, built on the CPU for this alone; `classes` as the model has them.
  PredictionImages(const Registry& registry, const Config& recipe, std::int64_t classes, std::string folder);
  // The file written for `image` from its output (its row of the batch's), or "" when the
  // task draws nothing.
  std::string write(const std::string& image, const at::Tensor& output);

 private:
  std::unique_ptr<Task> task_;
  const RendersPredictions* renders_ = nullptr;
  std::filesystem::path folder_;
  std::map<std::string, int> names_used_;  // two images of one name get name, name-2, ...
};

// Each image's class probabilities for the top classes, [N, classes]: the softmax of the
// logits, averaged over the positions of an output with more axes (a segmenter's pixels:
// the share of the image each class is predicted to cover, in probability).
at::Tensor class_probabilities(const at::Tensor& logits);

}  // namespace mixt::cli
