// mixt/helpers/transforms.h — image transforms shared by the dataset plugins, configured in the
// recipe in order:
//
//   data:
//     train:
//       transforms:                       # or a preset name: `transforms: imagenet_train`
//         - {name: random_resized_crop, size: 224}
//         - random_horizontal_flip          # a bare name is {name: random_horizontal_flip}
//         - to_tensor
//         - normalize                       # ImageNet mean/std unless given
//
// An image travels as an at::Tensor H x W x C uint8 (what a decoder gives) through the
// geometric and colour transforms; `to_tensor` turns it into float C x H x W in [0, 1]
// (channels_last memory on request), after which only `normalize` may follow.
// Semantics are torchvision's (transforms.v2 on tensors); resizing is bilinear with
// antialiasing through ATen's _upsample_bilinear2d_aa — the kernel torchvision itself uses
// for tensors, which differs from PIL's bilinear by at most a grey level or two on uint8.
// Every random draw comes from the sample's SampleRng, so augmentations are reproducible.
#pragma once

#include <optional>

#include "mixt/options.h"

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixt/config.h"
#include "mixt/helpers/sample_rng.h"
#include "mixt/option_doc.h"

namespace mixt {

class Transform {
 public:
  virtual ~Transform() = default;
  virtual at::Tensor apply(const at::Tensor& image, SampleRng& rng) const = 0;
  // True for transforms that take the float C x H x W tensor made by to_tensor.
  virtual bool takes_tensor() const { return false; }
  // True for to_tensor itself.
  virtual bool makes_tensor() const { return false; }
  virtual std::string describe() const = 0;  // "resize(256)"
};

class TransformPipeline {
 public:
  void add(std::unique_ptr<Transform> transform);
  at::Tensor operator()(at::Tensor image, SampleRng& rng) const;
  // The shape of the output for an h x w x channels input (runs the pipeline on zeros).
  std::vector<std::int64_t> output_shape(std::int64_t h, std::int64_t w, std::int64_t channels) const;
  // True when every input size gives the same output shape (needed to stack a batch).
  bool has_fixed_output_size(std::int64_t channels) const;
  bool empty() const { return steps_.empty(); }
  std::string describe() const;  // "resize(256) -> center_crop(224x224) -> ..."

 private:
  std::vector<std::shared_ptr<const Transform>> steps_;
};

// The crop box of random_resized_crop: torchvision's RandomResizedCrop.get_params —
// up to 10 draws of (area fraction in `scale`, log-uniform aspect ratio in `ratio`), then
// the center-crop fallback.
struct CropBox {
  std::int64_t top = 0, left = 0, height = 0, width = 0;
};
CropBox random_resized_crop_box(std::int64_t height, std::int64_t width, std::array<double, 2> scale,
                                std::array<double, 2> ratio, SampleRng& rng);

// The transforms, for plugins that build a pipeline in code.
std::unique_ptr<Transform> make_random_resized_crop(std::int64_t height, std::int64_t width,
                                                    std::array<double, 2> scale = {0.08, 1.0},
                                                    std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0});
std::unique_ptr<Transform> make_resize(std::int64_t shorter_side);
std::unique_ptr<Transform> make_center_crop(std::int64_t height, std::int64_t width);
std::unique_ptr<Transform> make_random_horizontal_flip(double p = 0.5);
// Each factor is drawn uniformly in its [low, high]; {1, 1} leaves that property alone.
// torchvision's `brightness=x` is the range [max(0, 1 - x), 1 + x].
std::unique_ptr<Transform> make_color_jitter(std::array<double, 2> brightness, std::array<double, 2> contrast,
                                             std::array<double, 2> saturation);
std::unique_ptr<Transform> make_to_tensor(bool channels_last = false);
std::unique_ptr<Transform> make_normalize(std::vector<double> mean, std::vector<double> std);

inline const std::vector<double> kImageNetMean = {0.485, 0.456, 0.406};
inline const std::vector<double> kImageNetStd = {0.229, 0.224, 0.225};

// The standard ImageNet pipelines (torchvision's reference recipe):
//   imagenet_train: random_resized_crop(size), random_horizontal_flip, to_tensor, normalize
//   imagenet_eval:  resize(size * 256 / 224), center_crop(size), to_tensor, normalize
TransformPipeline imagenet_train_pipeline(std::int64_t size = 224, bool channels_last = false);
TransformPipeline imagenet_eval_pipeline(std::int64_t size = 224, bool channels_last = false);

// Reads the `key` option of a dataset section: a preset name, or a list of transforms
// (bare names or {name: ..., options}); presets may appear as list items too. Absent:
// `fallback`. Errors (unknown name, bad option, normalize before to_tensor, a pipeline not
// ending in a tensor) are recipe errors at the item's file:line:column.
TransformPipeline read_transforms(const Config& section, std::string_view key, TransformPipeline fallback);

// The `transforms` key in a dataset's section, for OptionsOf::include.
struct TransformKeys {
  std::optional<TransformPipeline> pipeline;  // absent: the dataset's default pipeline
};
// `default_pipeline` says in words what the dataset uses when the key is absent.
OptionsOf<TransformKeys> transform_keys(const std::string& default_pipeline);

}  // namespace mixt
