// mixt/renders_predictions.h — an optional task interface: one sample's prediction drawn as
// an image that `mixt predict --image` writes beside the top classes (a segmentation
// task's colour mask). A task without it has nothing drawn.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixt {

// What mixt predict writes as <image name>.<suffix>.png.
struct RenderedPrediction {
  // uint8 [H, W]: indices into `palette` (written as a palette PNG, so that tools which read
  // VOC masks get the indices back); or uint8 [H, W, 3]: RGB, with `palette` empty.
  at::Tensor pixels;
  std::vector<std::uint8_t> palette;  // RGB triples, at most 256 of them
  std::string suffix = "prediction";  // lower_snake: "mask"
};

// Since ABI 6.5. A task derives from it besides mixt::Task; the host finds it with a
// dynamic_cast (its type information lives in libmixt, so the cast works across libraries):
// a task built against an older SDK is simply one that draws nothing.
class RendersPredictions {
 public:
  virtual ~RendersPredictions();
  // One sample's output: the model's output for it without the batch dimension, float32 on
  // the CPU (a segmenter's [classes, H, W] logits).
  virtual RenderedPrediction render(const at::Tensor& output) const = 0;
};

}  // namespace mixt
